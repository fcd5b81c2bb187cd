/**
 * The agent's local state, under its state directory, in small JSON files written atomically.
 * It is for de-duplication and memory of the past only (attempts already handled, run-once commands,
 * failure counters, the services this agent started); what is true now is always read from the system.
 *
 *   bundles/<assignment>.json     the last bundle received (rewritten only when it changes)
 *   instances/<assignment>.json   generation last applied completely, failure counters
 *   runonce/<assignment>.json     each command's latest run, journalled around its spawn (oneshot.ts)
 *   runs/<assignment>/<resource>/<attemptId>/   that run's stdout, stderr and exit status
 *   lost/<assignment>.json        earlier generations' runs whose outcome was lost, until a person answers
 *   attempts/<attemptId>.json     results of handled attempts (a redelivery replays them)
 *   services/<assignment>/<name>.json, logs/<assignment>/<name>.log   supervised processes
 *   trash/<time>/<path>           what `ensure: absent` moved away, recoverable
 *   kept/<sha256>                 content steward replaced that no generation of its own had declared
 *                                 (a hand edit, what was there before steward), once per content;
 *   kept/<hmac>.age               the same for a secret file: sealed for the host's own identity
 *   retired/<assignment>.<time>.json   instances no longer managed
 *   containers/<name>.env         a container's environment file
 *   report-seq                    report sequence numbers reserved so far
 */
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  type Stats,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import type {
  AttemptResult,
  Bundle,
  FailureClass,
  LostRun,
  OneShotDecision,
  ResourceCounters,
  ResourceOutcome,
} from "../model/generated.js";
import { type AtomicFile, type FlushBatch, writeJsonAtomicSync, writeJsonFilesAtomic } from "./atomic.js";
import type { SecretDigestRecord } from "./secrets.js";
import { createdDirectory, createTemporary, removeLeftovers, settleTemporary } from "./temporary.js";

/** What the agent remembers of one resource across attempts. */
export interface ResourceRecord {
  counters: ResourceCounters;
  /** The generation the counters count failures for: they restart with a new generation. */
  generation: number;
  /** The last outcome for this resource when it was a failure, a block or a restore. */
  last?: {
    generation: number;
    attemptId?: string;
    at: string;
    action: ResourceOutcome["action"];
    failureClass?: FailureClass;
    reason?: string;
    message?: string;
    blockedBy?: string;
    evidence?: string;
  };
}

/** What the agent remembers of one instance. */
export interface InstanceRecord {
  assignment: string;
  /** The last bundle received: the desired spec observations are compared against. */
  bundle: Bundle;
  /** Generation last applied completely (0: none yet), and what it declared. */
  appliedGeneration: number;
  appliedHash?: string;
  appliedState?: "running" | "stopped";
  appliedVersion?: string;
  lastAttempt?: {
    attemptId: string;
    generation: number;
    outcome: "succeeded" | "failed";
    failureClass?: FailureClass;
    at: string;
  };
  resources: Record<string, ResourceRecord>;
  /** Digests of the plaintext of the bundle's secrets, so an unchanged secret is not decrypted again. */
  secrets?: SecretDigestRecord;
}

/** What is stored of an instance besides its bundle: the record, and which bundle it holds. */
export type InstanceHistory = Omit<InstanceRecord, "bundle"> & {
  /** Generation of the bundle held. */
  heldGeneration: number;
  bundleKey: string;
};

/**
 * The journal of a command's latest run: at most one run per (instance, generation, resource)
 * unless creates/unless say otherwise (oneshot.ts). Written before the spawn, right after it, and
 * when it ends; a record without `at` is a run whose end this agent has not seen.
 */
export interface RunOnceRecord {
  generation: number;
  /** The attempt that started it. */
  attemptId?: string;
  /** When the agent was about to spawn it (journalled before the spawn). */
  startedAt?: string;
  /** The timeout it was started with: an agent that adopts it kills it then. */
  timeoutMs?: number;
  /** The command has `creates` or `unless`: its own check decides after a lost run, not a person. */
  guarded?: boolean;
  /** The wrapper process, the run's session leader (journalled right after the spawn). */
  pid?: number;
  /** Field 22 of /proc/<pid>/stat: with the pid, identifies the process even after pid reuse. */
  startTime?: string;
  /** When the outcome was known; absent while it runs or when its end was not seen. */
  at?: string;
  exitCode?: number | null;
  signal?: string | null;
  timedOut?: boolean;
  /** Who knew the outcome: the agent saw it end, a later agent read the wrapper's exit status, or a person decided. */
  outcomeFrom?: "agent" | "wrapper" | "person";
  /** A person's answer about this run, when its outcome was lost. */
  decision?: OneShotDecision;
}

