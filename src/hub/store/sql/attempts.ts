/**
 * The attempts port on SQL (tables `attempts`, `outbox`): an attempt is inserted with its outbox row,
 * in the unit of work that decided it; the row goes once the transport accepted the attempt.
 */
import type { AttemptRecord, OutboxRow } from "../../records.js";
import type { Attempts } from "../store.js";
import type { ReadAhead } from "./read-ahead.js";
import { bySize, countsOf, listParam, oneOf, RecordMap, runRows, type Sql } from "./sql.js";

const ATTEMPTS = new RecordMap<AttemptRecord>([
  "id",
  "instanceKey",
  "generation",
  "assignment",
  "node",
  "status",
  "failureClass",
  "reason",
  "message",
  ["evidence", "json"],
  "createdAt",
  "dispatchedAt",
  "leaseExpiresAt",
  "finishedAt",
  "recordedAt",
  "settledBy",
  "settleAfter",
  "supersededBy",
  ["lateResult", "json"],
]);

const OUTBOX = new RecordMap<OutboxRow>(["attemptId", "node", "bundle", "createdAt"]);

const INSERT_ATTEMPT = ATTEMPTS.insertWrite("attempts", ["id"]);
const UPSERT_ATTEMPT = ATTEMPTS.upsertWrite("attempts", ["id"]);
const UPSERT_ATTEMPTS = bySize((rows) => ATTEMPTS.upsertSql("attempts", ["id"], rows));
const INSERT_OUTBOX = OUTBOX.insertWrite("outbox", ["attempt_id"]);

export class AttemptsSql implements Attempts {
  constructor(
    private readonly sql: Sql,
    /** In a unit of work: what it read ahead (read-ahead.ts). */
    private readonly ahead?: ReadAhead,
  ) {}

  /** Reads ahead the last attempts of the intents read ahead. */
  async readAhead(): Promise<void> {
    if (!this.ahead) return;
    const ids: string[] = [];
    for (const { byGeneration } of this.ahead.intents.values())
      for (const intent of byGeneration.values()) if (intent.lastAttemptId) ids.push(intent.lastAttemptId);
    if (ids.length === 0) return;
    const { dialect } = this.sql;
    for (const row of await this.sql.all(`SELECT * FROM attempts WHERE ${oneOf(dialect, "id")}`, [
      listParam(dialect, ids),
    ])) {
      const attempt = ATTEMPTS.from(row);
      this.ahead.attempts.set(attempt.id, attempt);
    }
  }

  /** Reads ahead the attempts `ids` (those the unit has not read ahead already). */
  async readAheadIds(ids: readonly string[]): Promise<void> {
    if (!this.ahead) return;
    const ahead = this.ahead.attempts;
    const wanted = ids.filter((id) => !ahead.has(id));
    if (wanted.length === 0) return;
    const { dialect } = this.sql;
    for (const row of await this.sql.all(`SELECT * FROM attempts WHERE ${oneOf(dialect, "id")}`, [
      listParam(dialect, wanted),
    ])) {
      const attempt = ATTEMPTS.from(row);
      ahead.set(attempt.id, attempt);
    }
  }

  async get(id: string): Promise<AttemptRecord | undefined> {
    const ahead = this.ahead?.attempts.get(id);
    if (ahead) return { ...ahead };
    const row = await this.sql.get("SELECT * FROM attempts WHERE id = ?", [id]);
    return row ? ATTEMPTS.from(row) : undefined;
  }

  async ofInstance(key: string, generation?: number): Promise<AttemptRecord[]> {
    // Ids are ULIDs: by creation time, and in order within a millisecond.
    const rows =
      generation === undefined
        ? await this.sql.all("SELECT * FROM attempts WHERE instance_key = ? ORDER BY created_at, id", [key])
        : await this.sql.all(
            "SELECT * FROM attempts WHERE instance_key = ? AND generation = ? ORDER BY created_at, id",
            [key, generation],
          );
    return rows.map((r) => ATTEMPTS.from(r));
  }

  async insert(attempt: AttemptRecord, bundle: string): Promise<void> {
    await this.sql.write(INSERT_ATTEMPT, ATTEMPTS.to(attempt));
    this.ahead?.attempts.set(attempt.id, ATTEMPTS.copy(attempt));
    await this.sql.write(
      INSERT_OUTBOX,
      OUTBOX.to({ attemptId: attempt.id, node: attempt.node, bundle, createdAt: attempt.createdAt }),
    );
  }

