/**
 * The syncer: turns the tracked branch's commits into generations. One `sync()` is an ordered list
 * of steps that stops at the first that decides the outcome:
 *
 *   fetch → same head? (up to date) → rewritten history? (refused: force-push) → new commits →
 *   load and validate the head's tree → signed as the policy requires? → record the outcome.
 *
 * The head of a fetch wins; the commits before it are recorded `superseded`. An invalid head
 * changes no generation and is recorded `invalid` with its diagnostics. A head that does not
 * descend from the last good revision is refused (generations never move to a rewritten past) and
 * recorded as an open `force-push` event, until the branch returns or a sync accepts the rewrite.
 * Failures to fetch are recorded as an open `fetch-failed` event and thrown; the last good revision
 * stays what the hub serves.
 *
 * Work grows with the change: unchanged subtrees are not read (a changed directory is parsed by
 * difference with its last version), file analyses are cached by blob id, per-document checks and
 * rendering are memoised on parsed values, and the store's current instances are kept in memory.
 * What still visits every document is the loader's cross-document pass (names, placement,
 * conflicts), which is lookups only.
 */
import type { HttpClient } from "isomorphic-git";
import type { Diagnostic } from "../model/diagnostics.js";
import { fleetSettings } from "../model/fleet.js";
import type { FleetSpec, SigningPolicy } from "../model/generated.js";
import { type AnalysisCache, analyzeFile, FLEET_FILE } from "../model/load.js";
import { changedInstanceKeys, type DesiredState, type Instance } from "../model/render.js";
import { generationChanges } from "./changes.js";
import { type ParsedCommit, revisionInfo } from "./commits.js";
import { GitObjectMissingError, RepoError } from "./errors.js";
import { describeLocation, FleetRepository, type GitCredentials, type SourceLocation } from "./git.js";
import { signingDiagnostic, verifyCommit } from "./signing.js";
import type { CurrentInstance, GenerationStore, RevisionInfo, SyncEvent } from "./store.js";

/** The time source; tests pass a fixed or stepping clock. */
export interface Clock {
  now(): Date;
}

/** The real clock. */
export const systemClock: Clock = { now: () => new Date() };

/** The subset of a pino logger the syncer writes to. Nothing logged carries a credential. */
export interface SyncLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

const silentLog: SyncLog = { info() {}, warn() {}, error() {} };

/** What a Syncer needs: the store, the source, and injectable I/O. */
export interface SyncerOptions {
  store: GenerationStore;
  source: SourceLocation;
  /** The tracked branch. Default `main`. */
  branch?: string;
  /** Where remotes are mirrored: `<state>/git`. */
  cacheDir: string;
  clock?: Clock;
  log?: SyncLog;
  /** For HTTP remotes; see `credentialsFromEnv`. */
  credentials?: GitCredentials;
  http?: HttpClient;
  /** At most this many commits of one fetch are recorded as superseded. Default 1000. */
  maxSuperseded?: number;
}

/** Options of one sync. */
export interface SyncOptions {
  /**
   * Adopt a rewritten branch (force-push) instead of refusing it. Generations still only grow:
   * instances whose content differs from their current generation get a new one.
   */
  acceptRewrite?: boolean;
}

/** A new generation, as reported in an outcome. */
export interface GenerationSummary {
  instanceKey: string;
  generation: number;
  hash: string;
}

/** What one sync did. JSON-serialisable. */
export type SyncOutcome =
  | { kind: "up-to-date"; branch: string; head: string; lastGood?: string }
  | {
      kind: "applied";
      branch: string;
      head: string;
      revision: RevisionInfo;
      generations: GenerationSummary[];
      retired: string[];
      unchanged: number;
      changedAssignments: string[];
      superseded: string[];
      signer?: string;
    }
  | {
      kind: "invalid";
      branch: string;
      head: string;
      revision: RevisionInfo;
      diagnostics: Diagnostic[];
      superseded: string[];
      lastGood?: string;
    }
  | {
      kind: "refused";
      reason: "force-push";
      branch: string;
      head: string;
      lastGood: string;
      event: SyncEvent;
    };

