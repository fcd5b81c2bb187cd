/**
 * The conditions port on SQL (tables `conditions`, `condition_history`). The unique index
 * `conditions_open` keeps at most one open condition per type and subject (and reason or generation,
 * for the types keyed by them: conditions.ts). Each write is announced to `written`, so the store can
 * tell its listeners once the unit of work committed.
 */
import type { ConditionEvent, ConditionRecord, ConditionType, SubjectKind } from "../../records.js";
import type { ConditionFilter, Conditions } from "../store.js";
import type { ReadAhead } from "./read-ahead.js";
import { countsOf, listParam, oneOf, RecordMap, type Sql } from "./sql.js";

const CONDITIONS = new RecordMap<ConditionRecord>([
  "id",
  "type",
  "subjectKind",
  "subject",
  "status",
  "since",
  "lastObserved",
  "reason",
  "message",
  ["evidence", "json"],
  ["tried", "json"],
  "resolver",
  "procedure",
  "assignment",
  "node",
  "revision",
  "generation",
  "attemptId",
  "openedAt",
  "resolvedAt",
  "resolution",
]);

const HISTORY = new RecordMap<ConditionEvent>([
  "conditionId",
  "at",
  "event",
  "reason",
  "message",
  "attemptId",
]);

const INSERT_CONDITION = CONDITIONS.insertSql("conditions");
const UPSERT_CONDITION = CONDITIONS.upsertSql("conditions", ["id"]);
const INSERT_EVENT = HISTORY.insertSql("condition_history");

const FILTER_COLUMNS: [keyof ConditionFilter, string][] = [
  ["status", "status"],
  ["type", "type"],
  ["subjectKind", "subject_kind"],
  ["subject", "subject"],
  ["revision", "revision"],
  ["assignment", "assignment"],
  ["node", "node"],
];

export class ConditionsSql implements Conditions {
  constructor(
    private readonly sql: Sql,
    /** Told the id of every condition this port inserts or saves. */
    private readonly written: (id: string) => void = () => undefined,
    /** In a unit of work: what it read ahead (read-ahead.ts). */
    private readonly ahead?: ReadAhead,
  ) {}

  /** Reads ahead the open conditions of the instances `keys` name. */
  async readAhead(keys: readonly string[]): Promise<void> {
    if (!this.ahead || keys.length === 0) return;
    const { dialect } = this.sql;
    for (const key of keys) this.ahead.openConditions.set(key, []);
    for (const row of await this.sql.all(
      `SELECT * FROM conditions WHERE subject_kind = 'instance' AND ${oneOf(dialect, "subject")} AND status = 'open' ORDER BY opened_at, id`,
      [listParam(dialect, keys)],
    ))
      this.ahead.openConditions.get(row.subject as string)?.push(CONDITIONS.from(row));
  }

  /** The open conditions of an instance as read ahead, or undefined when they were not. */
  private openAhead(subjectKind: SubjectKind, subject: string): ConditionRecord[] | undefined {
    return subjectKind === "instance" ? this.ahead?.openConditions.get(subject) : undefined;
  }

  async findOpen(
    type: ConditionType,
    subjectKind: SubjectKind,
    subject: string,
    reason?: string,
    generation?: number,
  ): Promise<ConditionRecord | undefined> {
    const open = this.openAhead(subjectKind, subject);
    if (open) {
      const found = open.find(
        (c) =>
          c.type === type &&
          (reason === undefined || c.reason === reason) &&
          (generation === undefined || c.generation === generation),
      );
      return found && { ...found };
    }
    const question = [type, subjectKind, subject, reason ?? "", generation ?? ""].join("\0");
    if (this.ahead?.noneOpen.has(question)) return undefined;
    let text =
      "SELECT * FROM conditions WHERE type = ? AND subject_kind = ? AND subject = ? AND status = 'open'";
    const params: unknown[] = [type, subjectKind, subject];
    if (reason !== undefined) {
      text += " AND reason = ?";
      params.push(reason);
    }
    if (generation !== undefined) {
      text += " AND generation = ?";
      params.push(generation);
    }
    const row = await this.sql.get(text, params);
    if (!row) this.ahead?.noneOpen.add(question);
    return row ? CONDITIONS.from(row) : undefined;
  }

  async get(id: string): Promise<ConditionRecord | undefined> {
    const row = await this.sql.get("SELECT * FROM conditions WHERE id = ?", [id]);
    return row ? CONDITIONS.from(row) : undefined;
  }

  async openOf(subjectKind: SubjectKind, subject: string): Promise<ConditionRecord[]> {
    const ahead = this.openAhead(subjectKind, subject);
    if (ahead) return ahead.map((c) => ({ ...c }));
    return (
      await this.sql.all(
        "SELECT * FROM conditions WHERE subject_kind = ? AND subject = ? AND status = 'open' ORDER BY opened_at, id",
        [subjectKind, subject],
      )
    ).map((r) => CONDITIONS.from(r));
  }

  async list(filter: ConditionFilter = {}): Promise<ConditionRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    for (const [field, column] of FILTER_COLUMNS)
      if (filter[field] !== undefined) {
        where.push(`${column} = ?`);
        params.push(filter[field]);
      }
    const clause = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    return (await this.sql.all(`SELECT * FROM conditions ${clause} ORDER BY opened_at, id`, params)).map(
      (r) => CONDITIONS.from(r),
    );
  }

  async insert(condition: ConditionRecord): Promise<void> {
    await this.sql.run(INSERT_CONDITION, CONDITIONS.to(condition));
    this.changed(condition);
    this.written(condition.id);
  }

  async save(condition: ConditionRecord): Promise<void> {
    await this.sql.run(UPSERT_CONDITION, CONDITIONS.to(condition));
    this.changed(condition);
    this.written(condition.id);
  }

  /** A condition was written: what was read ahead of its subject's is read again. */
  private changed(condition: ConditionRecord): void {
    if (condition.subjectKind === "instance") this.ahead?.openConditions.delete(condition.subject);
    this.ahead?.noneOpen.clear();
    // A node's silence or transport changes which failures count.
    if (condition.subjectKind === "node") this.ahead?.noneFailed.clear();
  }

  async appendEvent(event: ConditionEvent): Promise<void> {
    await this.sql.run(INSERT_EVENT, HISTORY.to(event));
  }

  async history(conditionId: string): Promise<ConditionEvent[]> {
    return (
      await this.sql.all("SELECT * FROM condition_history WHERE condition_id = ? ORDER BY seq", [conditionId])
    ).map((r) => HISTORY.from(r));
  }

  async openCountsByType(): Promise<Record<string, number>> {
    return countsOf(
      await this.sql.all("SELECT type, count(*) AS n FROM conditions WHERE status = 'open' GROUP BY type"),
      "type",
    );
  }
}
