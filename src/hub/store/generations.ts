/**
 * The GenerationStore port (src/repo/store.ts) over the hub's SQLite database: tables `revisions`,
 * `generations`, `instances` and `sync_state` (migration 101) and `sync_events` (102). Each
 * `recordRevision` is one transaction, and it refuses a generation that is not exactly one above the
 * instance's last, so generations stay monotonic and unique even if two syncers raced.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Diagnostic } from "../../model/diagnostics.js";
import { EnvironmentError, StewardError } from "../../model/errors.js";
import type {
  CurrentInstance,
  GenerationRecord,
  GenerationStore,
  HistoryEntry,
  RevisionChange,
  RevisionInfo,
  RevisionRecord,
  SyncEvent,
  SyncEventKind,
  SyncState,
} from "../../repo/store.js";
import { type Db, openDatabase } from "./database.js";

/** A write that would break the generation rules (a lowered or reused generation): nothing was written. */
export class GenerationConflictError extends StewardError {
  override readonly name = "GenerationConflictError";
  constructor(message: string, data: Record<string, unknown>) {
    super("E_GENERATION_CONFLICT", message, { data });
  }
}

interface RevisionRow {
  sha: string;
  seq: number;
  branch: string;
  author_name: string;
  author_email: string;
  message: string;
  committed_at: string;
  synced_at: string;
  outcome: RevisionRecord["outcome"];
  diagnostics: string | null;
  superseded_by: string | null;
  changed_assignments: string;
}

interface InstanceRow {
  instance_key: string;
  assignment: string;
  node: string;
  generation: number;
  hash: string;
  revision: string;
  retired_at: string | null;
  retired_by: string | null;
}

interface GenerationRow {
  instance_key: string;
  generation: number;
  assignment: string;
  node: string;
  hash: string;
  spec: string;
  rollout: string;
  budget: string;
  revision: string;
  created_at: string;
}

interface EventRow {
  id: number;
  branch: string;
  kind: SyncEventKind;
  head: string | null;
  last_good: string | null;
  message: string;
  opened_at: string;
  last_seen_at: string;
  resolved_at: string | null;
}

function revisionFrom(row: RevisionRow): RevisionRecord {
  const record: RevisionRecord = {
    sha: row.sha,
    seq: row.seq,
    branch: row.branch,
    authorName: row.author_name,
    authorEmail: row.author_email,
    message: row.message,
    committedAt: row.committed_at,
    syncedAt: row.synced_at,
    outcome: row.outcome,
    diagnostics: row.diagnostics ? (JSON.parse(row.diagnostics) as Diagnostic[]) : [],
    changedAssignments: JSON.parse(row.changed_assignments) as string[],
  };
  if (row.superseded_by) record.supersededBy = row.superseded_by;
  return record;
}

function eventFrom(row: EventRow): SyncEvent {
  const event: SyncEvent = {
    id: row.id,
    branch: row.branch,
    kind: row.kind,
    message: row.message,
    openedAt: row.opened_at,
    lastSeenAt: row.last_seen_at,
  };
  if (row.head) event.head = row.head;
  if (row.last_good) event.lastGood = row.last_good;
  if (row.resolved_at) event.resolvedAt = row.resolved_at;
  return event;
}

/** The SQLite GenerationStore. `db` comes from `openDatabase` (migrations 101 and 102 applied). */
export class SqliteGenerationStore implements GenerationStore {
  private readonly statements;

