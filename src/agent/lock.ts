/**
 * One applier per state directory across processes (a one-shot `steward agent apply` next to a
 * long-running agent): a lock file holding the owner's pid. A lock whose owner died is taken over.
 */
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { StewardError } from "../model/errors.js";
import { processExists } from "./proc.js";

/** Read once: `process.pid` is a system call each time. */
const PID = String(process.pid);

/** Waits for and takes the lock; returns the function that releases it. */
export async function acquireLock(dir: string, timeoutMs = 60_000): Promise<() => void> {
  const path = join(dir, "lock");
  const deadline = Date.now() + timeoutMs;
  let madeDir = false;
  for (;;) {
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, PID);
      closeSync(fd);
      return () => {
        try {
          unlinkSync(path);
        } catch {
          // Already gone (the state directory was removed).
        }
      };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" && !madeDir) {
        // No state directory yet (made only then: a lock taken every apply costs no mkdir).
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        madeDir = true;
        continue;
      }
      if (code !== "EEXIST") throw error;
    }
    let owner = Number.NaN;
    try {
      owner = Number(readFileSync(path, "utf8"));
    } catch {
      continue;
    }
    if (Number.isInteger(owner) && owner > 0 && !processExists(owner)) {
      try {
        unlinkSync(path);
      } catch {
        // Someone else took it over first.
      }
      continue;
    }
    if (Date.now() > deadline)
      throw new StewardError(
        "E_BUSY",
        `another agent process (pid ${owner}) is applying with state directory ${dir}: wait for it, or use another --state`,
      );
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
