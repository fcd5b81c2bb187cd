/**
 * The intents port on SQL (table `intents`). Intents are kept for every generation; a reconcile and
 * a hub's start look only at the live ones (the partial index `intents_live`), so what they read does
 * not grow with the history.
 */
import type { IntentRecord, IntentStatus } from "../../records.js";
import type { Intents } from "../store.js";
import { type ReadAhead, rolloutOf } from "./read-ahead.js";
import { countsOf, listParam, marks, oneOf, RecordMap, type Sql } from "./sql.js";

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

const UPSERT_INTENT = INTENTS.upsertWrite("intents", ["instance_key", "generation"]);

/** What `olderLive` leaves out: intents no reconcile looks at again. */
const ENDED: readonly string[] = ["superseded", "retired"];

export class IntentsSql implements Intents {
  constructor(
    private readonly sql: Sql,
    /** In a unit of work: what it read ahead (read-ahead.ts). */
    private readonly ahead?: ReadAhead,
  ) {}

  /**
   * Reads ahead the intents of `keys` a reconcile reads: the current generation's and the live ones
   * (the desired instances read ahead first say which generation is current).
   */
  async readAhead(keys: readonly string[]): Promise<void> {
    if (!this.ahead) return;
    const { dialect } = this.sql;
    const current: string[] = [];
    for (const key of keys) {
      const desired = this.ahead.desired.get(key);
      if (!desired) continue;
      this.ahead.intents.set(key, { current: desired.generation, byGeneration: new Map() });
      current.push(key);
    }
    if (current.length === 0) return;
    const rows = await this.sql.all(
      `SELECT t.* FROM intents t JOIN instances i ON i.instance_key = t.instance_key
        WHERE ${oneOf(dialect, "t.instance_key")}
          AND (t.generation = i.generation OR t.status NOT IN ('superseded', 'retired'))`,
      [listParam(dialect, current)],
    );
    for (const row of rows) {
      const intent = INTENTS.from(row);
      this.ahead.intents.get(intent.instanceKey)?.byGeneration.set(intent.generation, intent);
    }
  }

  async get(key: string, generation: number): Promise<IntentRecord | undefined> {
    const ahead = this.ahead?.intents.get(key);
    const found = ahead?.byGeneration.get(generation);
    if (found) return { ...found };
    if (ahead?.current === generation) return undefined;
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
    await this.sql.write(UPSERT_INTENT, INTENTS.to(intent));
    if (!this.ahead) return;
    this.keepOfNode(intent);
    this.ahead.intents.get(intent.instanceKey)?.byGeneration.set(intent.generation, INTENTS.copy(intent));
    // What the unit found absent may be there now.
    if (intent.status === "held") this.ahead.noneHeld.delete(rolloutOf(intent.assignment, intent.revision));
    if (intent.status === "blocked" || intent.status === "stuck")
      this.ahead.noneFailed.delete(rolloutOf(intent.assignment, intent.revision));
    const none = this.ahead.noneOfNode.get(intent.node);
    if (none) for (const [text, statuses] of none) if (statuses.includes(intent.status)) none.delete(text);
  }

  /**
   * Keeps the node's status lists read ahead (`ofNode`) true to `intent`, about to be saved: moved
   * in or out of each list its old and new status belong to, when its old row is known (read
   * ahead, or none); otherwise the node's lists go and are read again.
   */
  private keepOfNode(intent: IntentRecord): void {
    const ahead = this.ahead!;
    const lists = ahead.ofNode.get(intent.node);
    if (!lists) return;
    const known = ahead.intents.get(intent.instanceKey);
    const before = known?.byGeneration.get(intent.generation);
    if (!known || (before === undefined && known.current !== intent.generation)) {
      ahead.ofNode.delete(intent.node);
      return;
    }
    const key = intent.instanceKey;
    for (const [text, keys] of lists) {
      const statuses = text.split(",");
      const was = before !== undefined && statuses.includes(before.status);
      const is = statuses.includes(intent.status);
      if (was === is) continue;
      if (was) {
        const at = keys.indexOf(key);
        if (at < 0) {
          ahead.ofNode.delete(intent.node);
          return;
        }
        keys.splice(at, 1);
      } else {
        let at = 0;
        while (at < keys.length && keys[at]! <= key) at++;
        keys.splice(at, 0, key);
      }
    }
  }

  async olderLive(key: string, generation: number): Promise<IntentRecord[]> {
    const ahead = this.ahead?.intents.get(key);
    if (ahead) {
      const older: IntentRecord[] = [];
      for (const intent of ahead.byGeneration.values())
        if (intent.generation < generation && !ENDED.includes(intent.status)) older.push({ ...intent });
      return older.sort((a, b) => a.generation - b.generation);
    }
    return (
      await this.sql.all(
        "SELECT * FROM intents WHERE instance_key = ? AND generation < ? AND status NOT IN ('superseded', 'retired')",
        [key, generation],
      )
    ).map((r) => INTENTS.from(r));
  }

  /** Reads ahead, for each of `nodes`, the keys of its intents in one of `statuses` (as `keysOfNode` tells them). */
  async readAheadOfNodes(nodes: readonly string[], statuses: readonly IntentStatus[]): Promise<void> {
    if (!this.ahead || nodes.length === 0) return;
    const text = statuses.join(",");
    const found = new Map<string, string[]>(nodes.map((node) => [node, []]));
    const { dialect } = this.sql;
    for (const row of await this.sql.all(
      `SELECT node, instance_key FROM intents WHERE ${oneOf(dialect, "node")} AND status IN (${marks(statuses.length)}) ORDER BY instance_key`,
      [listParam(dialect, nodes), ...statuses],
    ))
      found.get(row.node as string)?.push(row.instance_key as string);
    for (const [node, keys] of found) {
      let lists = this.ahead.ofNode.get(node);
      if (!lists) {
        lists = new Map();
        this.ahead.ofNode.set(node, lists);
      }
      lists.set(text, keys);
    }
  }

  async keysOfNode(node: string, statuses: readonly IntentStatus[]): Promise<string[]> {
    const text = statuses.join(",");
    const ahead = this.ahead?.ofNode.get(node)?.get(text);
    if (ahead) return [...ahead];
    if (this.ahead?.noneOfNode.get(node)?.has(text)) return [];
    const keys = (
      await this.sql.all(
        `SELECT instance_key FROM intents WHERE node = ? AND status IN (${marks(statuses.length)}) ORDER BY instance_key`,
        [node, ...statuses],
      )
    ).map((r) => r.instance_key as string);
    if (keys.length === 0 && this.ahead) {
      const none = this.ahead.noneOfNode.get(node) ?? new Map<string, readonly IntentStatus[]>();
      none.set(text, [...statuses]);
      this.ahead.noneOfNode.set(node, none);
    }
    return keys;
  }

  async nodesWith(statuses: readonly IntentStatus[]): Promise<string[]> {
    return (
      await this.sql.all(
        `SELECT DISTINCT node FROM intents WHERE status IN (${marks(statuses.length)}) ORDER BY node`,
        [...statuses],
      )
    ).map((r) => r.node as string);
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