/** A process this agent started for a service resource. */
export interface ServiceRecord {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: with the pid, identifies the process even after pid reuse. */
  startTime: string;
  /** /proc/<pid>/cmdline as read right after the start (NUL-separated). */
  cmdline: string;
  /** Hash of what the process was started from (exec, env, cwd, restartOn specs). */
  fingerprint: string;
  startedAt: string;
  generation: number;
  attemptId?: string;
  /** Set when this agent saw the process exit (it was its parent at the time). */
  exit?: { exitCode: number | null; signal: string | null; at: string };
  /** Set when the agent stopped it on purpose. */
  stoppedAt?: string;
}

/** What identifies a bundle's content: generation, spec hash and budget (not the attempt). */
function bundleKey(bundle: Bundle): string {
  return `${bundle.generation}\0${bundle.hash}\0${JSON.stringify(bundle.budget ?? {})}`;
}

function encode(name: string): string {
  return encodeURIComponent(name);
}

function readJson<T>(path: string): T | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    // A file that is not JSON was not written by us atomically: treat it as absent.
    return undefined;
  }
}

/** stat, or undefined when nothing (readable) is there: a missing file costs no exception. */
function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** The names in a directory, or undefined when it cannot be listed (missing, say). */
function listing(dir: string): string[] | undefined {
  try {
    return readdirSync(dir);
  } catch {
    return undefined;
  }
}

/** A JSON file that is usually missing (an attempt not handled yet): read only when stat finds it. */
function readJsonIfPresent<T>(path: string): T | undefined {
  return statOrUndefined(path) ? readJson<T>(path) : undefined;
}

/**
 * Parsed JSON files, each kept while the file is the same one: every write here renames a new file
 * into place (a new inode), so a stat tells whether what was parsed is still current, whichever
 * process wrote it. Values are shared: callers copy before they change anything.
 */
class ParsedFiles {
  private readonly files = new Map<string, { stats: Stats; value: unknown }>();

  read<T>(path: string): T | undefined {
    const stats = statOrUndefined(path);
    if (!stats) {
      this.files.delete(path);
      return undefined;
    }
    const known = this.files.get(path);
    if (known && sameFile(known.stats, stats)) return known.value as T;
    const value = readJson<T>(path);
    if (value === undefined) this.files.delete(path);
    else this.files.set(path, { stats, value });
    return value;
  }

  /** Notes what this process just wrote to `path` (holding the state lock, so nobody wrote since). */
  wrote(path: string, value: unknown): void {
    const stats = statOrUndefined(path);
    if (stats) this.files.set(path, { stats, value });
    else this.files.delete(path);
  }
}

function sameFile(a: Stats, b: Stats): boolean {
  return (
    a.ino === b.ino &&
    a.dev === b.dev &&
    a.size === b.size &&
    a.mtimeMs === b.mtimeMs &&
    a.ctimeMs === b.ctimeMs
  );
}

const MAX_ATTEMPTS_KEPT = 1000;
/** Unanswered lost runs kept per instance: a report carries them all. */
const MAX_LOST_RUNS = 20;
/** Attempt files beyond the limit before they are pruned (see pruneAttempts). */
const PRUNE_MARGIN = 250;
/** Report sequence numbers reserved per write (see nextSeq). */
const SEQ_BLOCK = 1000;
/** How long a directory must have been unchanged before its times can tell a later change apart. */
const SETTLED_MS = 1000;
/**
 * Subdirectories of a state directory that files are written into atomically, besides attempts/
 * and services/<assignment>/ (see sweepLeftovers). trash/ is not among them: what it holds is what
 * `ensure: absent` moved away, whatever its name.
 */
const WRITTEN_DIRECTORIES = ["bundles", "instances", "runonce", "lost", "kept", "containers"];

/** The agent's state directory (layout above). Every write is atomic: temp file, fsync, rename. */
export class AgentStore {
  private readonly made = new Set<string>();
  /** Which bundle each instance's bundle file holds, as far as this process knows. */
  private readonly bundleOnDisk = new Map<string, string>();
  /** Bundles read or written by this process, by assignment. */
  private readonly bundles = new Map<string, Bundle>();
  /** The last listing of every instance, with the directory's stat when it was taken (see instances). */
  private listing: { dir: Stats; records: readonly InstanceRecord[] } | undefined;
  /** How many files attempts/ holds, as far as this process knows (undefined: not listed yet). */
  private attemptFiles: number | undefined;
  /** Report sequence numbers this process may use, up to `reserved` (see nextSeq). */
  private seq: { next: number; reserved: number } | undefined;
  /** Instance records, run-once records and agent.json as last parsed (a long-running agent reads them every second). */
  private readonly parsed = new ParsedFiles();
  /** Whether this store swept its directory of killed writers' leftovers (see sweepLeftovers). */
  private swept = false;