  async save(attempt: AttemptRecord): Promise<void> {
    await this.sql.write(UPSERT_ATTEMPT, ATTEMPTS.to(attempt));
    this.ahead?.attempts.set(attempt.id, ATTEMPTS.copy(attempt));
  }

  async saveDispatched(attempts: readonly (AttemptRecord & { leaseExpiresAt: string })[]): Promise<void> {
    if (attempts.length === 0) return;
    await runRows(
      this.sql,
      attempts.map((attempt) => ATTEMPTS.to(attempt)),
      UPSERT_ATTEMPTS,
    );
    // Attempts handed over together share their times: one statement per lease for their intents.
    // An intent whose last attempt is one of them is that attempt's instance and generation.
    const byLease = new Map<string, { deadline: string; at: string; keys: string[]; ids: string[] }>();
    for (const attempt of attempts) {
      this.ahead?.attempts.set(attempt.id, ATTEMPTS.copy(attempt));
      // The intent's deadline moves by a statement of its own: what was read ahead of it goes.
      this.ahead?.intents.delete(attempt.instanceKey);
      const at = attempt.dispatchedAt ?? attempt.leaseExpiresAt;
      const lease = `${attempt.leaseExpiresAt}\0${at}`;
      let group = byLease.get(lease);
      if (!group) {
        group = { deadline: attempt.leaseExpiresAt, at, keys: [], ids: [] };
        byLease.set(lease, group);
      }
      group.keys.push(attempt.instanceKey);
      group.ids.push(attempt.id);
    }
    const { dialect } = this.sql;
    for (const { deadline, at, keys, ids } of byLease.values())
      await this.sql.run(
        `UPDATE intents SET deadline_at = ?, updated_at = ?
          WHERE ${oneOf(dialect, "instance_key")} AND ${oneOf(dialect, "last_attempt_id")} AND status = 'dispatched'`,
        [deadline, at, listParam(dialect, keys), listParam(dialect, ids)],
      );
  }

  async outbox(): Promise<OutboxRow[]> {
    return (
      await this.sql.all("SELECT attempt_id, node, bundle, created_at FROM outbox ORDER BY attempt_id")
    ).map((r) => OUTBOX.from(r));
  }

  async outboxRows(attemptIds: readonly string[]): Promise<{ row: OutboxRow; attempt: AttemptRecord }[]> {
    if (attemptIds.length === 0) return [];
    const { dialect } = this.sql;
    const found = new Map<string, { row: OutboxRow; attempt: AttemptRecord }>();
    for (const row of await this.sql.all(
      `SELECT a.*, o.node AS outbox_node, o.bundle AS outbox_bundle, o.created_at AS outbox_created_at
         FROM outbox o JOIN attempts a ON a.id = o.attempt_id WHERE ${oneOf(dialect, "o.attempt_id")}`,
      [listParam(dialect, attemptIds)],
    ))
      found.set(row.id as string, {
        row: {
          attemptId: row.id as string,
          node: row.outbox_node as string,
          bundle: row.outbox_bundle as string,
          createdAt: row.outbox_created_at as string,
        },
        attempt: ATTEMPTS.from(row),
      });
    return attemptIds.flatMap((id) => found.get(id) ?? []);
  }

  async deleteOutbox(attemptIds: readonly string[]): Promise<void> {
    if (attemptIds.length === 0) return;
    const { dialect } = this.sql;
    await this.sql.run(`DELETE FROM outbox WHERE ${oneOf(dialect, "attempt_id")}`, [
      listParam(dialect, attemptIds),
    ]);
  }

  async openOfNodes(nodes: readonly string[]): Promise<AttemptRecord[]> {
    if (nodes.length === 0) return [];
    const { dialect } = this.sql;
    return (
      await this.sql.all(
        `SELECT * FROM attempts WHERE ${oneOf(dialect, "node")} AND status IN ('queued', 'dispatched', 'ambiguous') ORDER BY id`,
        [listParam(dialect, nodes)],
      )
    ).map((r) => ATTEMPTS.from(r));
  }

  async countsByStatus(): Promise<Record<string, number>> {
    return countsOf(
      await this.sql.all("SELECT status, count(*) AS n FROM attempts GROUP BY status"),
      "status",
    );
  }
}
