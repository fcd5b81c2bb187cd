/**
 * The GenerationStore port: what the syncer needs from durable storage. The hub's store implements
 * it (src/hub/store/sql/generations.ts, on SQLite or PostgreSQL); the syncer never sees SQL. Every write that moves
 * desired state is one call, so it happens in one transaction or not at all.
 */
import type { Diagnostic } from "../model/diagnostics.js";
import type { EffectiveBudget } from "../model/fleet.js";
import type { InstanceSpec, Rollout } from "../model/generated.js";

/** A commit as the syncer records it. */
export interface RevisionInfo {
  sha: string;
  authorName: string;
  authorEmail: string;
  /** First line and body, as written. */
  message: string;
  /** Commit time (committer date), ISO 8601. */
  committedAt: string;
}

/** What became of a revision: applied (generations recorded), invalid (nothing advanced), superseded (a later commit of the same fetch won). */
export type RevisionOutcome = "applied" | "invalid" | "superseded";

/** A revision as stored, with what became of it. */
export interface RevisionRecord extends RevisionInfo {
  seq: number;
  branch: string;
  syncedAt: string;
  outcome: RevisionOutcome;
  /** For `invalid`: why (schema, semantics, or the signing policy). */
  diagnostics: Diagnostic[];
  /** For `superseded`: the commit that won the fetch. */
  supersededBy?: string;
  /** Assignments whose instances got a new generation or were retired by this revision. */
  changedAssignments: string[];
}

/** Generation G of an instance: the rendered spec it must reach. */
export interface GenerationRecord {
  instanceKey: string;
  generation: number;
  assignment: string;
  node: string;
  hash: string;
  spec: InstanceSpec;
  rollout: Rollout;
  budget: EffectiveBudget;
  revision: string;
  createdAt: string;
}

/** The desired generation of an instance now (or when it was retired). */
export interface CurrentInstance {
  instanceKey: string;
  assignment: string;
  node: string;
  generation: number;
  hash: string;
  revision: string;
  /** Set when no revision since has the instance: no longer managed, nothing deleted. */
  retiredAt?: string;
  retiredBy?: string;
}

/** Where the syncer stands on a branch. */
export interface SyncState {
  branch: string;
  /** The fleet repository (a path or URL, never with credentials). */
  source?: string;
  /** The last commit seen, whatever its outcome. */
  head?: string;
  /** The last applied revision: what the hub serves. */
  lastGood?: string;
  updatedAt: string;
}

/**
 * A fact about the sync itself that the hub turns into a condition: the branch was rewritten
 * (`force-push`), or the remote could not be fetched (`fetch-failed`). Open until resolved; one
 * open event per branch and kind, updated (not duplicated) while the problem lasts.
 */
export interface SyncEvent {
  id: number;
  branch: string;
  kind: SyncEventKind;
  /** The head that caused it (for `force-push`: the rewritten head that was refused). */
  head?: string;
  /** The revision still served meanwhile. */
  lastGood?: string;
  message: string;
  openedAt: string;
  lastSeenAt: string;
  resolvedAt?: string;
}

/** Kinds of sync event; the hub maps them to conditions. */
export type SyncEventKind = "force-push" | "fetch-failed";

/** One instance's new generation, as the syncer computed it. */
export type NewGeneration = Omit<GenerationRecord, "revision" | "createdAt">;

/** Everything one synced fetch changes, written in one transaction. */
export interface RevisionChange {
  branch: string;
  source?: string;
  revision: RevisionInfo;
  outcome: "applied" | "invalid";
  diagnostics?: Diagnostic[];
  /** Commits of the same fetch that lost to `revision`, oldest first. */
  superseded?: RevisionInfo[];
  /** For `applied`: instances whose hash changed (or that appeared), with their next generation. */
  generations?: NewGeneration[];
  /** For `applied`: instances no longer in the tree. */
  retired?: string[];
  changedAssignments?: string[];
  at: Date;
}

/** One generation in an instance's history. */
export interface HistoryEntry {
  instanceKey: string;
  assignment: string;
  node: string;
  generation: number;
  hash: string;
  revision: RevisionInfo;
  createdAt: string;
  /** True for the generation the instance is at now (unless retired). */
  current: boolean;
  /** When the instance was retired, on its last generation. */
  retiredAt?: string;
  retiredBy?: string;
}

/**
 * Durable revisions, generations and sync state. Contract: `recordRevision` is atomic; a generation
 * is always exactly one above the instance's last (never lowered, never reused); nothing is ever
 * deleted (retired instances keep their rows); `version()` changes with every recorded revision.
 * Every call is asynchronous (the hub's store may be a database server).
 */
export interface GenerationStore {
  /** The branch's sync state, if it was ever synced. */
  syncState(branch: string): Promise<SyncState | undefined>;
  /** Every instance ever managed (retired ones included), by instance key. */
  currentInstances(): Promise<Map<string, CurrentInstance>>;
  /**
   * A number that changes whenever `recordRevision` commits, so a caller can keep
   * `currentInstances()` in memory and know when to read it again.
   */
  version(): Promise<number>;
  /** A recorded revision, if any. */
  revision(sha: string): Promise<RevisionRecord | undefined>;
  /** Revisions of a branch, newest first. */
  revisions(branch: string, limit?: number): Promise<RevisionRecord[]>;
  /**
   * Records a fetch's outcome in one transaction: the superseded commits, the revision with its
   * outcome, (when applied) the new generations and retirements, and the branch's sync state.
   * Rejects, changing nothing, if a generation would not be exactly one above the instance's last.
   */
  recordRevision(change: RevisionChange): Promise<void>;
  /** Records that the head was seen without syncing it (a refused force-push): sync state only. */
  recordHead(branch: string, head: string, at: Date, source?: string): Promise<void>;
  /** Opens an event of this kind for the branch, or updates the open one. */
  openEvent(
    event: Omit<SyncEvent, "id" | "openedAt" | "lastSeenAt" | "resolvedAt">,
    at: Date,
  ): Promise<SyncEvent>;
  /** Resolves the open event of this kind for the branch, if any; resolves with it. */
  resolveEvent(branch: string, kind: SyncEventKind, at: Date): Promise<SyncEvent | undefined>;
  /** Open events (all branches when `branch` is undefined). */
  openEvents(branch?: string): Promise<SyncEvent[]>;
  /** Generations of an assignment (optionally on one node), newest first. */
  history(query: { assignment: string; node?: string; limit?: number }): Promise<HistoryEntry[]>;
  /** The generation record itself (the spec the hub sends in a bundle). */
  generation(instanceKey: string, generation: number): Promise<GenerationRecord | undefined>;
}
