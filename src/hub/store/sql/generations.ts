/**
 * The syncer's GenerationStore port (src/repo/store.ts) on SQL: tables `revisions`, `generations`,
 * `instances` and `sync_state` (migration 101) and `sync_events` (102). Every write is one unit of
 * work, and `recordRevision` refuses a generation that is not exactly one above the instance's last,
 * so generations stay monotonic and unique even if two syncers raced (the unique key of
 * `generations` refuses the second writer besides).
 */
import type { Diagnostic } from "../../../model/diagnostics.js";
import { StewardError } from "../../../model/errors.js";
import type {
  CurrentInstance,
  GenerationRecord,
  GenerationStore,
  HistoryEntry,
  RevisionChange,
  RevisionRecord,
  SyncEvent,
  SyncEventKind,
  SyncState,
} from "../../../repo/store.js";
import { bySize, listParam, marks, nul, oneOf, RecordMap, type Row, runRows, type Sql } from "./sql.js";

/** A write that would break the generation rules (a lowered or reused generation): nothing was written. */
export class GenerationConflictError extends StewardError {
  override readonly name = "GenerationConflictError";
  constructor(message: string, data: Record<string, unknown>) {
    super("E_GENERATION_CONFLICT", message, { data });
  }
}

const REVISIONS = new RecordMap<RevisionRecord>([
  "sha",
  ["seq", "int"],
  "branch",
  "authorName",
  "authorEmail",
  "message",
  "committedAt",
  "syncedAt",
  "outcome",
  ["diagnostics", "json"],
  "supersededBy",
  ["changedAssignments", "json"],
]);

/** A row of `revisions` as a record (the hub's view of a revision is this one without the author's email). */
export function revisionFrom(row: Row): RevisionRecord {
  const record = REVISIONS.from(row);
  record.diagnostics ??= [] as Diagnostic[];
  return record;
}

const CURRENT = new RecordMap<CurrentInstance>([
  "instanceKey",
  "assignment",
  "node",
  "generation",
  "hash",
  "revision",
  "retiredAt",
  "retiredBy",
]);

/** A row of `sync_events`. */
export const SYNC_EVENTS = new RecordMap<SyncEvent>([
  ["id", "int"],
  "branch",
  "kind",
  "head",
  "lastGood",
  "message",
  "openedAt",
  "lastSeenAt",
  "resolvedAt",
]);

/** A row of `sync_state`. */
export const SYNC_STATE = new RecordMap<SyncState>(["branch", "head", "lastGood", "updatedAt", "source"]);

const GENERATIONS = new RecordMap<GenerationRecord>([
  "instanceKey",
  "generation",
  "assignment",
  "node",
  "hash",
  ["spec", "json"],
  ["rollout", "json"],
  ["budget", "json"],
  "revision",
  "createdAt",
]);

const INSERT_GENERATIONS = bySize((rows) => GENERATIONS.insertSql("generations", rows));

/** An instance's current generation, `rows` instances at a time. */
const UPSERT_INSTANCES = bySize(
  (
    rows,
  ) => `INSERT INTO instances (instance_key, assignment, node, generation, hash, revision, retired_at, retired_by)
     VALUES ${Array.from({ length: rows }, () => `(${marks(6)}, NULL, NULL)`).join(", ")}
     ON CONFLICT (instance_key) DO UPDATE SET generation = excluded.generation, hash = excluded.hash,
       revision = excluded.revision, retired_at = NULL, retired_by = NULL`,
);

