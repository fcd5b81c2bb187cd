/**
 * Temporary names: what the agent's writers call a file or a link until it is renamed into place,
 * and the sweep that removes what a killed writer left under such a name. Every writer takes its
 * name here, so the sweep recognises exactly what the writers make:
 *
 *   .<name>.steward-<pid>-<n>.tmp        a regular file (managed files, the agent's own state)
 *   .<name>.steward-link-<pid>-<n>.tmp   a symbolic link (the symlink driver)
 *   report-seq.<pid>.tmp                 a regular file, in a state directory only (agents before
 *                                        this module wrote report numbers under that name)
 *
 * The pid in the name is the writer's. A leftover is an entry of one of these names, of the type
 * its name says (a regular file with no other link, or a symlink), whose writer is gone: no process
 * has that pid. A live process with that pid keeps its file, whatever it runs: it may be an agent
 * with the write in progress, and a pid reused by another program only delays the removal until
 * that program ends (never a write lost for a guess). This process's own pid is the exception it
 * can decide for itself: it knows its writes in progress (made by createTemporary, not yet
 * settleTemporary'd), so any other entry with its pid was left by an earlier process that had the
 * same pid (an agent restarted as pid 1 of a container).
 *
 * Each directory is swept at most once per process: the first time a temporary name is taken in
 * it, or for the state directory at start (AgentStore.sweepLeftovers). An apply lists a directory
 * it writes into once per process, not once per file; a directory this process created is not
 * listed at all. What a process killed later leaves is swept by the next process to write there.
 * Within one process every writer shares this module (agents run on the main thread).
 */