  constructor(readonly dir: string) {}

  private ensureDir(path: string): string {
    if (!this.made.has(path)) {
      if (mkdirSync(path, { recursive: true, mode: 0o700 }) !== undefined) createdDirectory(path);
      this.made.add(path);
    }
    return path;
  }

  /**
   * Removes what killed writers left in the state directory (temporary files whose writer is gone:
   * see removeLeftovers) from every directory the agent writes into, once: the agent calls it when
   * it first holds the state lock, before anything here is written; the report numbers, written
   * without the lock, call it too.
   */
  sweepLeftovers(): void {
    if (this.swept) return;
    this.swept = true;
    const entries = listing(this.dir);
    // No state directory yet: nothing is left in it.
    if (!entries) return;
    removeLeftovers(this.dir, { stateDirectory: true, entries });
    // Only the directories that exist: a missing one would cost a failed open every process.
    const present = new Set(entries);
    for (const name of WRITTEN_DIRECTORIES) if (present.has(name)) removeLeftovers(join(this.dir, name));
    const attempts = present.has("attempts") ? listing(join(this.dir, "attempts")) : undefined;
    // pruneAttempts counts from this listing instead of taking one of its own.
    if (attempts)
      this.attemptFiles =
        attempts.length - removeLeftovers(join(this.dir, "attempts"), { entries: attempts });
    const services = present.has("services") ? listing(join(this.dir, "services")) : undefined;
    for (const assignment of services ?? []) removeLeftovers(join(this.dir, "services", assignment));
  }

  /** The instance's record with the bundle it holds, if the agent holds one. */
  instance(assignment: string): InstanceRecord | undefined {
    const history = this.history(assignment);
    if (!history) return undefined;
    // A long-running agent looks at its instances every second: parse a bundle once per change.
    let bundle = this.bundles.get(assignment);
    if (!bundle || bundleKey(bundle) !== history.bundleKey) {
      bundle = readJson<Bundle>(join(this.dir, "bundles", `${encode(assignment)}.json`));
      if (!bundle) return undefined;
      this.bundles.set(assignment, bundle);
    }
    const { heldGeneration: _held, bundleKey: _key, ...record } = history;
    // The parsed history is shared: the record's resources are the caller's to change.
    return { ...record, resources: { ...record.resources }, bundle };
  }

  /**
   * The instance's record without its bundle (the bulk of the state): what an apply needs of the
   * past, read without parsing a thousand resources it is about to receive again anyway.
   */
  history(assignment: string): Readonly<InstanceHistory> | undefined {
    const stored = this.parsed.read<InstanceHistory>(
      join(this.dir, "instances", `${encode(assignment)}.json`),
    );
    if (stored?.bundleKey !== undefined) this.bundleOnDisk.set(assignment, stored.bundleKey);
    return stored;
  }

  /** Assignments the agent holds a bundle for (retired ones excluded), sorted. */
  assignments(): string[] {
    let names: string[];
    try {
      names = readdirSync(join(this.dir, "instances"));
    } catch {
      return [];
    }
    return names
      .filter((name) => name.endsWith(".json"))
      .map((name) => decodeURIComponent(name.slice(0, -".json".length)))
      .sort();
  }

  /**
   * Every instance the agent holds a bundle for, sorted by assignment; shared, not to be changed.
   * A long-running agent asks every second: the last listing is reused while the instances
   * directory is unchanged (every record is renamed into it, by this process or another, so a
   * change to any record changes the directory) and had already settled when it was listed (its
   * times are only as fine as the kernel's clock tick). A write by this process drops it at once.
   */
  instances(): readonly InstanceRecord[] {
    const dir = statOrUndefined(join(this.dir, "instances"));
    if (dir && this.listing && sameFile(this.listing.dir, dir)) return this.listing.records;
    const records = this.assignments()
      .map((assignment) => this.instance(assignment))
      .filter((record): record is InstanceRecord => record !== undefined);
    const settled = dir !== undefined && Date.now() - Math.max(dir.mtimeMs, dir.ctimeMs) > SETTLED_MS;
    this.listing = settled ? { dir, records } : undefined;
    return records;
  }

  /**
   * Saves an instance's record. The bundle (the bulk of it) is written only when it changed: a
   * re-apply of the same generation rewrites the counters, not a thousand resources' content.
   */
  saveInstance(record: InstanceRecord): void {
    this.listing = undefined;
    for (const { path, value } of this.instanceFiles(record)) writeJsonAtomicSync(path, value);
    this.rememberBundle(record);
  }