  constructor(private readonly db: Db) {
    this.statements = {
      syncState: db.prepare("SELECT * FROM sync_state WHERE branch = ?"),
      instances: db.prepare("SELECT * FROM instances"),
      maxSeq: db.prepare("SELECT coalesce(max(seq), 0) AS seq FROM revisions"),
      revision: db.prepare("SELECT * FROM revisions WHERE sha = ?"),
      revisions: db.prepare("SELECT * FROM revisions WHERE branch = ? ORDER BY seq DESC LIMIT ?"),
      insertSuperseded: db.prepare(
        `INSERT OR IGNORE INTO revisions (sha, seq, branch, author_name, author_email, message, committed_at, synced_at, outcome, superseded_by)
         VALUES (@sha, @seq, @branch, @authorName, @authorEmail, @message, @committedAt, @syncedAt, 'superseded', @supersededBy)`,
      ),
      // A head seen again (a rewrite accepted back to a known commit) is synced again: new order, new outcome.
      upsertRevision: db.prepare(
        `INSERT INTO revisions (sha, seq, branch, author_name, author_email, message, committed_at, synced_at, outcome, diagnostics, changed_assignments)
         VALUES (@sha, @seq, @branch, @authorName, @authorEmail, @message, @committedAt, @syncedAt, @outcome, @diagnostics, @changedAssignments)
         ON CONFLICT (sha) DO UPDATE SET seq = excluded.seq, synced_at = excluded.synced_at, outcome = excluded.outcome,
           diagnostics = excluded.diagnostics, superseded_by = NULL, changed_assignments = excluded.changed_assignments`,
      ),
      lastGeneration: db.prepare(
        "SELECT coalesce(max(generation), 0) AS generation FROM generations WHERE instance_key = ?",
      ),
      insertGeneration: db.prepare(
        `INSERT INTO generations (instance_key, generation, assignment, node, hash, spec, rollout, budget, revision, created_at)
         VALUES (@instanceKey, @generation, @assignment, @node, @hash, @spec, @rollout, @budget, @revision, @createdAt)`,
      ),
      upsertInstance: db.prepare(
        `INSERT INTO instances (instance_key, assignment, node, generation, hash, revision, retired_at, retired_by)
         VALUES (@instanceKey, @assignment, @node, @generation, @hash, @revision, NULL, NULL)
         ON CONFLICT (instance_key) DO UPDATE SET generation = excluded.generation, hash = excluded.hash,
           revision = excluded.revision, retired_at = NULL, retired_by = NULL`,
      ),
      retire: db.prepare(
        "UPDATE instances SET retired_at = ?, retired_by = ? WHERE instance_key = ? AND retired_at IS NULL",
      ),
      upsertSyncState: db.prepare(
        `INSERT INTO sync_state (branch, head, last_good, updated_at, source) VALUES (@branch, @head, @lastGood, @at, @source)
         ON CONFLICT (branch) DO UPDATE SET head = excluded.head, last_good = coalesce(excluded.last_good, sync_state.last_good),
           updated_at = excluded.updated_at, source = coalesce(excluded.source, sync_state.source)`,
      ),
      openEvent: db.prepare(
        "SELECT * FROM sync_events WHERE branch = ? AND kind = ? AND resolved_at IS NULL",
      ),
      insertEvent: db.prepare(
        `INSERT INTO sync_events (branch, kind, head, last_good, message, opened_at, last_seen_at)
         VALUES (@branch, @kind, @head, @lastGood, @message, @at, @at)`,
      ),
      updateEvent: db.prepare(
        "UPDATE sync_events SET head = @head, last_good = @lastGood, message = @message, last_seen_at = @at WHERE id = @id",
      ),
      resolveEvent: db.prepare("UPDATE sync_events SET resolved_at = ? WHERE id = ?"),
      eventById: db.prepare("SELECT * FROM sync_events WHERE id = ?"),
      openEvents: db.prepare("SELECT * FROM sync_events WHERE resolved_at IS NULL ORDER BY id"),
      openEventsOf: db.prepare(
        "SELECT * FROM sync_events WHERE resolved_at IS NULL AND branch = ? ORDER BY id",
      ),
      generation: db.prepare("SELECT * FROM generations WHERE instance_key = ? AND generation = ?"),
    };
  }

  syncState(branch: string): SyncState | undefined {
    const row = this.statements.syncState.get(branch) as
      | {
          branch: string;
          head: string | null;
          last_good: string | null;
          updated_at: string;
          source: string | null;
        }
      | undefined;
    if (!row) return undefined;
    const state: SyncState = { branch: row.branch, updatedAt: row.updated_at };
    if (row.head) state.head = row.head;
    if (row.last_good) state.lastGood = row.last_good;
    if (row.source) state.source = row.source;
    return state;
  }