import { type Dirent, lstatSync, readdirSync, type Stats, unlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { processExists } from "./proc.js";

/** Read once: `process.pid` is a system call each time. */
const PID = process.pid;
let counter = 0;
/** Names tried by createTemporary before it gives up on a directory full of taken ones. */
const NAME_TRIES = 8;

/** What a temporary name holds until it is renamed into place. */
export type TemporaryKind = "file" | "link";

/** A name this agent's writers give (see the top of this file): link marker, writer's pid. */
const TEMPORARY_NAME = /^\..+\.steward-(link-)?([1-9][0-9]{0,6})-[0-9]{1,6}\.tmp$/;
/** The report-number name of agents before this module, recognised in a state directory only. */
const REPORT_SEQ_NAME = /^report-seq\.([1-9][0-9]{0,6})\.tmp$/;
/** The largest pid Linux hands out (PID_MAX_LIMIT): a larger number in a name is no writer's pid. */
const PID_LIMIT = 4_194_304;

/** Directories swept by this process (or created by it: nothing of an earlier process is there). */
const swept = new Set<string>();
/**
 * Names of the temporary entries this process made and has not renamed or removed yet: its writes
 * in progress. By name, not path: a name is unique within the process, and a directory reached by
 * two paths (through a symlink) is still one directory.
 */
const inProgress = new Set<string>();

/** Who wrote a temporary name, and what it must be to be theirs; undefined when it is not one of ours. */
function writerOf(name: string, stateDirectory: boolean): { pid: number; kind: TemporaryKind } | undefined {
  if (!name.endsWith(".tmp")) return undefined;
  let writer: { pid: number; kind: TemporaryKind } | undefined;
  const match = TEMPORARY_NAME.exec(name);
  if (match) writer = { pid: Number(match[2]), kind: match[1] ? "link" : "file" };
  else {
    const legacy = stateDirectory ? REPORT_SEQ_NAME.exec(name) : null;
    if (legacy) writer = { pid: Number(legacy[1]), kind: "file" };
  }
  return writer && writer.pid <= PID_LIMIT ? writer : undefined;
}

/** Whether what is at a temporary name is what a writer of that kind makes there. */
function madeBy(stats: Stats, kind: TemporaryKind): boolean {
  // A writer's file has one link: another name for it elsewhere means someone else holds it.
  return kind === "link" ? stats.isSymbolicLink() : stats.isFile() && stats.nlink === 1;
}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** Removes the leftovers among `names` in `dir` now (the rules at the top of this file); returns how many. */
function sweep(dir: string, names: readonly string[], stateDirectory: boolean): number {
  const gone = new Map<number, boolean>();
  let removed = 0;
  for (const name of names) {
    const writer = writerOf(name, stateDirectory);
    if (!writer) continue;
    if (writer.pid === PID) {
      if (inProgress.has(name)) continue;
    } else {
      let dead = gone.get(writer.pid);
      if (dead === undefined) {
        dead = !processExists(writer.pid);
        gone.set(writer.pid, dead);
      }
      if (!dead) continue;
    }
    const path = join(dir, name);
    const stats = lstatOrUndefined(path);
    if (!stats || !madeBy(stats, writer.kind)) continue;
    try {
      unlinkSync(path);
      removed++;
    } catch {
      // Gone meanwhile, or not ours to remove (permissions): it stays, as anything uncertain does.
    }
  }
  return removed;
}

/**
 * Removes from `dir` what this agent's writers left there when they were killed (the rules at the
 * top of this file), the first time this process asks for `dir`; later calls do nothing and return
 * 0. `stateDirectory`: `dir` is an agent's state directory, where the report-number name of
 * earlier agents is recognised too. `entries`: the names in `dir`, when the caller has just listed
 * it. Returns how many entries it removed.
 */
export function removeLeftovers(
  dir: string,
  options: { stateDirectory?: boolean; entries?: readonly string[] } = {},
): number {
  if (swept.has(dir)) return 0;
  swept.add(dir);
  let names = options.entries;
  if (!names) {
    try {
      names = readdirSync(dir);
    } catch {
      // Missing or unreadable: nothing to sweep, and the write that follows reports its own problem.
      return 0;
    }
  }
  return sweep(dir, names, options.stateDirectory ?? false);
}

/** Notes that this process has just created `dir`: no earlier writer left anything in it to sweep. */
export function createdDirectory(dir: string): void {
  swept.add(dir);
}

/**
 * A fresh temporary name next to `path` for something of `kind`, hidden, unique within this process
 * and across processes. The first name taken in a directory sweeps it first (removeLeftovers). A
 * writer makes its entry there with createTemporary, which knows it is in progress.
 */
export function temporaryPath(path: string, kind: TemporaryKind = "file"): string {
  const dir = dirname(path);
  removeLeftovers(dir);
  counter = (counter + 1) % 1_000_000;
  return join(dir, `.${basename(path)}.steward-${kind === "link" ? "link-" : ""}${PID}-${counter}.tmp`);
}

/**
 * Makes something new at a temporary name next to `path`: `create` must fail with EEXIST rather
 * than reuse what is already at the name (open with `wx`, symlink). A name that is taken (left by
 * an earlier process with this pid, which the sweep could not remove) is passed over for the next
 * one. Returns the name and what `create` returned; the caller calls settleTemporary once the
 * entry is renamed into place or removed.
 */
export function createTemporary<T>(
  path: string,
  kind: TemporaryKind,
  create: (temporary: string) => T,
): { temporary: string; made: T } {
  for (let tries = 1; ; tries++) {
    const temporary = temporaryPath(path, kind);
    try {
      const made = create(temporary);
      inProgress.add(basename(temporary));
      return { temporary, made };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || tries >= NAME_TRIES) throw error;
    }
  }
}

/** Notes that the entry createTemporary made at `temporary` was renamed into place or removed. */
export function settleTemporary(temporary: string): void {
  inProgress.delete(basename(temporary));
}

/**
 * Every file and link under `tree` (not following links) that is named and typed as this agent's
 * writers make their temporary files, whether its writer is alive or gone: what a crash test or a
 * soak counts as left behind once no agent runs. The report-number name of earlier agents is not
 * counted: no writer makes it any more. Sorted paths.
 */
export function findTemporaryFiles(tree: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(path);
        continue;
      }
      const writer = writerOf(entry.name, false);
      const stats = writer && lstatOrUndefined(path);
      if (writer && stats && madeBy(stats, writer.kind)) found.push(path);
    }
  };
  walk(tree);
  return found.sort();
}
