/** The tasks port on SQL (table `tasks`): one task per condition that needs judgement. */
import type { TaskRecord, TaskStatus } from "../../records.js";
import type { Tasks } from "../store.js";
import { RecordMap, type Sql } from "./sql.js";

const TASKS = new RecordMap<TaskRecord>([
  "id",
  "conditionId",
  "type",
  "subjectKind",
  "subject",
  "status",
  "createdAt",
  "claimedBy",
  "claimedAt",
  "resolvedBy",
  "resolvedAt",
  "action",
  "closedReason",
  "publishedAt",
  "outcome",
]);

const INSERT_TASK = TASKS.insertSql("tasks");
const UPSERT_TASK = TASKS.upsertSql("tasks", ["id"]);

export class TasksSql implements Tasks {
  constructor(private readonly sql: Sql) {}

  async get(id: string): Promise<TaskRecord | undefined> {
    const row = await this.sql.get("SELECT * FROM tasks WHERE id = ?", [id]);
    return row ? TASKS.from(row) : undefined;
  }

  async ofCondition(conditionId: string): Promise<TaskRecord | undefined> {
    const row = await this.sql.get("SELECT * FROM tasks WHERE condition_id = ?", [conditionId]);
    return row ? TASKS.from(row) : undefined;
  }

  async list(filter: { status?: TaskStatus } = {}): Promise<TaskRecord[]> {
    const rows = filter.status
      ? await this.sql.all("SELECT * FROM tasks WHERE status = ? ORDER BY created_at, id", [filter.status])
      : await this.sql.all("SELECT * FROM tasks ORDER BY created_at, id");
    return rows.map((r) => TASKS.from(r));
  }

  async unpublished(): Promise<TaskRecord[]> {
    return (
      await this.sql.all(
        "SELECT * FROM tasks WHERE published_at IS NULL AND status = 'open' ORDER BY created_at, id",
      )
    ).map((r) => TASKS.from(r));
  }

  async insert(task: TaskRecord): Promise<void> {
    await this.sql.run(INSERT_TASK, TASKS.to(task));
  }

  async save(task: TaskRecord): Promise<void> {
    await this.sql.run(UPSERT_TASK, TASKS.to(task));
  }

  async markPublished(id: string, at: string): Promise<void> {
    await this.sql.run("UPDATE tasks SET published_at = ? WHERE id = ? AND published_at IS NULL", [at, id]);
  }
}
