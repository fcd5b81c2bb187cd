/** File modes in tests: each path's permission bits, compared as octal so a failure reads `600`, not `384`. */
import { statSync } from "node:fs";
import { expect } from "vitest";

/** Expects each `[path, mode]`'s permission bits to be `mode`. */
export function expectModes(entries: readonly (readonly [string, number])[]): void {
  for (const [path, mode] of entries)
    expect((statSync(path).mode & 0o777).toString(8), path).toBe(mode.toString(8));
}