  /**
   * Saves attempts' results with the instance records they produced (one per instance at most),
   * flushed together; `applied` are the directories where the applies renamed files, on disk before
   * any record is (a record never speaks of an apply a crash could undo).
   */
  async commitAttempts(
    commits: readonly { result: AttemptResult; record?: InstanceRecord }[],
    applied: Iterable<string> = [],
    batch?: FlushBatch,
  ): Promise<void> {
    this.listing = undefined;
    const attempts = this.ensureDir(join(this.dir, "attempts"));
    const instances = `${join(this.dir, "instances")}/`;
    const files: { path: string; value: unknown }[] = [];
    for (const { result, record } of commits) {
      if (record) files.push(...this.instanceFiles(record));
      files.push({ path: join(attempts, `${encode(result.attemptId)}.json`), value: result });
    }
    await writeJsonFilesAtomic(files, batch, applied);
    for (const { path, value } of files) if (path.startsWith(instances)) this.parsed.wrote(path, value);
    for (const { record } of commits) if (record) this.rememberBundle(record);
    this.pruneAttempts(attempts, commits.length);
  }

  /** Notes which bundle is on disk once it was written. */
  private rememberBundle(record: InstanceRecord): void {
    this.bundleOnDisk.set(record.assignment, bundleKey(record.bundle));
    this.bundles.set(record.assignment, record.bundle);
  }

  /** The files an instance's record is stored in (the bundle's only when it changed). */
  private instanceFiles(record: InstanceRecord): { path: string; value: unknown }[] {
    const name = `${encode(record.assignment)}.json`;
    const key = bundleKey(record.bundle);
    const files: { path: string; value: unknown }[] = [];
    if (this.bundleOnDisk.get(record.assignment) !== key) {
      files.push({ path: join(this.ensureDir(join(this.dir, "bundles")), name), value: record.bundle });
    }
    const { bundle, ...rest } = record;
    const history: InstanceHistory = { ...rest, heldGeneration: bundle.generation, bundleKey: key };
    files.push({ path: join(this.ensureDir(join(this.dir, "instances")), name), value: history });
    return files;
  }

  /** Stops remembering an instance: its record moves to retired/, nothing on the system changes. */
  retire(assignment: string, at: Date): boolean {
    this.listing = undefined;
    const from = join(this.dir, "instances", `${encode(assignment)}.json`);
    if (!existsSync(from)) return false;
    const dir = this.ensureDir(join(this.dir, "retired"));
    const stamp = `${encode(assignment)}.${at.toISOString().replace(/[:.]/g, "-")}`;
    renameSync(from, join(dir, `${stamp}.json`));
    const bundle = join(this.dir, "bundles", `${encode(assignment)}.json`);
    if (existsSync(bundle)) renameSync(bundle, join(dir, `${stamp}.bundle.json`));
    this.bundleOnDisk.delete(assignment);
    this.bundles.delete(assignment);
    return true;
  }

  runOnce(assignment: string): Readonly<Record<string, RunOnceRecord>> {
    return this.parsed.read(join(this.dir, "runonce", `${encode(assignment)}.json`)) ?? {};
  }

  /** Journals a command's run at once (durably), so a crash right after cannot make it run twice. */
  recordRunOnce(assignment: string, resource: string, record: RunOnceRecord): void {
    const dir = this.ensureDir(join(this.dir, "runonce"));
    const all = { ...this.runOnce(assignment), [resource]: record };
    writeJsonAtomicSync(join(dir, `${encode(assignment)}.json`), all);
  }

  /** Runs of earlier generations whose outcome was lost and that no person has answered yet, oldest first. */
  lostRuns(assignment: string): readonly LostRun[] {
    // Almost never there: one stat, not a parse, per report.
    return this.parsed.read<LostRun[]>(join(this.dir, "lost", `${encode(assignment)}.json`)) ?? [];
  }

  /** Replaces the instance's unanswered lost runs (durably); the newest MAX_LOST_RUNS are kept. */
  saveLostRuns(assignment: string, runs: readonly LostRun[]): void {
    const dir = this.ensureDir(join(this.dir, "lost"));
    const path = join(dir, `${encode(assignment)}.json`);
    if (runs.length === 0) {
      if (existsSync(path)) unlinkSync(path);
      return;
    }
    writeJsonAtomicSync(path, runs.slice(-MAX_LOST_RUNS));
  }

  attempt(attemptId: string): AttemptResult | undefined {
    return readJsonIfPresent(join(this.dir, "attempts", `${encode(attemptId)}.json`));
  }

