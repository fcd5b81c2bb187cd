/**
 * Where the hub keeps things in the state directory (`--state`, default `.steward`), and how a CLI
 * command reaches a running hub. Commands read the SQLite database directly (WAL lets them read
 * while the hub writes); an operator's write (drain, undrain, task) goes to the database and then
 * nudges the running hub through the HTTP address it recorded in `hub.json`.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { SqliteStore } from "../hub/store/sqlite.js";
import { EnvironmentError } from "../model/errors.js";
import type { CliIo, GlobalOptions } from "./io.js";

export interface StatePaths {
  dir: string;
  /** The hub's SQLite database (generations, intents, attempts, conditions...). */
  db: string;
  /** Written by a running hub: its pid and HTTP address. */
  hubFile: string;
  /** Default root under which local nodes apply (`<root>/<node>/`). */
  root: string;
  /** `steward up`'s copy of the example fleet repo. */
  repo: string;
  /** The syncer's git cache. */
  git: string;
  /** `steward up`'s log file (the terminal shows progress instead). */
  log: string;
}

export function statePaths(io: CliIo, globals: GlobalOptions): StatePaths {
  return statePathsIn(resolve(io.cwd, globals.state));
}

/** The files of a state directory `dir` (absolute). */
export function statePathsIn(dir: string): StatePaths {
  return {
    dir,
    db: join(dir, "hub.db"),
    hubFile: join(dir, "hub.json"),
    root: join(dir, "root"),
    repo: join(dir, "repo"),
    git: join(dir, "git"),
    log: join(dir, "hub.log"),
  };
}

/** Opens the hub database; refuses (clearly) when there is none yet. */
export async function openHubStore(paths: StatePaths): Promise<SqliteStore> {
  if (!existsSync(paths.db))
    throw new EnvironmentError(
      `no hub state in ${paths.dir}: run \`steward up\` (or \`steward hub\`) first, or pass --state DIR`,
    );
  const { SqliteStore } = await import("../hub/store/sqlite.js");
  return new SqliteStore(paths.db);
}

/** What a running hub records about itself. */
export interface HubFile {
  pid: number;
  url: string;
  startedAt: string;
  transports: string[];
}

export function writeHubFile(paths: StatePaths, hub: HubFile): void {
  writeFileSync(paths.hubFile, `${JSON.stringify(hub, null, 2)}\n`);
}

export function readHubFile(paths: StatePaths): HubFile | undefined {
  try {
    return JSON.parse(readFileSync(paths.hubFile, "utf8")) as HubFile;
  } catch {
    return undefined;
  }
}

export function removeHubFile(paths: StatePaths, pid: number): void {
  if (readHubFile(paths)?.pid === pid) rmSync(paths.hubFile, { force: true });
}

/**
 * Asks a running hub to look again (at a node, or at the rollouts of a revision); says whether one
 * answered.
 */
export async function nudgeHub(
  paths: StatePaths,
  scope: { node?: string; revision?: string } = {},
): Promise<boolean> {
  const hub = readHubFile(paths);
  if (!hub) return false;
  try {
    const response = await fetch(`${hub.url}/nudge`, {
      method: "POST",
      body: JSON.stringify(scope),
      signal: AbortSignal.timeout(2_000),
    });
    return response.ok;
  } catch {
    return false;
  }
}
