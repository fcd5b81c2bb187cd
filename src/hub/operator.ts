/**
 * What an operator changes directly (not through Git): draining a node. The change is written to
 * the store; a running hub picks it up when nudged (or at its next start). Draining changes
 * availability, not intent: desired state is kept and reconciliation resumes on undrain.
 */
import { UsageError } from "../model/errors.js";
import type { NodeRecord } from "./records.js";
import type { Store } from "./store/store.js";

/** Marks `name` draining (or not). Throws UsageError for a node the hub does not know. */
export async function setNodeDraining(
  store: Store,
  name: string,
  draining: boolean,
  detail: { by: string; reason?: string; at: Date },
): Promise<NodeRecord> {
  const known = await store.nodes.get(name);
  if (!known) {
    const names = (await store.nodes.list()).map((n) => n.name);
    throw new UsageError(
      `node "${name}" is not known to the hub${names.length > 0 ? ` (known: ${names.join(", ")})` : ""}: check the name, or sync the fleet repo first`,
      { node: name },
    );
  }
  const entry: { by: string; reason?: string; at: string } = { by: detail.by, at: detail.at.toISOString() };
  if (detail.reason !== undefined) entry.reason = detail.reason;
  await store.transaction((tx) => tx.nodes.setDraining(name, draining, entry));
  return (await store.nodes.get(name))!;
}
