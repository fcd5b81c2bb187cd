/**
 * Where an agent keeps its state: `/var/lib/steward` when it runs as root, else
 * `$XDG_STATE_HOME/steward` (or `~/.local/state/steward`) — never the directory it happens to be
 * started in. Agents before this one kept it in `.steward/agent` under their working directory (the
 * SSH launcher started them in `$HOME`); an agent that finds state there moves it into its state
 * directory, so no run-once record is lost and the services it supervises are adopted (they are
 * known by pid and start time, not by where the record lives).
 *
 * The move is a rename, so files that processes still hold open (a service's log) stay theirs, and
 * the old path becomes a link to the new one: a one-shot started by an earlier agent writes its exit
 * status by that path when it ends, and finds it.
 */
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmdirSync,
  symlinkSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { acquireLock } from "./lock.js";

/** The default state directory for a user (`uid`), from its environment. */
export function defaultStateDir(
  env: NodeJS.ProcessEnv,
  uid: number | undefined = process.getuid?.(),
  home: string = env.HOME || homedir(),
): string {
  if (uid === 0) return "/var/lib/steward";
  const xdg = env.XDG_STATE_HOME;
  // The XDG spec: a relative value is invalid and ignored.
  if (xdg && isAbsolute(xdg)) return join(xdg, "steward");
  return join(home, ".local", "state", "steward");
}

/** Where agents before this one kept their state, relative to their working directory. */
export const LEGACY_STATE_DIR = ".steward/agent";

/** Entries only an agent's state directory has: a directory with none of them is not one. */
const STATE_ENTRIES = [
  "agent.json",
  "instances",
  "bundles",
  "runonce",
  "runs",
  "lost",
  "attempts",
  "services",
  "identity",
];

function entriesOf(dir: string): string[] | undefined {
  try {
    return readdirSync(dir);
  } catch {
    return undefined;
  }
}

/** Whether `dir` holds an agent's state. */
export function holdsAgentState(dir: string): boolean {
  return (entriesOf(dir) ?? []).some((name) => STATE_ENTRIES.includes(name));
}

/** What `adoptLegacyState` did. */
export type StateAdoption =
  | { kind: "moved"; from: string; to: string; how: "renamed" | "copied" }
  /** Both places hold state: the state directory's is used, the old one left for a person. */
  | { kind: "both"; from: string; to: string };

/**
 * Moves the state an older agent left in `<cwd>/.steward/agent` into `stateDir`, when `stateDir`
 * holds none yet, and leaves a link in its place. Waits for an agent still applying there (its
 * lock). Undefined when there is nothing to move.
 */
export async function adoptLegacyState(cwd: string, stateDir: string): Promise<StateAdoption | undefined> {
  const from = resolve(cwd, LEGACY_STATE_DIR);
  const to = resolve(stateDir);
  if (from === to) return undefined;
  let stats: ReturnType<typeof lstatSync>;
  try {
    stats = lstatSync(from);
  } catch {
    return undefined;
  }
  // A link is what an earlier move left: nothing to move.
  if (!stats.isDirectory() || !holdsAgentState(from)) return undefined;
  if (holdsAgentState(to)) return { kind: "both", from, to };
  const release = await acquireLock(from);
  try {
    mkdirSync(dirname(to), { recursive: true, mode: 0o700 });
    if (existsSync(to)) rmdirSync(to);
    let how: "renamed" | "copied" = "renamed";
    try {
      renameSync(from, to);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
      // Another filesystem: copy beside the target, then swap in; the old directory is kept aside.
      const temporary = `${to}.moving-${process.pid}`;
      cpSync(from, temporary, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
      renameSync(temporary, to);
      renameSync(from, `${from}.moved-${Date.now()}`);
      how = "copied";
    }
    symlinkSync(to, from);
    return { kind: "moved", from, to, how };
  } finally {
    // The lock moved with the directory; the link leads to it.
    release();
  }
}

/** What an agent says about an adoption, one line. */
export function describeAdoption(adoption: StateAdoption): string {
  return adoption.kind === "moved"
    ? `moved this agent's state from ${adoption.from} (the old default) to ${adoption.to}, leaving a link in its place: run-once records and supervised services carry over`
    : `agent state is in both ${adoption.from} (the old default) and ${adoption.to}: using ${adoption.to}; look at ${adoption.from} and remove it`;
}
