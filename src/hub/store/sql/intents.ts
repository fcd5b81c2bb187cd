/**
 * The intents port on SQL (table `intents`). Intents are kept for every generation; a reconcile and
 * a hub's start look only at the live ones (the partial index `intents_live`), so what they read does
 * not grow with the history.
 */
import type { IntentRecord, IntentStatus } from "../../records.js";
import type { Intents } from "../store.js";
import { countsOf, marks, RecordMap, type Sql } from "./sql.js";

export const INTENTS = new RecordMap<IntentRecord>([
  "instanceKey",
  "generation",
  "assignment",
  "node",
  "revision",
  "hash",
  "state",
  "version",
  "status",
  "holdReason",
  "outcome",
  "failureClass",
  "reason",
  "message",
  "failures",
  "firstFailureAt",
  "nextAttemptAt",
  "deadlineAt",
  "lastAttemptId",
  "accountedAttemptId",
  ["everConverged", "bool"],
  "convergedAt",
  "supersededBy",
  "createdAt",
  "updatedAt",
]);

const UPSERT_INTENT = INTENTS.upsertSql("intents", ["instance_key", "generation"]);

export class IntentsSql implements Intents {
  constructor(private readonly sql: Sql) {}

  async get(key: string, generation: number): Promise<IntentRecord | undefined> {
    const row = await this.sql.get("SELECT * FROM intents WHERE instance_key = ? AND generation = ?", [
      key,
      generation,
    ]);
    return row ? INTENTS.from(row) : undefined;
  }

  async ofInstance(key: string): Promise<IntentRecord[]> {
    return (
      await this.sql.all("SELECT * FROM intents WHERE instance_key = ? ORDER BY generation", [key])
    ).map((r) => INTENTS.from(r));
  }

  async list(
    filter: { status?: IntentStatus; node?: string; assignment?: string } = {},
  ): Promise<IntentRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    for (const column of ["status", "node", "assignment"] as const)
      if (filter[column] !== undefined) {
        where.push(`${column} = ?`);
        params.push(filter[column]);
      }
    const clause = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    return (
      await this.sql.all(`SELECT * FROM intents ${clause} ORDER BY instance_key, generation`, params)
    ).map((r) => INTENTS.from(r));
  }

  async save(intent: IntentRecord): Promise<void> {
    await this.sql.run(UPSERT_INTENT, INTENTS.to(intent));
  }

  async olderLive(key: string, generation: number): Promise<IntentRecord[]> {
    return (
      await this.sql.all(
        "SELECT * FROM intents WHERE instance_key = ? AND generation < ? AND status NOT IN ('superseded', 'retired')",
        [key, generation],
      )
    ).map((r) => INTENTS.from(r));
  }

  async keysOfNode(node: string, statuses: readonly IntentStatus[]): Promise<string[]> {
    return (
      await this.sql.all(
        `SELECT instance_key FROM intents WHERE node = ? AND status IN (${marks(statuses.length)}) ORDER BY instance_key`,
        [node, ...statuses],
      )
    ).map((r) => r.instance_key as string);
  }

  async countsByStatus(): Promise<Record<string, number>> {
    return countsOf(
      await this.sql.all("SELECT status, count(*) AS n FROM intents GROUP BY status"),
      "status",
    );
  }

  async recoveryKeys(): Promise<string[]> {
    return (
      await this.sql.all(
        `SELECT i.instance_key FROM instances i
           LEFT JOIN intents t ON t.instance_key = i.instance_key AND t.generation = i.generation
          WHERE (i.retired_at IS NULL AND (t.status IS NULL OR t.status != 'converged'))
             OR (i.retired_at IS NOT NULL AND t.status IS NOT NULL AND t.status NOT IN ('retired', 'superseded'))
         UNION
         SELECT instance_key FROM intents WHERE status NOT IN ('superseded', 'retired') AND status != 'converged'`,
      )
    ).map((r) => r.instance_key as string);
  }
}
