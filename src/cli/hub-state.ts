/**
 * Where the hub keeps things in the state directory (`--state`, default `.steward`), and how a CLI
 * command reaches a running hub. Commands read the SQLite database directly (WAL lets them read
 * while the hub writes); an operator's write (drain, undrain, task) goes to the database and then
 * nudges the running hub through the HTTP address it recorded in `hub.json`. `steward sync` asks
 * the running hub to sync (`syncThroughHub`), with the operator token recorded there too.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { Store } from "../hub/store/store.js";
import { EnvironmentError } from "../model/errors.js";
import type { SyncOutcome } from "../repo/syncer.js";
import type { CliIo, GlobalOptions } from "./io.js";
import {
  describeStoreLocation,
  openStoreAt,
  parseStoreLocation,
  type StoreLocation,
} from "./store-location.js";

export interface StatePaths {
  dir: string;
  /** `--store` or STEWARD_STORE, when given: the hub's store if not the state directory's SQLite file. */
  store?: string;
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
  const paths = statePathsIn(resolve(io.cwd, globals.state));
  const store = globals.store ?? io.env.STEWARD_STORE;
  if (store)
    paths.store = parseStoreLocation(store, io.cwd).kind === "sqlite" ? resolveSqlite(store, io.cwd) : store;
  return paths;
}

