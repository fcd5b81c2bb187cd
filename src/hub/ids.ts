import { monotonicFactory } from "ulid";
import type { Clock } from "./clock.js";

/** Makes ULIDs from the hub's clock: sortable by creation time, strictly increasing within a process. */
export function idFactory(clock: Clock): () => string {
  const next = monotonicFactory();
  return () => next(clock.now().getTime());
}
