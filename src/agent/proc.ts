/**
 * The process table, read from /proc: whether a pid is alive, when it started and what it runs.
 * The start time (field 22 of /proc/<pid>/stat, in clock ticks since boot) with the pid identifies
 * a process for good: a reused pid has another start time.
 */
import { readFileSync } from "node:fs";

/**
 * Whether any process has this pid (a zombie, or one of another user, included): signal 0 asks
 * the kernel without sending anything.
 */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A live process as /proc shows it. */
export interface ProcessInfo {
  pid: number;
  /** One letter: R running, S sleeping, Z zombie... */
  state: string;
  startTime: string;
  /** Arguments separated by NUL. */
  cmdline: string;
}

/** The live process with this pid, or undefined when there is none (or only a zombie). */
export function readProcess(pid: number): ProcessInfo | undefined {
  let stat: string;
  let cmdline: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return undefined;
  }
  // The command name is in parentheses and may itself contain spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const state = fields[0] ?? "?";
  if (state === "Z" || state === "X") return undefined;
  return { pid, state, startTime: fields[19] ?? "", cmdline };
}

/**
 * True when `pid` is still the very process recorded. The pid and its start time are the identity;
 * the command line is not compared, since it changes at exec, a moment after the spawn recorded it.
 */
export function isSameProcess(record: { pid: number; startTime: string }): boolean {
  const info = readProcess(record.pid);
  return info !== undefined && info.startTime === record.startTime;
}