  currentInstances(): Map<string, CurrentInstance> {
    const out = new Map<string, CurrentInstance>();
    for (const row of this.statements.instances.iterate() as Iterable<InstanceRow>) {
      const instance: CurrentInstance = {
        instanceKey: row.instance_key,
        assignment: row.assignment,
        node: row.node,
        generation: row.generation,
        hash: row.hash,
        revision: row.revision,
      };
      if (row.retired_at) instance.retiredAt = row.retired_at;
      if (row.retired_by) instance.retiredBy = row.retired_by;
      out.set(row.instance_key, instance);
    }
    return out;
  }

  version(): number {
    return (this.statements.maxSeq.get() as { seq: number }).seq;
  }

  revision(sha: string): RevisionRecord | undefined {
    const row = this.statements.revision.get(sha) as RevisionRow | undefined;
    return row ? revisionFrom(row) : undefined;
  }

  revisions(branch: string, limit = 100): RevisionRecord[] {
    return (this.statements.revisions.all(branch, limit) as RevisionRow[]).map(revisionFrom);
  }

  recordRevision(change: RevisionChange): void {
    const at = change.at.toISOString();
    const s = this.statements;
    this.db.transaction(() => {
      let seq = this.version();
      for (const skipped of change.superseded ?? [])
        s.insertSuperseded.run({
          ...skipped,
          seq: ++seq,
          branch: change.branch,
          syncedAt: at,
          supersededBy: change.revision.sha,
        });
      s.upsertRevision.run({
        ...change.revision,
        seq: ++seq,
        branch: change.branch,
        syncedAt: at,
        outcome: change.outcome,
        diagnostics: change.diagnostics?.length ? JSON.stringify(change.diagnostics) : null,
        changedAssignments: JSON.stringify(change.changedAssignments ?? []),
      });
      if (change.outcome === "applied") {
        for (const next of change.generations ?? []) {
          const last = (s.lastGeneration.get(next.instanceKey) as { generation: number }).generation;
          if (next.generation !== last + 1)
            throw new GenerationConflictError(
              `generation ${next.generation} of ${next.instanceKey} is not one above its last (${last}): another syncer wrote first; sync again`,
              { instanceKey: next.instanceKey, generation: next.generation, last },
            );
          const row = {
            instanceKey: next.instanceKey,
            generation: next.generation,
            assignment: next.assignment,
            node: next.node,
            hash: next.hash,
            spec: JSON.stringify(next.spec),
            rollout: JSON.stringify(next.rollout),
            budget: JSON.stringify(next.budget),
            revision: change.revision.sha,
            createdAt: at,
          };
          s.insertGeneration.run(row);
          s.upsertInstance.run(row);
        }
        for (const key of change.retired ?? []) s.retire.run(at, change.revision.sha, key);
      }
      s.upsertSyncState.run({
        branch: change.branch,
        head: change.revision.sha,
        lastGood: change.outcome === "applied" ? change.revision.sha : null,
        at,
        source: change.source ?? null,
      });
    })();
  }

  recordHead(branch: string, head: string, at: Date, source?: string): void {
    this.statements.upsertSyncState.run({
      branch,
      head,
      lastGood: null,
      at: at.toISOString(),
      source: source ?? null,
    });
  }

  openEvent(event: Omit<SyncEvent, "id" | "openedAt" | "lastSeenAt" | "resolvedAt">, at: Date): SyncEvent {
    const s = this.statements;
    return this.db.transaction(() => {
      const open = s.openEvent.get(event.branch, event.kind) as EventRow | undefined;
      const values = {
        head: event.head ?? null,
        lastGood: event.lastGood ?? null,
        message: event.message,
        at: at.toISOString(),
      };
      let id: number;
      if (open) {
        s.updateEvent.run({ ...values, id: open.id });
        id = open.id;
      } else
        id = Number(s.insertEvent.run({ ...values, branch: event.branch, kind: event.kind }).lastInsertRowid);
      return eventFrom(s.eventById.get(id) as EventRow);
    })();
  }