/** Tracks one branch of one fleet repository into a GenerationStore. */
export class Syncer {
  readonly branch: string;
  readonly repository: FleetRepository;
  private readonly store: GenerationStore;
  private readonly clock: Clock;
  private readonly log: SyncLog;
  private readonly source: string;
  private readonly maxSuperseded: number;
  private readonly analyses: AnalysisCache = new Map();
  /**
   * The store's current instances as of store version `version`, and the desired instances they
   * were last compared with (the syncer's own writes keep both in step without reading the store).
   */
  private current?: {
    version: number;
    instances: Map<string, CurrentInstance>;
    desired?: ReadonlyMap<string, Instance>;
  };
  private policyOf?: { sha: string; policy: SigningPolicy | undefined };
  /** The desired state of the revision this syncer applied last, as it loaded it. */
  private applied?: { sha: string; desired: DesiredState };
  private running: Promise<unknown> = Promise.resolve();

  constructor(options: SyncerOptions) {
    this.store = options.store;
    this.branch = options.branch ?? "main";
    this.clock = options.clock ?? systemClock;
    this.log = options.log ?? silentLog;
    this.source = describeLocation(options.source);
    this.maxSuperseded = options.maxSuperseded ?? 1000;
    const remote: { cacheDir: string; credentials?: GitCredentials; http?: HttpClient } = {
      cacheDir: options.cacheDir,
    };
    if (options.credentials) remote.credentials = options.credentials;
    if (options.http) remote.http = options.http;
    this.repository = FleetRepository.open(options.source, remote);
  }

