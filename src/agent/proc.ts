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

/** Fields 3 onwards of /proc/<pid>/stat, or undefined when there is no such process. */
function statFields(pid: number): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name is in parentheses and may itself contain spaces and parentheses.
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** The live process with this pid, or undefined when there is none (or only a zombie). */
export function readProcess(pid: number): ProcessInfo | undefined {
  const fields = statFields(pid);
  if (!fields) return undefined;
  const state = fields[0] ?? "?";
  if (state === "Z" || state === "X") return undefined;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return undefined;
  }
  return { pid, state, startTime: fields[19] ?? "", cmdline };
}

/**
 * The start time of the process with this pid, zombie or not: what a spawner records right after
 * the spawn, when a quick child may already have ended (but cannot have been reaped yet, since
 * reaping waits for the spawner's event loop).
 */
export function startTimeOf(pid: number): string | undefined {
  return statFields(pid)?.[19];
}

/**
 * True when `pid` is still the very process recorded. The pid and its start time are the identity;
 * the command line is not compared, since it changes at exec, a moment after the spawn recorded it.
 */
export function isSameProcess(record: { pid: number; startTime: string }): boolean {
  const info = readProcess(record.pid);
  return info !== undefined && info.startTime === record.startTime;
}