  resolveEvent(branch: string, kind: SyncEventKind, at: Date): SyncEvent | undefined {
    const open = this.statements.openEvent.get(branch, kind) as EventRow | undefined;
    if (!open) return undefined;
    this.statements.resolveEvent.run(at.toISOString(), open.id);
    return eventFrom(this.statements.eventById.get(open.id) as EventRow);
  }

  openEvents(branch?: string): SyncEvent[] {
    const rows = (
      branch === undefined ? this.statements.openEvents.all() : this.statements.openEventsOf.all(branch)
    ) as EventRow[];
    return rows.map(eventFrom);
  }

  history(query: { assignment: string; node?: string; limit?: number }): HistoryEntry[] {
    const rows = this.db
      .prepare(
        `SELECT g.instance_key, g.generation, g.assignment, g.node, g.hash, g.created_at,
                r.sha, r.author_name, r.author_email, r.message, r.committed_at,
                i.generation AS current_generation, i.retired_at, i.retired_by
         FROM generations g
         JOIN revisions r ON r.sha = g.revision
         LEFT JOIN instances i ON i.instance_key = g.instance_key
         WHERE g.assignment = @assignment ${query.node !== undefined ? "AND g.node = @node" : ""}
         ORDER BY g.created_at DESC, g.generation DESC, g.node
         LIMIT @limit`,
      )
      .all({
        assignment: query.assignment,
        node: query.node,
        limit: query.limit ?? 1000,
      }) as (GenerationRow & {
      sha: string;
      author_name: string;
      author_email: string;
      message: string;
      committed_at: string;
      current_generation: number | null;
      retired_at: string | null;
      retired_by: string | null;
    })[];
    return rows.map((row) => {
      const last = row.current_generation === row.generation;
      const entry: HistoryEntry = {
        instanceKey: row.instance_key,
        assignment: row.assignment,
        node: row.node,
        generation: row.generation,
        hash: row.hash,
        revision: {
          sha: row.sha,
          authorName: row.author_name,
          authorEmail: row.author_email,
          message: row.message,
          committedAt: row.committed_at,
        } satisfies RevisionInfo,
        createdAt: row.created_at,
        current: last && !row.retired_at,
      };
      if (last && row.retired_at) {
        entry.retiredAt = row.retired_at;
        if (row.retired_by) entry.retiredBy = row.retired_by;
      }
      return entry;
    });
  }

  generation(instanceKey: string, generation: number): GenerationRecord | undefined {
    const row = this.statements.generation.get(instanceKey, generation) as GenerationRow | undefined;
    if (!row) return undefined;
    return {
      instanceKey: row.instance_key,
      generation: row.generation,
      assignment: row.assignment,
      node: row.node,
      hash: row.hash,
      spec: JSON.parse(row.spec),
      rollout: JSON.parse(row.rollout),
      budget: JSON.parse(row.budget),
      revision: row.revision,
      createdAt: row.created_at,
    };
  }
}

/** The hub database of a state directory: `<state>/hub.db`. */
export function hubDatabasePath(stateDir: string): string {
  return join(stateDir, "hub.db");
}

/**
 * Opens the GenerationStore of a state directory. With `mustExist`, a missing database is an
 * EnvironmentError telling the user to sync first (rather than an empty store created by accident).
 */
export function openGenerationStore(
  stateDir: string,
  options: { mustExist?: boolean } = {},
): { store: SqliteGenerationStore; close(): void } {
  const path = hubDatabasePath(stateDir);
  if (options.mustExist && !existsSync(path))
    throw new EnvironmentError(`no hub state at ${path}: run \`steward sync\` first (or pass --state DIR)`);
  const db = openDatabase(path);
  return { store: new SqliteGenerationStore(db), close: () => db.close() };
}