  /** Syncs once. Calls are serialised: a call made while one runs starts after it. */
  sync(options: SyncOptions = {}): Promise<SyncOutcome> {
    const run = this.running.then(() => this.syncOnce(options));
    // Settled to nothing: the chain must not keep the last outcome (every new generation of a
    // 100,000-instance rollout) alive until the next sync.
    this.running = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Releases the repository's file descriptors. */
  /**
   * The desired state of `sha` if it is the revision this syncer applied last (what the hub records
   * of its declarations, without loading and rendering the fleet again); undefined otherwise.
   */
  appliedState(sha: string): DesiredState | undefined {
    return this.applied?.sha === sha ? this.applied.desired : undefined;
  }

  close(): void {
    this.repository.close();
  }

  private async syncOnce(options: SyncOptions): Promise<SyncOutcome> {
    try {
      return await this.attempt(options);
    } catch (error) {
      if (!this.repository.isMirror || !isCacheCorruption(error)) throw error;
      // The mirror is only a cache: drop it and fetch everything again, once.
      this.log.warn(
        { branch: this.branch, source: this.source, error: String(error) },
        "the git cache is corrupt; fetching it again",
      );
      this.repository.discard();
      try {
        return await this.attempt(options);
      } catch (again) {
        if (!isCacheCorruption(again)) throw again;
        this.repository.discard();
        throw new RepoError(
          "E_CACHE_CORRUPT",
          `the git cache of ${this.source} is unreadable even after fetching it again (${(again as Error).message}); it was removed`,
          { transient: true, cause: again },
        );
      }
    }
  }

  private async attempt(options: SyncOptions): Promise<SyncOutcome> {
    const branch = this.branch;
    const head = await this.fetch();
    const state = await this.store.syncState(branch);
    // A refused rewrite is the recorded head; accepting it means syncing that head after all.
    const adopting =
      options.acceptRewrite === true && state?.lastGood !== undefined && head !== state.lastGood;
    if (state?.head === head && !adopting)
      return { kind: "up-to-date", branch, head, ...lastGoodOf(state.lastGood) };
    return this.syncHead(head, state?.head, state?.lastGood, options);
  }

  private async fetch(): Promise<string> {
    const at = this.clock.now();
    try {
      const head = await this.repository.fetch(this.branch);
      const resolved = await this.store.resolveEvent(this.branch, "fetch-failed", at);
      if (resolved) this.log.info({ branch: this.branch, source: this.source }, "fetching works again");
      return head;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const lastGood = (await this.store.syncState(this.branch))?.lastGood;
      await this.store.openEvent(
        { branch: this.branch, kind: "fetch-failed", message, ...lastGoodOf(lastGood) },
        at,
      );
      this.log.error(
        { branch: this.branch, source: this.source, code: (error as { code?: string }).code },
        `fetch failed: ${message}`,
      );
      throw error;
    }
  }

  private async syncHead(
    head: string,
    previousHead: string | undefined,
    lastGood: string | undefined,
    options: SyncOptions,
  ): Promise<SyncOutcome> {
    const branch = this.branch;
    const at = this.clock.now();
    if (lastGood && !this.repository.isAncestor(lastGood, head)) {
      if (!options.acceptRewrite) {
        const event = await this.store.openEvent(
          {
            branch,
            kind: "force-push",
            head,
            lastGood,
            message: `branch ${branch} was rewritten: ${head.slice(0, 12)} does not descend from the last synced revision ${lastGood.slice(0, 12)}; still serving ${lastGood.slice(0, 12)}. Push a commit on top of it, or run \`steward sync --accept-rewrite\` to adopt the new history`,
          },
          at,
        );
        await this.store.recordHead(branch, head, at, this.source);
        this.log.warn({ branch, head, lastGood }, event.message);
        return { kind: "refused", reason: "force-push", branch, head, lastGood, event };
      }
      this.log.warn({ branch, head, lastGood }, "adopting a rewritten branch");
    }
    if (await this.store.resolveEvent(branch, "force-push", at))
      this.log.info({ branch, head }, "the branch descends from the last good revision again");

    const headCommit = this.repository.commit(head);
    // The walk back stops at a commit the store knows: the recent ones suffice, since it goes back
    // at most maxSuperseded + 1 commits.
    const known = previousHead
      ? new Set((await this.store.revisions(branch, this.maxSuperseded + 100)).map((r) => r.sha))
      : new Set<string>();
    const commits = previousHead
      ? this.repository.commitsSince(
          head,
          (oid) => oid === previousHead || oid === lastGood || known.has(oid),
          this.maxSuperseded + 1,
        )
      : [headCommit];
    const superseded = commits.filter((c) => c.oid !== head).map(revisionInfo);
    const revision = revisionInfo(headCommit);

    const loaded = await this.repository.load(head, this.analyses);
    const diagnostics = [...loaded.diagnostics];
    let signer: string | undefined;
    if (loaded.ok && loaded.desired) {
      // Once the last good revision requires signatures, its policy is the one in force: a commit
      // cannot switch the check off (or swap the keys) on itself. A commit that turns signing on
      // must satisfy its own policy.
      let policy = lastGood ? await this.policyAt(lastGood) : undefined;
      if (!policy?.required) policy = loaded.desired.fleet.signing;
      const verdict = await verifyCommit(headCommit, policy);
      if (verdict.ok) {
        if (policy?.required) signer = verdict.signer;
      } else diagnostics.push(signingDiagnostic(verdict));
    }
    const valid =
      loaded.ok && loaded.desired !== undefined && !diagnostics.some((d) => d.severity === "error");
    if (!valid) {
      // An invalid revision changes no instance: the ones in memory stay the store's.
      const inSync = this.current?.version === (await this.store.version());
      await this.store.recordRevision({
        branch,
        source: this.source,
        revision,
        outcome: "invalid",
        diagnostics,
        superseded,
        at,
      });
      if (inSync) this.current!.version = await this.store.version();
      this.log.warn(
        { branch, head, errors: diagnostics.filter((d) => d.severity === "error").length },
        `revision ${head.slice(0, 12)} is invalid; nothing advances`,
      );
      return {
        kind: "invalid",
        branch,
        head,
        revision,
        diagnostics,
        superseded: superseded.map((r) => r.sha),
        ...lastGoodOf(lastGood),
      };
    }

    const current = await this.currentInstances();
    const desired = loaded.desired!.instances;
    // The store's instances are those of the last revision compared: only what the loader rendered
    // again since then can differ.
    const keys = this.current?.desired ? changedInstanceKeys(this.current.desired, desired) : undefined;
    const changes = generationChanges(current, desired, keys);
    await this.store.recordRevision({
      branch,
      source: this.source,
      revision,
      outcome: "applied",
      superseded,
      generations: changes.generations,
      retired: changes.retired,
      changedAssignments: changes.changedAssignments,
      at,
    });
    await this.remember(changes.generations, changes.retired, head, at);
    if (this.current) this.current.desired = desired;
    this.policyOf = { sha: head, policy: loaded.desired!.fleet.signing };
    this.applied = { sha: head, desired: loaded.desired! };
    this.log.info(
      {
        branch,
        head,
        generations: changes.generations.length,
        retired: changes.retired.length,
        superseded: superseded.length,
      },
      `revision ${head.slice(0, 12)} applied`,
    );
    const outcome: SyncOutcome = {
      kind: "applied",
      branch,
      head,
      revision,
      generations: changes.generations.map((g) => ({
        instanceKey: g.instanceKey,
        generation: g.generation,
        hash: g.hash,
      })),
      retired: changes.retired,
      unchanged: changes.unchanged,
      changedAssignments: changes.changedAssignments,
      superseded: superseded.map((r) => r.sha),
    };
    if (signer) outcome.signer = signer;
    return outcome;
  }

  /** The store's instances, from memory unless another writer moved the store since. */
  private async currentInstances(): Promise<Map<string, CurrentInstance>> {
    const version = await this.store.version();
    if (!this.current || this.current.version !== version)
      this.current = { version, instances: await this.store.currentInstances() };
    return this.current.instances;
  }

  private async remember(
    generations: {
      instanceKey: string;
      assignment: string;
      node: string;
      generation: number;
      hash: string;
    }[],
    retired: string[],
    revision: string,
    at: Date,
  ): Promise<void> {
    if (!this.current) return;
    for (const g of generations)
      this.current.instances.set(g.instanceKey, {
        instanceKey: g.instanceKey,
        assignment: g.assignment,
        node: g.node,
        generation: g.generation,
        hash: g.hash,
        revision,
      });
    for (const key of retired) {
      const instance = this.current.instances.get(key);
      if (instance) {
        instance.retiredAt = at.toISOString();
        instance.retiredBy = revision;
      }
    }
    this.current.version = await this.store.version();
  }

  /** The signing policy of steward.yaml at commit `sha` (only that one file is read). */
  private async policyAt(sha: string): Promise<SigningPolicy | undefined> {
    if (this.policyOf?.sha === sha) return this.policyOf.policy;
    let commit: ParsedCommit;
    try {
      commit = this.repository.commit(sha);
    } catch {
      return undefined;
    }
    // Through a symlink, as the loader reads it: a linked steward.yaml keeps its policy in force.
    const blob = this.repository.trees.blobAt(commit.tree, FLEET_FILE);
    let policy: SigningPolicy | undefined;
    if (blob) {
      const analysis = analyzeFile(this.repository.reader.readBlob(blob));
      const fleet = analysis.documents.find((d) => d.kind === "Fleet" && d.findings.length === 0);
      policy = fleetSettings((fleet?.value as { spec?: FleetSpec } | undefined)?.spec).signing;
    }
    this.policyOf = { sha, policy };
    return policy;
  }
}

/** Errors that mean the local copy of the repository is damaged, not the remote or the content. */
function isCacheCorruption(error: unknown): boolean {
  if (error instanceof GitObjectMissingError) return true;
  const code = (error as { code?: string }).code ?? "";
  return code === "E_GIT" || code.startsWith("Z_");
}

function lastGoodOf(lastGood: string | undefined): { lastGood?: string } {
  return lastGood ? { lastGood } : {};
}