  /**
   * Keeps the newest attempts only: redeliveries come within minutes, not months. The directory is
   * listed only once this process's count of it passes the limit by a margin (other processes' files
   * show at that listing), and then pruned to the limit: not a listing and a stat of every kept
   * file per commit.
   */
  private pruneAttempts(dir: string, added: number): void {
    if (this.attemptFiles !== undefined) {
      this.attemptFiles += added;
      if (this.attemptFiles <= MAX_ATTEMPTS_KEPT + PRUNE_MARGIN) return;
    }
    const names = readdirSync(dir);
    this.attemptFiles = names.length;
    if (names.length <= MAX_ATTEMPTS_KEPT + PRUNE_MARGIN) return;
    const dated = names.map((name) => ({ name, mtime: statSync(join(dir, name)).mtimeMs }));
    dated.sort((a, b) => a.mtime - b.mtime);
    for (const { name } of dated.slice(0, dated.length - MAX_ATTEMPTS_KEPT)) unlinkSync(join(dir, name));
    this.attemptFiles = MAX_ATTEMPTS_KEPT;
  }

  service(assignment: string, name: string): ServiceRecord | undefined {
    return readJson(join(this.dir, "services", encode(assignment), `${encode(name)}.json`));
  }

  saveService(assignment: string, name: string, record: ServiceRecord): void {
    const dir = this.ensureDir(join(this.dir, "services", encode(assignment)));
    writeJsonAtomicSync(join(dir, `${encode(name)}.json`), record);
  }

  /** Where a service's output goes. */
  logFile(assignment: string, name: string): string {
    return join(this.ensureDir(join(this.dir, "logs", encode(assignment))), `${encode(name)}.log`);
  }

  /** A fresh place to move `path` (an absolute resource path) to, so it stays recoverable. */
  trashPath(path: string, at: Date): string {
    const stamp = at.toISOString().replace(/[:.]/g, "-");
    const target = join(this.dir, "trash", stamp, path);
    this.ensureDir(join(target, ".."));
    return target;
  }

  /**
   * Where bytes a managed file had before it is overwritten are kept (a repair never destroys: the
   * drifted content stays recoverable), by content hash so the same content is kept once; `write`
   * is the file to write atomically before the overwrite, when that content is not kept yet.
   */
  keep(bytes: Uint8Array, hash: string): { path: string; write?: AtomicFile } {
    const path = join(this.ensureDir(join(this.dir, "kept")), hash.replace(/^sha256:/, ""));
    if (existsSync(path)) return { path };
    return { path, write: { path, data: bytes, options: { mode: 0o600 } } };
  }

  /**
   * Where a secret file's replaced content is kept: sealed for the host's own identity (an armored
   * age file, `armored`), under the keyed digest of the plaintext, never a plain hash of it.
   */
  keepSealed(armored: string, digest: string): { path: string; write?: AtomicFile } {
    const name = `${digest.replace(/^hmac-sha256:/, "")}.age`;
    const path = join(this.ensureDir(join(this.dir, "kept")), name);
    if (existsSync(path)) return { path };
    return { path, write: { path, data: armored, options: { mode: 0o600 } } };
  }

  /**
   * The next report sequence number. Numbers are reserved on disk a block at a time, so a report
   * costs no write and the next agent process starts above every number this one used.
   */
  nextSeq(): number {
    if (!this.seq || this.seq.next > this.seq.reserved) {
      const path = join(this.ensureDir(this.dir), "report-seq");
      let persisted = 0;
      try {
        persisted = Number(readFileSync(path, "utf8")) || 0;
      } catch {
        // First report from this state directory.
      }
      const next = Math.max(persisted, this.seq?.reserved ?? 0) + 1;
      const reserved = next + SEQ_BLOCK - 1;
      this.sweepLeftovers();
      // Renamed into place but not flushed: a number lost in a power cut repeats, reports carry takenAt.
      const { temporary } = createTemporary(path, "file", (name) =>
        writeFileSync(name, String(reserved), { mode: 0o600, flag: "wx" }),
      );
      try {
        renameSync(temporary, path);
      } finally {
        settleTemporary(temporary);
      }
      this.seq = { next, reserved };
    }
    return this.seq.next++;
  }

  /** The node name this state directory belongs to, remembered from the first apply. */
  node(): string | undefined {
    return this.parsed.read<{ node?: string }>(join(this.dir, "agent.json"))?.node;
  }

  rememberNode(node: string): void {
    if (this.node() === node) return;
    writeJsonAtomicSync(join(this.ensureDir(this.dir), "agent.json"), { node });
  }
}
