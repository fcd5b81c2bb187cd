/**
 * Packages loaded on first use, written with a literal `require("name")` so that bundlers (the
 * Action, the single-file agent) see and inline them. Where no bundle inlined it — plain Node's ES
 * modules have no `require`, and a bundle that leaves packages external has one that throws — the
 * package comes from node_modules.
 */
import { createRequire } from "node:module";

/** `bundled()` (a literal `require`), else `name` from node_modules beside this module. */
export function bundledOr(name: string, bundled: () => unknown): unknown {
  try {
    return bundled();
  } catch {
    return createRequire(import.meta.url)(name);
  }
}