/** A `sqlite:PATH` location with its path made absolute. */
function resolveSqlite(location: string, cwd: string): string {
  return describeStoreLocation(parseStoreLocation(location, cwd));
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

/**
 * Opens the hub's store; refuses (clearly) when there is none yet. `syncFirst`: the state a sync
 * writes is what is missing (`steward history`), so the fix is a sync rather than a hub.
 */
export async function openHubStore(paths: StatePaths, options: { syncFirst?: boolean } = {}): Promise<Store> {
  // The flag or STEWARD_STORE, else the store a running hub recorded, else the state directory's file.
  const location = parseStoreLocation(
    paths.store ?? readHubFile(paths)?.store ?? `sqlite:${paths.db}`,
    paths.dir,
  );
  if (location.kind === "sqlite" && !existsSync(location.path))
    throw new EnvironmentError(
      options.syncFirst
        ? `no hub state at ${location.path}: run \`steward sync\` first (or pass --state DIR)`
        : `no hub state in ${location.path === paths.db ? paths.dir : location.path}: run \`steward up\` (or \`steward hub\`) first, or pass --state DIR`,
    );
  return openStoreAt(location);
}

/** The store a hub or a sync of this state directory writes: `--store`/STEWARD_STORE, or `<state>/hub.db`. */
export function stateStoreLocation(paths: StatePaths): StoreLocation {
  return parseStoreLocation(paths.store ?? `sqlite:${paths.db}`, paths.dir);
}

/** Opens (creating if needed) the store a hub or a sync of this state directory writes. */
export function openStateStore(paths: StatePaths): Promise<Store> {
  return openStoreAt(stateStoreLocation(paths));
}

/** What a running hub records about itself. */
export interface HubFile {
  pid: number;
  url: string;
  startedAt: string;
  transports: string[];
  /** The bearer token of its operator requests (`POST /sync`); absent in an older hub's file. */
  token?: string;
  /** The fleet repository it syncs (a path or URL, as the syncer describes it) and its branch. */
  repo?: string;
  branch?: string;
  /** Its store (`sqlite:PATH` or a PostgreSQL URL without password): where the commands read. */
  store?: string;
}

/** Writes `hub.json` whole (temporary name, then rename), readable by its owner only: it holds the token. */
export function writeHubFile(paths: StatePaths, hub: HubFile): void {
  const temporary = `${paths.hubFile}.${process.pid}.tmp`;
  // A hub on a store elsewhere (PostgreSQL) that does not sync may have written nothing here yet.
  mkdirSync(dirname(paths.hubFile), { recursive: true, mode: 0o700 });
  writeFileSync(temporary, `${JSON.stringify(hub, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, paths.hubFile);
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
  scope: { node?: string; revision?: string; sync?: boolean } = {},
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

/** Whether the hub recorded in `hub.json` runs: none recorded, recorded but gone, or running. */
export type HubPresence =
  | { kind: "none" }
  | { kind: "gone"; hub: HubFile; why: string }
  | { kind: "running"; hub: HubFile };

/** True while a process with `pid` exists (one of another user's counts). */
function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Looks for the hub recorded in `paths`' `hub.json`: its pid must exist and its `/healthz` answer
 * within `timeoutMs`, so a file left by a killed hub (or a pid since reused) never makes a command
 * wait for an answer that cannot come.
 */
export async function findRunningHub(paths: StatePaths, timeoutMs = 2_000): Promise<HubPresence> {
  const hub = readHubFile(paths);
  if (!hub) return { kind: "none" };
  if (!Number.isInteger(hub.pid) || !processExists(hub.pid))
    return { kind: "gone", hub, why: `its process ${hub.pid} is not running` };
  try {
    const health = await fetch(`${hub.url}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
    if (health.ok) return { kind: "running", hub };
    return { kind: "gone", hub, why: `${hub.url} answers ${health.status}, not as a hub` };
  } catch (error) {
    // fetch says "fetch failed" and keeps what happened in its cause.
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const what =
      (error as Error).name === "TimeoutError"
        ? `no answer in ${timeoutMs} ms`
        : (cause?.code ?? cause?.message ?? (error as Error).message);
    return { kind: "gone", hub, why: `it does not answer at ${hub.url} (${what})` };
  }
}

/** `steward hub` on a state directory another hub runs on: two hubs on one database would fight. */
export class HubAlreadyRunningError extends EnvironmentError {
  override readonly name = "HubAlreadyRunningError";
  constructor(paths: StatePaths, hub: HubFile) {
    super(
      `a hub already runs on ${paths.dir} (pid ${hub.pid}, ${hub.url}): stop it first, or give this hub its own --state DIR`,
      { code: "E_HUB_RUNNING", data: { pid: hub.pid, url: hub.url } },
    );
  }
}

/** The running hub refused this command's request: the token in `hub.json` is not the hub's. */
export class HubRefusedError extends EnvironmentError {
  override readonly name = "HubRefusedError";
  constructor(message: string, data: Record<string, unknown>) {
    super(message, { code: "E_HUB_REFUSED", data });
  }
}

/** The running hub tried to sync and could not (the fetch failed, say), or did not answer in time. */
export class HubSyncFailedError extends EnvironmentError {
  override readonly name = "HubSyncFailedError";
  constructor(message: string, data: Record<string, unknown>) {
    super(message, { code: "E_HUB_SYNC", data });
  }
}

/**
 * Asks the running `hub` to sync now (`POST /sync` with its token) and resolves with what that
 * sync did. Throws HubRefusedError when the hub refuses the token, HubSyncFailedError when its
 * sync failed or no answer came within `timeoutMs`.
 */
export async function syncThroughHub(
  hub: HubFile,
  options: { acceptRewrite?: boolean; timeoutMs?: number } = {},
): Promise<SyncOutcome> {
  const timeoutMs = options.timeoutMs ?? 5 * 60_000;
  const who = `the running hub (pid ${hub.pid}, ${hub.url})`;
  let response: Response;
  try {
    response = await fetch(`${hub.url}/sync`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${hub.token ?? ""}` },
      body: JSON.stringify({ acceptRewrite: options.acceptRewrite === true }),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    const timedOut = (error as Error).name === "TimeoutError";
    throw new HubSyncFailedError(
      timedOut
        ? `${who} did not say within ${Math.round(timeoutMs / 1000)} s what its sync did; it may still be syncing: see \`steward get revisions\``
        : `${who} stopped answering (${(error as Error).message}): run \`steward sync\` again`,
      { pid: hub.pid, url: hub.url },
    );
  }
  const body = (await response.json().catch(() => ({}))) as {
    outcome?: SyncOutcome;
    error?: string;
    code?: string;
  };
  if (response.status === 401 || response.status === 404)
    throw new HubRefusedError(
      `${who} refused to sync on request (${body.error ?? response.status}): ${hub.token ? "its hub.json is not this hub's any more; restart the hub" : "it predates steward sync through the hub; restart it with this steward"}`,
      { pid: hub.pid, url: hub.url, status: response.status },
    );
  if (!response.ok || !body.outcome)
    throw new HubSyncFailedError(`${who} could not sync: ${body.error ?? `HTTP ${response.status}`}`, {
      pid: hub.pid,
      url: hub.url,
      ...(body.code ? { cause: body.code } : {}),
    });
  return body.outcome;
}