const INSERT_REVISION = `INSERT INTO revisions (sha, seq, branch, author_name, author_email, message, committed_at, synced_at, outcome, diagnostics, changed_assignments, superseded_by)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

const UPSERT_SYNC_STATE = `INSERT INTO sync_state (branch, head, last_good, updated_at, source) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (branch) DO UPDATE SET head = excluded.head, last_good = coalesce(excluded.last_good, sync_state.last_good),
    updated_at = excluded.updated_at, source = coalesce(excluded.source, sync_state.source)`;

/** Runs writes as one unit of work on a connection of the store. */
export type SqlUnit = <T>(work: (sql: Sql) => Promise<T>) => Promise<T>;

/** The GenerationStore on SQL: reads on `sql`, each write in its own unit of work. */
export class SqlGenerationStore implements GenerationStore {
  constructor(
    private readonly sql: Sql,
    private readonly unit: SqlUnit,
  ) {}

  async syncState(branch: string): Promise<SyncState | undefined> {
    const row = await this.sql.get("SELECT * FROM sync_state WHERE branch = ?", [branch]);
    return row ? SYNC_STATE.from(row) : undefined;
  }

  async currentInstances(): Promise<Map<string, CurrentInstance>> {
    const out = new Map<string, CurrentInstance>();
    // Each row comes with its own copy of every text: the few assignment names, node names and
    // revisions that 100,000 instances share are kept once (the syncer holds these for its life).
    const texts = new Map<string, string>();
    const once = (text: string) => {
      const kept = texts.get(text);
      if (kept !== undefined) return kept;
      texts.set(text, text);
      return text;
    };
    for (const row of await this.sql.all("SELECT * FROM instances")) {
      const instance = CURRENT.from(row);
      instance.assignment = once(instance.assignment);
      instance.node = once(instance.node);
      instance.revision = once(instance.revision);
      if (instance.retiredBy !== undefined) instance.retiredBy = once(instance.retiredBy);
      out.set(instance.instanceKey, instance);
    }
    return out;
  }

  async version(): Promise<number> {
    return versionOf(this.sql);
  }

  async revision(sha: string): Promise<RevisionRecord | undefined> {
    const row = await this.sql.get("SELECT * FROM revisions WHERE sha = ?", [sha]);
    return row ? revisionFrom(row) : undefined;
  }

  async revisions(branch: string, limit = 100): Promise<RevisionRecord[]> {
    return (
      await this.sql.all("SELECT * FROM revisions WHERE branch = ? ORDER BY seq DESC LIMIT ?", [
        branch,
        limit,
      ])
    ).map(revisionFrom);
  }

  recordRevision(change: RevisionChange): Promise<void> {
    const at = change.at.toISOString();
    return this.unit(async (sql) => {
      let seq = await versionOf(sql);
      for (const skipped of change.superseded ?? [])
        await sql.run(`${INSERT_REVISION} ON CONFLICT (sha) DO NOTHING`, [
          skipped.sha,
          ++seq,
          change.branch,
          skipped.authorName,
          skipped.authorEmail,
          skipped.message,
          skipped.committedAt,
          at,
          "superseded",
          null,
          "[]",
          change.revision.sha,
        ]);
      // A head seen again (a rewrite accepted back to a known commit) is synced again: new order, new outcome.
      await sql.run(
        `${INSERT_REVISION} ON CONFLICT (sha) DO UPDATE SET seq = excluded.seq, synced_at = excluded.synced_at,
           outcome = excluded.outcome, diagnostics = excluded.diagnostics, superseded_by = NULL,
           changed_assignments = excluded.changed_assignments`,
        [
          change.revision.sha,
          ++seq,
          change.branch,
          change.revision.authorName,
          change.revision.authorEmail,
          change.revision.message,
          change.revision.committedAt,
          at,
          change.outcome,
          change.diagnostics?.length ? JSON.stringify(change.diagnostics) : null,
          JSON.stringify(change.changedAssignments ?? []),
          null,
        ],
      );
      if (change.outcome === "applied") {
        const generations = change.generations ?? [];
        // Each generation is one above the instance's last: all of them checked in one query.
        const last = new Map<string, number>();
        if (generations.length > 0)
          for (const row of await sql.all(
            `SELECT instance_key, max(generation) AS generation FROM generations
              WHERE ${oneOf(sql.dialect, "instance_key")} GROUP BY instance_key`,
            [
              listParam(
                sql.dialect,
                generations.map((next) => next.instanceKey),
              ),
            ],
          ))
            last.set(row.instance_key as string, Number(row.generation));
        for (const next of generations) {
          const before = last.get(next.instanceKey) ?? 0;
          if (next.generation !== before + 1)
            throw new GenerationConflictError(
              `generation ${next.generation} of ${next.instanceKey} is not one above its last (${before}): another syncer wrote first; sync again`,
              { instanceKey: next.instanceKey, generation: next.generation, last: before },
            );
        }
        const sha = change.revision.sha;
        await runRows(
          sql,
          generations.map((next) => GENERATIONS.to({ ...next, revision: sha, createdAt: at })),
          INSERT_GENERATIONS,
        );
        await runRows(
          sql,
          generations.map((next) => [
            next.instanceKey,
            next.assignment,
            next.node,
            next.generation,
            next.hash,
            sha,
          ]),
          UPSERT_INSTANCES,
        );
        for (const key of change.retired ?? [])
          await sql.run(
            "UPDATE instances SET retired_at = ?, retired_by = ? WHERE instance_key = ? AND retired_at IS NULL",
            [at, change.revision.sha, key],
          );
      }
      await sql.run(UPSERT_SYNC_STATE, [
        change.branch,
        change.revision.sha,
        change.outcome === "applied" ? change.revision.sha : null,
        at,
        nul(change.source),
      ]);
    });
  }

  recordHead(branch: string, head: string, at: Date, source?: string): Promise<void> {
    return this.unit(async (sql) => {
      await sql.run(UPSERT_SYNC_STATE, [branch, head, null, at.toISOString(), nul(source)]);
    });
  }

  openEvent(
    event: Omit<SyncEvent, "id" | "openedAt" | "lastSeenAt" | "resolvedAt">,
    at: Date,
  ): Promise<SyncEvent> {
    const when = at.toISOString();
    return this.unit(async (sql) => {
      const open = await sql.get(
        "SELECT * FROM sync_events WHERE branch = ? AND kind = ? AND resolved_at IS NULL",
        [event.branch, event.kind],
      );
      let id: number;
      if (open) {
        id = Number(open.id);
        await sql.run(
          "UPDATE sync_events SET head = ?, last_good = ?, message = ?, last_seen_at = ? WHERE id = ?",
          [nul(event.head), nul(event.lastGood), event.message, when, id],
        );
      } else
        id = Number(
          (await sql.get(
            `INSERT INTO sync_events (branch, kind, head, last_good, message, opened_at, last_seen_at)
               VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
            [event.branch, event.kind, nul(event.head), nul(event.lastGood), event.message, when, when],
          ))!.id,
        );
      return SYNC_EVENTS.from((await sql.get("SELECT * FROM sync_events WHERE id = ?", [id]))!);
    });
  }

  resolveEvent(branch: string, kind: SyncEventKind, at: Date): Promise<SyncEvent | undefined> {
    return this.unit(async (sql) => {
      const open = await sql.get(
        "SELECT * FROM sync_events WHERE branch = ? AND kind = ? AND resolved_at IS NULL",
        [branch, kind],
      );
      if (!open) return undefined;
      await sql.run("UPDATE sync_events SET resolved_at = ? WHERE id = ?", [at.toISOString(), open.id]);
      return SYNC_EVENTS.from((await sql.get("SELECT * FROM sync_events WHERE id = ?", [open.id]))!);
    });
  }

  async openEvents(branch?: string): Promise<SyncEvent[]> {
    const rows =
      branch === undefined
        ? await this.sql.all("SELECT * FROM sync_events WHERE resolved_at IS NULL ORDER BY id")
        : await this.sql.all(
            "SELECT * FROM sync_events WHERE resolved_at IS NULL AND branch = ? ORDER BY id",
            [branch],
          );
    return rows.map((r) => SYNC_EVENTS.from(r));
  }

  async history(query: { assignment: string; node?: string; limit?: number }): Promise<HistoryEntry[]> {
    const rows = await this.sql.all(
      `SELECT g.instance_key, g.generation, g.assignment, g.node, g.hash, g.created_at,
              r.sha, r.author_name, r.author_email, r.message, r.committed_at,
              i.generation AS current_generation, i.retired_at, i.retired_by
       FROM generations g
       JOIN revisions r ON r.sha = g.revision
       LEFT JOIN instances i ON i.instance_key = g.instance_key
       WHERE g.assignment = ? ${query.node !== undefined ? "AND g.node = ?" : ""}
       ORDER BY g.created_at DESC, g.generation DESC, g.node
       LIMIT ?`,
      [query.assignment, ...(query.node !== undefined ? [query.node] : []), query.limit ?? 1000],
    );
    return rows.map((row) => {
      const last = row.current_generation === row.generation;
      const entry: HistoryEntry = {
        instanceKey: row.instance_key as string,
        assignment: row.assignment as string,
        node: row.node as string,
        generation: row.generation as number,
        hash: row.hash as string,
        revision: {
          sha: row.sha as string,
          authorName: row.author_name as string,
          authorEmail: row.author_email as string,
          message: row.message as string,
          committedAt: row.committed_at as string,
        },
        createdAt: row.created_at as string,
        current: last && !row.retired_at,
      };
      if (last && row.retired_at) {
        entry.retiredAt = row.retired_at as string;
        if (row.retired_by) entry.retiredBy = row.retired_by as string;
      }
      return entry;
    });
  }

  async generation(instanceKey: string, generation: number): Promise<GenerationRecord | undefined> {
    const row = await this.sql.get("SELECT * FROM generations WHERE instance_key = ? AND generation = ?", [
      instanceKey,
      generation,
    ]);
    return row ? GENERATIONS.from(row) : undefined;
  }
}

async function versionOf(sql: Sql): Promise<number> {
  return Number((await sql.get("SELECT coalesce(max(seq), 0) AS seq FROM revisions"))?.seq ?? 0);
}
