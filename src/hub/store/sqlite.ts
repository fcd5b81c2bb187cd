/**
 * The Store port on SQLite (better-sqlite3): the embedded default. Statements are prepared once;
 * parsed generation specs are cached (a generation never changes once written); a report rewrites
 * only the observations that changed, so ingesting the same converged state again costs one row.
 */
import type Database from "better-sqlite3";
import { canonicalJson } from "../../model/canonical.js";
import type { EffectiveBudget, FleetSettings } from "../../model/fleet.js";
import type { Report, Rollout } from "../../model/generated.js";
import { instanceKey } from "../../model/render.js";
import type {
  AttemptRecord,
  ConditionEvent,
  ConditionRecord,
  ConditionType,
  DesiredInstance,
  HoldReason,
  IntentRecord,
  IntentStatus,
  NodeRecord,
  Observation,
  OutboxRow,
  RevisionRecord,
  RolloutDecisionRecord,
  SkipReason,
  SubjectKind,
  TaskRecord,
  TaskStatus,
} from "../records.js";
import { type Db, openDatabase } from "./database.js";
import type { ConditionFilter, Store, SyncEventRecord } from "./store.js";

type Row = Record<string, unknown>;

const nul = (value: unknown) => (value === undefined ? null : value);

/** Copies the defined members of `values` onto `target` (SQL NULL becomes an absent member). */
function defined<T extends object>(target: T, values: Record<string, unknown>): T {
  for (const [key, value] of Object.entries(values))
    if (value !== null && value !== undefined) (target as Record<string, unknown>)[key] = value;
  return target;
}

/** How a record field is stored: as is, as JSON text, or as 0/1. */
type Kind = "value" | "json" | "bool";
/** A field, with how it is stored and (when not its snake_case name) its column. */
type Field<T> = (keyof T & string) | [keyof T & string, Kind, string?];

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * Maps records to rows and back, one list of fields per table: SQL NULL is an absent member, JSON
 * columns are parsed, booleans are 0/1. One mapping per record type, no hand-written twins.
 */
class RecordMap<T extends object> {
  private readonly fields: [string, Kind, string][];
  readonly columns: string[];

  constructor(fields: readonly Field<T>[]) {
    this.fields = fields.map((f) =>
      typeof f === "string" ? [f, "value", snake(f)] : [f[0], f[1], f[2] ?? snake(f[0])],
    );
    this.columns = this.fields.map(([, , column]) => column);
  }

  from(row: Row): T {
    const record: Record<string, unknown> = {};
    for (const [field, kind, column] of this.fields) {
      const value = row[column];
      if (kind === "bool") record[field] = value === 1;
      else if (value !== null && value !== undefined)
        record[field] = kind === "json" ? JSON.parse(value as string) : value;
    }
    return record as T;
  }

  /** The row's values in `columns` order (bound by position: cheaper than by name). */
  to(record: T): unknown[] {
    const values: unknown[] = [];
    for (const [field, kind] of this.fields) {
      const value = (record as Record<string, unknown>)[field];
      values.push(
        kind === "bool"
          ? value
            ? 1
            : 0
          : kind === "json" && value !== undefined
            ? JSON.stringify(value)
            : nul(value),
      );
    }
    return values;
  }

  insertSql(table: string): string {
    return `INSERT INTO ${table} (${this.columns.join(", ")}) VALUES (${this.columns.map(() => "?").join(", ")})`;
  }
}

const INTENTS = new RecordMap<IntentRecord>([
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
  "settledBy",
  "settleAfter",
  "supersededBy",
  ["lateResult", "json"],
]);

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

const NODES = new RecordMap<NodeRecord>([
  "name",
  "transport",
  ["spec", "json"],
  "revision",
  "removedAt",
  ["draining", "bool"],
  "drainReason",
  "drainedAt",
  "drainedBy",
  "lastHeartbeatAt",
  "lastReportAt",
]);

const REVISIONS = new RecordMap<RevisionRecord>([
  "sha",
  "seq",
  "branch",
  "authorName",
  "message",
  "committedAt",
  "syncedAt",
  "outcome",
  ["diagnostics", "json"],
  "supersededBy",
  ["changedAssignments", "json"],
]);

const OBSERVATIONS = new RecordMap<Observation>([
  "instanceKey",
  "node",
  "assignment",
  "generation",
  "hash",
  "state",
  "version",
  ["converged", "bool"],
  "takenAt",
  ["report", "json", "body"],
]);

const intentFrom = (row: Row) => INTENTS.from(row);
const attemptFrom = (row: Row) => ATTEMPTS.from(row);
const conditionFrom = (row: Row) => CONDITIONS.from(row);
const taskFrom = (row: Row) => TASKS.from(row);
const nodeFrom = (row: Row) => NODES.from(row);
const revisionFrom = (row: Row) => REVISIONS.from(row);
const observationFrom = (row: Row) => OBSERVATIONS.from(row);

function decisionFrom(row: Row): RolloutDecisionRecord {
  return defined(
    {
      seq: row.seq as number,
      assignment: row.assignment as string,
      revision: row.revision as string,
      decision: row.decision as RolloutDecisionRecord["decision"],
      by: row.decided_by as string,
      reason: row.reason as string,
      at: row.decided_at as string,
      accepted: JSON.parse(row.accepted as string) as string[],
    },
    { taskId: row.task_id },
  ) as RolloutDecisionRecord;
}

/**
 * Why the rollouts go on around node `n` (SkipReason), or NULL when they wait for it: drained, a
 * transport this hub does not run, silent. Each is a durable fact the hub records (the drain, and
 * the conditions it keeps open by observation), so the CLI and the hub count the same way; the
 * conditions are found through the partial index of open conditions by subject.
 */
const SKIP_REASON = `(CASE WHEN n.draining = 1 THEN 'drained'
  WHEN EXISTS (SELECT 1 FROM conditions c WHERE c.subject_kind = 'node' AND c.subject = n.name AND c.status = 'open'
                 AND c.type = 'TransportDegraded' AND c.reason = 'TransportNotEnabled') THEN 'transport-not-run'
  WHEN EXISTS (SELECT 1 FROM conditions c WHERE c.subject_kind = 'node' AND c.subject = n.name AND c.status = 'open'
                 AND c.type = 'NodeSilent') THEN 'silent' END)`;

/** Every node `SKIP_REASON` names, from the indexes of drained nodes and of open conditions. */
const SKIPPED_NODES = `SELECT name AS node FROM nodes WHERE draining = 1
  UNION SELECT subject FROM conditions WHERE status = 'open' AND type = 'NodeSilent' AND subject_kind = 'node'
  UNION SELECT subject FROM conditions WHERE status = 'open' AND type = 'TransportDegraded'
          AND reason = 'TransportNotEnabled' AND subject_kind = 'node'`;

/** Intent statuses that hold one of a rollout's in-flight slots. */
const IN_FLIGHT = "'dispatched', 'verifying', 'ambiguous', 'backoff'";

/** The hold reasons that are the rollout's (a freed slot or a resume may release them). */
const ROLLOUT_HOLDS = "'canary', 'batch', 'paused', 'paused-by-operator'";

function upsertSql(table: string, columns: string[], key: string[]): string {
  const names = columns.join(", ");
  const values = columns.map(() => "?").join(", ");
  const updates = columns
    .filter((c) => !key.includes(c))
    .map((c) => `${c} = excluded.${c}`)
    .join(", ");
  return `INSERT INTO ${table} (${names}) VALUES (${values}) ON CONFLICT (${key.join(", ")}) DO UPDATE SET ${updates}`;
}

const UPSERT_INTENT = upsertSql("intents", INTENTS.columns, ["instance_key", "generation"]);
const UPSERT_ATTEMPT = upsertSql("attempts", ATTEMPTS.columns, ["id"]);
const UPSERT_CONDITION = upsertSql("conditions", CONDITIONS.columns, ["id"]);
const UPSERT_TASK = upsertSql("tasks", TASKS.columns, ["id"]);
const INSERT_ATTEMPT = ATTEMPTS.insertSql("attempts");
const INSERT_CONDITION = CONDITIONS.insertSql("conditions");
const INSERT_TASK = TASKS.insertSql("tasks");

/** The Store port over one SQLite database file (or an already open database). */
export class SqliteStore implements Store {
  readonly db: Db;
  private readonly specs = new Map<string, Pick<DesiredInstance, "spec" | "rollout" | "budget">>();
  /** Last stored body of each observation, to skip rewriting what a report repeats. */
  private readonly observed = new Map<string, string>();
  /** The instance keys each node has an observation of (read once per node, then kept). */
  private readonly observedKeys = new Map<string, Set<string>>();
  private readonly parsedObservations = new Map<
    string,
    { body: string; takenAt: string; observation: Observation }
  >();
  private readonly statements = new Map<string, Database.Statement<unknown[]>>();
  private readonly conditionListeners = new Set<(id: string) => void>();
  private readonly inTransaction: (fn: () => unknown) => unknown;

  constructor(database: Db | string) {
    this.db = typeof database === "string" ? openDatabase(database) : database;
    // One wrapper for every transaction: it begins one, or a savepoint inside the current one.
    this.inTransaction = this.db.transaction((fn: () => unknown) => fn());
  }

  private sql(text: string) {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare<unknown[]>(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  private get(text: string, ...params: unknown[]): Row | undefined {
    return this.sql(text).get(...params) as Row | undefined;
  }

  private all(text: string, ...params: unknown[]): Row[] {
    return this.sql(text).all(...params) as Row[];
  }

  private run(text: string, ...params: unknown[]) {
    return this.sql(text).run(...params);
  }

  transaction<T>(fn: () => T): T {
    try {
      // Nested calls become savepoints: a failing inner step rolls back alone.
      return this.inTransaction(fn) as T;
    } catch (error) {
      // Rolled back: the cache of stored observations may now be ahead of the database.
      this.observed.clear();
      this.observedKeys.clear();
      throw error;
    }
  }

  meta(key: string): string | undefined {
    return this.get("SELECT value FROM hub_meta WHERE key = ?", key)?.value as string | undefined;
  }

  setMeta(key: string, value: string): void {
    this.run(
      "INSERT INTO hub_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      key,
      value,
    );
  }

  private desiredFrom(row: Row | undefined): DesiredInstance | undefined {
    if (!row) return undefined;
    const key = row.instance_key as string;
    const generation = row.generation as number;
    const cacheKey = `${key}#${generation}\0${row.rollout}\0${row.budget}`;
    let parsed = this.specs.get(cacheKey);
    if (!parsed) {
      parsed = {
        spec: JSON.parse(row.spec as string),
        rollout: JSON.parse(row.rollout as string),
        budget: JSON.parse(row.budget as string),
      };
      this.specs.set(cacheKey, parsed);
    }
    return defined(
      {
        key,
        assignment: row.assignment as string,
        node: row.node as string,
        generation,
        hash: row.hash as string,
        revision: row.revision as string,
        ...parsed,
      } as DesiredInstance,
      { retiredAt: row.retired_at },
    );
  }

  desired(key: string): DesiredInstance | undefined {
    return this.desiredFrom(
      this.get(
        `SELECT i.instance_key, i.assignment, i.node, i.generation, i.hash, g.revision, i.retired_at,
                g.spec, coalesce(p.rollout, g.rollout) AS rollout, coalesce(p.budget, g.budget) AS budget
           FROM instances i JOIN generations g ON g.instance_key = i.instance_key AND g.generation = i.generation
           LEFT JOIN assignment_policies p ON p.assignment = i.assignment
          WHERE i.instance_key = ?`,
        key,
      ),
    );
  }

  desiredAt(key: string, generation: number): DesiredInstance | undefined {
    return this.desiredFrom(
      this.get(
        `SELECT instance_key, assignment, node, generation, hash, revision, NULL AS retired_at, spec, rollout, budget
           FROM generations WHERE instance_key = ? AND generation = ?`,
        key,
        generation,
      ),
    );
  }

  instanceList() {
    return this.all(
      "SELECT instance_key, assignment, node, generation, revision, retired_at FROM instances ORDER BY instance_key",
    ).map((r) =>
      defined(
        {
          key: r.instance_key as string,
          assignment: r.assignment as string,
          node: r.node as string,
          generation: r.generation as number,
          revision: r.revision as string,
        } as {
          key: string;
          assignment: string;
          node: string;
          generation: number;
          revision: string;
          retiredAt?: string;
        },
        { retiredAt: r.retired_at },
      ),
    );
  }

  activeInstanceKeysOfNode(node: string): string[] {
    return this.all(
      "SELECT instance_key FROM instances WHERE node = ? AND retired_at IS NULL ORDER BY instance_key",
      node,
    ).map((r) => r.instance_key as string);
  }

  activeInstanceKeysOfAssignment(assignment: string): string[] {
    return this.all(
      "SELECT instance_key FROM instances WHERE assignment = ? AND retired_at IS NULL ORDER BY instance_key",
      assignment,
    ).map((r) => r.instance_key as string);
  }

  instanceKeysChangedBy(sha: string): string[] {
    return this.all(
      "SELECT instance_key FROM instances WHERE revision = ? UNION SELECT instance_key FROM instances WHERE retired_by = ?",
      sha,
      sha,
    ).map((r) => r.instance_key as string);
  }

  generationsOfRevision(sha: string) {
    return this.all(
      "SELECT instance_key, generation, assignment, node FROM generations WHERE revision = ? ORDER BY assignment, node",
      sha,
    ).map((r) => ({
      instanceKey: r.instance_key as string,
      generation: r.generation as number,
      assignment: r.assignment as string,
      node: r.node as string,
    }));
  }

  revisionsAfter(seq: number): RevisionRecord[] {
    return this.all("SELECT * FROM revisions WHERE seq > ? ORDER BY seq", seq).map(revisionFrom);
  }

  openSyncEvents(): SyncEventRecord[] {
    const exists = this.get(
      "SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = 'sync_events'",
    );
    if (!exists) return [];
    return this.all(
      "SELECT branch, kind, head, last_good, message, opened_at FROM sync_events WHERE resolved_at IS NULL ORDER BY id",
    ).map((r) =>
      defined(
        {
          branch: r.branch as string,
          kind: r.kind as string,
          message: r.message as string,
          openedAt: r.opened_at as string,
        } as SyncEventRecord,
        { head: r.head, lastGood: r.last_good },
      ),
    );
  }

  revision(sha: string): RevisionRecord | undefined {
    const row = this.get("SELECT * FROM revisions WHERE sha = ?", sha);
    return row ? revisionFrom(row) : undefined;
  }

  latestRevision(): RevisionRecord | undefined {
    const row = this.get("SELECT * FROM revisions ORDER BY seq DESC LIMIT 1");
    return row ? revisionFrom(row) : undefined;
  }

  nextAppliedRevision(seq: number): RevisionRecord | undefined {
    const row = this.get(
      "SELECT * FROM revisions WHERE seq > ? AND outcome = 'applied' ORDER BY seq LIMIT 1",
      seq,
    );
    return row ? revisionFrom(row) : undefined;
  }

  previousAppliedRevision(seq: number): RevisionRecord | undefined {
    const row = this.get(
      "SELECT * FROM revisions WHERE seq < ? AND outcome = 'applied' ORDER BY seq DESC LIMIT 1",
      seq,
    );
    return row ? revisionFrom(row) : undefined;
  }

  revisionByPrefix(prefix: string): RevisionRecord | undefined {
    const rows = this.all("SELECT * FROM revisions WHERE sha LIKE ? || '%' LIMIT 2", prefix.toLowerCase());
    return rows.length === 1 ? revisionFrom(rows[0]!) : undefined;
  }

  recoveryKeys(): string[] {
    return this.all(
      `SELECT i.instance_key FROM instances i
         LEFT JOIN intents t ON t.instance_key = i.instance_key AND t.generation = i.generation
        WHERE (i.retired_at IS NULL AND (t.status IS NULL OR t.status != 'converged'))
           OR (i.retired_at IS NOT NULL AND t.status IS NOT NULL AND t.status NOT IN ('retired', 'superseded'))
       UNION
       SELECT instance_key FROM intents WHERE status NOT IN ('superseded', 'retired') AND status != 'converged'`,
    ).map((r) => r.instance_key as string);
  }

  rolloutNodes(assignment: string, revision: string, limit = -1): string[] {
    return this.all(
      "SELECT node FROM instances WHERE revision = ? AND assignment = ? AND retired_at IS NULL ORDER BY node LIMIT ?",
      revision,
      assignment,
      limit,
    ).map((r) => r.node as string);
  }

  rolloutSize(assignment: string, revision: string): number {
    return this.get(
      "SELECT count(*) AS n FROM instances WHERE revision = ? AND assignment = ? AND retired_at IS NULL",
      revision,
      assignment,
    )!.n as number;
  }

  node(name: string): NodeRecord | undefined {
    const row = this.get("SELECT * FROM nodes WHERE name = ?", name);
    return row ? nodeFrom(row) : undefined;
  }

  nodes(): NodeRecord[] {
    return this.all("SELECT * FROM nodes ORDER BY name").map(nodeFrom);
  }

  upsertNode(node: Pick<NodeRecord, "name" | "transport" | "spec" | "revision">): void {
    this.run(
      `INSERT INTO nodes (name, transport, spec, revision) VALUES (?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET transport = excluded.transport, spec = excluded.spec,
         revision = excluded.revision, removed_at = NULL`,
      node.name,
      node.transport,
      JSON.stringify(node.spec),
      nul(node.revision),
    );
  }

  markNodesRemoved(declared: readonly string[], at: string): void {
    const keep = new Set(declared);
    for (const row of this.all("SELECT name FROM nodes WHERE removed_at IS NULL"))
      if (!keep.has(row.name as string))
        this.run("UPDATE nodes SET removed_at = ? WHERE name = ?", at, row.name);
  }

  setDraining(name: string, draining: boolean, detail: { by: string; reason?: string; at: string }): boolean {
    const result = this.run(
      "UPDATE nodes SET draining = ?, drain_reason = ?, drained_at = ?, drained_by = ? WHERE name = ?",
      draining ? 1 : 0,
      draining ? nul(detail.reason) : null,
      draining ? detail.at : null,
      draining ? detail.by : null,
      name,
    );
    return result.changes > 0;
  }

  touchNode(name: string, at: { heartbeatAt?: string; reportAt?: string }): void {
    if (at.heartbeatAt)
      this.run(
        "UPDATE nodes SET last_heartbeat_at = ? WHERE name = ? AND (last_heartbeat_at IS NULL OR last_heartbeat_at < ?)",
        at.heartbeatAt,
        name,
        at.heartbeatAt,
      );
    if (at.reportAt) this.run("UPDATE nodes SET last_report_at = ? WHERE name = ?", at.reportAt, name);
  }

  savePolicy(assignment: string, revision: string, rollout: Rollout, budget: EffectiveBudget): boolean {
    const rolloutJson = canonicalJson(rollout);
    const budgetJson = canonicalJson(budget);
    const existing = this.get(
      "SELECT rollout, budget FROM assignment_policies WHERE assignment = ?",
      assignment,
    );
    if (existing && existing.rollout === rolloutJson && existing.budget === budgetJson) return false;
    this.run(
      `INSERT INTO assignment_policies (assignment, revision, rollout, budget) VALUES (?, ?, ?, ?)
       ON CONFLICT (assignment) DO UPDATE SET revision = excluded.revision, rollout = excluded.rollout, budget = excluded.budget`,
      assignment,
      revision,
      rolloutJson,
      budgetJson,
    );
    return true;
  }

  fleetSettings(): FleetSettings | undefined {
    const row = this.get("SELECT settings FROM fleet_settings WHERE id = 1");
    return row ? (JSON.parse(row.settings as string) as FleetSettings) : undefined;
  }

  saveFleetSettings(revision: string, settings: FleetSettings): void {
    this.run(
      `INSERT INTO fleet_settings (id, revision, settings) VALUES (1, ?, ?)
       ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, settings = excluded.settings`,
      revision,
      JSON.stringify(settings),
    );
  }

  intent(key: string, generation: number): IntentRecord | undefined {
    const row = this.get("SELECT * FROM intents WHERE instance_key = ? AND generation = ?", key, generation);
    return row ? intentFrom(row) : undefined;
  }

  intentsOf(key: string): IntentRecord[] {
    return this.all("SELECT * FROM intents WHERE instance_key = ? ORDER BY generation", key).map(intentFrom);
  }

  intents(filter: { status?: IntentStatus; node?: string; assignment?: string } = {}): IntentRecord[] {
    const where: string[] = [];
    const params: unknown[] = [];
    for (const column of ["status", "node", "assignment"] as const)
      if (filter[column] !== undefined) {
        where.push(`${column} = ?`);
        params.push(filter[column]);
      }
    const clause = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    return this.all(`SELECT * FROM intents ${clause} ORDER BY instance_key, generation`, ...params).map(
      intentFrom,
    );
  }

  saveIntent(intent: IntentRecord): void {
    this.run(UPSERT_INTENT, ...INTENTS.to(intent));
  }

  olderLiveIntents(key: string, generation: number): IntentRecord[] {
    return this.all(
      "SELECT * FROM intents WHERE instance_key = ? AND generation < ? AND status NOT IN ('superseded', 'retired')",
      key,
      generation,
    ).map(intentFrom);
  }

  countInFlight(assignment: string, revision: string): number {
    // Every in-flight row is counted (index only), then those on skipped nodes are taken away, found
    // from the few skipped nodes: a gate with a large maxInFlight must not look up each row's node.
    const all = this.get(
      `SELECT count(*) AS n FROM intents WHERE assignment = ? AND revision = ? AND status IN (${IN_FLIGHT})`,
      assignment,
      revision,
    )!.n as number;
    if (all === 0) return 0;
    // CROSS JOIN keeps the skipped nodes the outer loop: one key lookup each.
    const skipped = this.get(
      `SELECT count(*) AS n FROM (${SKIPPED_NODES}) s CROSS JOIN intents i
        WHERE i.instance_key = ? || '@' || s.node AND i.revision = ? AND i.status IN (${IN_FLIGHT})`,
      assignment,
      revision,
    )!.n as number;
    return all - skipped;
  }

  countFailed(assignment: string, revision: string): number {
    // Failures are few: each row's node and acceptance is looked up.
    return this.get(
      `SELECT count(*) AS n FROM intents i LEFT JOIN nodes n ON n.name = i.node
        WHERE i.assignment = ? AND i.revision = ? AND i.status IN ('blocked', 'stuck') AND ${SKIP_REASON} IS NULL
          AND NOT EXISTS (SELECT 1 FROM rollout_accepted_failures a
                           WHERE a.assignment = i.assignment AND a.revision = i.revision AND a.instance_key = i.instance_key)`,
      assignment,
      revision,
    )!.n as number;
  }

  countStarted(assignment: string, revision: string): number {
    return this.get(
      `SELECT count(*) AS n FROM intents WHERE assignment = ? AND revision = ? AND last_attempt_id IS NOT NULL
         AND status NOT IN ('superseded', 'retired')`,
      assignment,
      revision,
    )!.n as number;
  }

  rolloutFailures(assignment: string, revision: string, limit: number): IntentRecord[] {
    return this.all(
      `SELECT i.* FROM intents i LEFT JOIN nodes n ON n.name = i.node
        WHERE i.assignment = ? AND i.revision = ? AND i.status IN ('blocked', 'stuck') AND ${SKIP_REASON} IS NULL
          AND NOT EXISTS (SELECT 1 FROM rollout_accepted_failures a
                           WHERE a.assignment = i.assignment AND a.revision = i.revision AND a.instance_key = i.instance_key)
        ORDER BY i.node LIMIT ?`,
      assignment,
      revision,
      limit,
    ).map(intentFrom);
  }

  rolloutSkipped(
    assignment: string,
    revision: string,
    limit: number,
  ): { instanceKey: string; node: string; status: IntentStatus; skip: SkipReason }[] {
    return this.all(
      `SELECT * FROM (
         SELECT i.instance_key, i.node, i.status, ${SKIP_REASON} AS skip FROM intents i JOIN nodes n ON n.name = i.node
          WHERE i.assignment = ? AND i.revision = ? AND i.status NOT IN ('converged', 'superseded', 'retired'))
        WHERE skip IS NOT NULL ORDER BY node LIMIT ?`,
      assignment,
      revision,
      limit,
    ).map((r) => ({
      instanceKey: r.instance_key as string,
      node: r.node as string,
      status: r.status as IntentStatus,
      skip: r.skip as SkipReason,
    }));
  }

  nodeSkip(name: string): SkipReason | undefined {
    const row = this.get(`SELECT ${SKIP_REASON} AS skip FROM nodes n WHERE n.name = ?`, name);
    return (row?.skip as SkipReason | null) ?? undefined;
  }

  rolloutsOfNode(node: string): { assignment: string; revision: string }[] {
    return this.all(
      `SELECT DISTINCT assignment, revision FROM intents
        WHERE node = ? AND status NOT IN ('converged', 'superseded', 'retired') ORDER BY assignment, revision`,
      node,
    ).map((r) => ({ assignment: r.assignment as string, revision: r.revision as string }));
  }

  heldIntents(assignment: string, revision: string, limit: number): string[] {
    return this.all(
      `SELECT instance_key FROM intents WHERE assignment = ? AND revision = ? AND status = 'held'
         AND hold_reason IN (${ROLLOUT_HOLDS}) ORDER BY node LIMIT ?`,
      assignment,
      revision,
      limit,
    ).map((r) => r.instance_key as string);
  }

  anyHeld(assignment: string, revision: string, reasons?: readonly HoldReason[]): boolean {
    const wanted = reasons ? reasons.map(() => "?").join(", ") : ROLLOUT_HOLDS;
    return (
      this.get(
        `SELECT 1 AS held FROM intents WHERE assignment = ? AND revision = ? AND status = 'held'
           AND hold_reason IN (${wanted}) LIMIT 1`,
        assignment,
        revision,
        ...(reasons ?? []),
      ) !== undefined
    );
  }

  rolloutDecision(assignment: string, revision: string): RolloutDecisionRecord | undefined {
    const row = this.get(
      "SELECT * FROM rollout_decisions WHERE assignment = ? AND revision = ? ORDER BY seq DESC LIMIT 1",
      assignment,
      revision,
    );
    return row ? decisionFrom(row) : undefined;
  }

  recordRolloutDecision(decision: Omit<RolloutDecisionRecord, "seq" | "accepted">): RolloutDecisionRecord {
    return this.transaction(() => {
      const { lastInsertRowid } = this.run(
        `INSERT INTO rollout_decisions (assignment, revision, decision, decided_by, reason, decided_at, task_id)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
        decision.assignment,
        decision.revision,
        decision.decision,
        decision.by,
        decision.reason,
        decision.at,
        nul(decision.taskId),
      );
      const seq = Number(lastInsertRowid);
      if (decision.decision === "resume") {
        this.run(
          `INSERT OR IGNORE INTO rollout_accepted_failures (assignment, revision, instance_key, decision_seq)
           SELECT assignment, revision, instance_key, ? FROM intents
            WHERE assignment = ? AND revision = ? AND status IN ('blocked', 'stuck')`,
          seq,
          decision.assignment,
          decision.revision,
        );
        this.run(
          `UPDATE rollout_decisions SET accepted = (SELECT json_group_array(instance_key) FROM
             (SELECT instance_key FROM rollout_accepted_failures WHERE assignment = ? AND revision = ?
               ORDER BY instance_key))
           WHERE seq = ?`,
          decision.assignment,
          decision.revision,
          seq,
        );
      }
      return decisionFrom(this.get("SELECT * FROM rollout_decisions WHERE seq = ?", seq)!);
    });
  }

  intentKeysOfNode(node: string, statuses: readonly IntentStatus[]): string[] {
    const marks = statuses.map(() => "?").join(", ");
    return this.all(
      `SELECT instance_key FROM intents WHERE node = ? AND status IN (${marks}) ORDER BY instance_key`,
      node,
      ...statuses,
    ).map((r) => r.instance_key as string);
  }

  intentCountsByStatus(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const row of this.all("SELECT status, count(*) AS n FROM intents GROUP BY status"))
      counts[row.status as string] = row.n as number;
    return counts;
  }

  attempt(id: string): AttemptRecord | undefined {
    const row = this.get("SELECT * FROM attempts WHERE id = ?", id);
    return row ? attemptFrom(row) : undefined;
  }

  attemptsOf(key: string, generation?: number): AttemptRecord[] {
    const rows =
      generation === undefined
        ? this.all("SELECT * FROM attempts WHERE instance_key = ? ORDER BY created_at, rowid", key)
        : this.all(
            "SELECT * FROM attempts WHERE instance_key = ? AND generation = ? ORDER BY created_at, rowid",
            key,
            generation,
          );
    return rows.map(attemptFrom);
  }

  insertAttempt(attempt: AttemptRecord, bundle: string): void {
    this.run(INSERT_ATTEMPT, ...ATTEMPTS.to(attempt));
    this.run(
      "INSERT INTO outbox (attempt_id, node, bundle, created_at) VALUES (?, ?, ?, ?)",
      attempt.id,
      attempt.node,
      bundle,
      attempt.createdAt,
    );
  }

  saveAttempt(attempt: AttemptRecord): void {
    this.run(UPSERT_ATTEMPT, ...ATTEMPTS.to(attempt));
  }

  saveDispatched(attempt: AttemptRecord & { leaseExpiresAt: string }): void {
    this.saveAttempt(attempt);
    this.run(
      `UPDATE intents SET deadline_at = ?, updated_at = ?
        WHERE instance_key = ? AND generation = ? AND last_attempt_id = ? AND status = 'dispatched'`,
      attempt.leaseExpiresAt,
      attempt.dispatchedAt ?? attempt.leaseExpiresAt,
      attempt.instanceKey,
      attempt.generation,
      attempt.id,
    );
  }

  outbox(): OutboxRow[] {
    return this.all("SELECT attempt_id, node, bundle, created_at FROM outbox ORDER BY attempt_id").map(
      (r) => ({
        attemptId: r.attempt_id as string,
        node: r.node as string,
        bundle: r.bundle as string,
        createdAt: r.created_at as string,
      }),
    );
  }

  outboxRow(attemptId: string): OutboxRow | undefined {
    const r = this.get(
      "SELECT attempt_id, node, bundle, created_at FROM outbox WHERE attempt_id = ?",
      attemptId,
    );
    if (!r) return undefined;
    return {
      attemptId: r.attempt_id as string,
      node: r.node as string,
      bundle: r.bundle as string,
      createdAt: r.created_at as string,
    };
  }

  deleteOutbox(attemptId: string): void {
    this.run("DELETE FROM outbox WHERE attempt_id = ?", attemptId);
  }

  openAttemptsOfNode(node: string): AttemptRecord[] {
    return this.all(
      "SELECT * FROM attempts WHERE node = ? AND status IN ('dispatched', 'ambiguous') ORDER BY id",
      node,
    ).map(attemptFrom);
  }

  attemptCountsByStatus(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const row of this.all("SELECT status, count(*) AS n FROM attempts GROUP BY status"))
      counts[row.status as string] = row.n as number;
    return counts;
  }

  reportMeta(node: string): { takenAt: string; seq?: number } | undefined {
    const row = this.get("SELECT taken_at, seq FROM reports WHERE node = ?", node);
    if (!row) return undefined;
    return defined({ takenAt: row.taken_at as string }, { seq: row.seq });
  }

  saveReport(report: Report, receivedAt: string): string[] | undefined {
    const previous = this.reportMeta(report.node);
    // Reports can arrive out of order (a supervision report built before an apply, delivered after
    // it): an older one is not the latest observation. Same time: the agent's sequence decides.
    if (previous && previous.takenAt > report.takenAt) return undefined;
    if (
      previous?.takenAt === report.takenAt &&
      previous.seq !== undefined &&
      report.seq !== undefined &&
      report.seq <= previous.seq
    )
      return undefined;
    this.run(
      `INSERT INTO reports (node, taken_at, seq, received_at, agent) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (node) DO UPDATE SET taken_at = excluded.taken_at, seq = excluded.seq,
         received_at = excluded.received_at, agent = excluded.agent`,
      report.node,
      report.takenAt,
      nul(report.seq),
      receivedAt,
      JSON.stringify(report.agent),
    );
    const changed: string[] = [];
    const keys = this.observationKeysOf(report.node);
    const reported = new Set<string>();
    for (const instance of report.instances) {
      const key = instanceKey(instance.assignment, report.node);
      reported.add(key);
      keys.add(key);
      const body = JSON.stringify(instance);
      if (this.observed.get(key) === body) continue;
      changed.push(key);
      this.run(
        `INSERT INTO observations (instance_key, node, assignment, generation, hash, state, version, converged, taken_at, body)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (instance_key) DO UPDATE SET generation = excluded.generation, hash = excluded.hash,
           state = excluded.state, version = excluded.version, converged = excluded.converged,
           taken_at = excluded.taken_at, body = excluded.body`,
        key,
        report.node,
        instance.assignment,
        instance.generation,
        nul(instance.hash),
        instance.state,
        nul(instance.version),
        instance.converged ? 1 : 0,
        report.takenAt,
        body,
      );
      this.observed.set(key, body);
    }
    // A full report is all the node holds: an instance it does not mention is not there (another
    // agent's state, a wiped state directory), whatever an earlier report said.
    for (const key of keys) {
      if (reported.has(key)) continue;
      this.run("DELETE FROM observations WHERE instance_key = ?", key);
      keys.delete(key);
      this.observed.delete(key);
      this.parsedObservations.delete(key);
      changed.push(key);
    }
    return changed;
  }

  /** The keys of `node`'s stored observations (kept up to date by `saveReport`). */
  private observationKeysOf(node: string): Set<string> {
    let keys = this.observedKeys.get(node);
    if (!keys) {
      keys = new Set(
        this.all("SELECT instance_key FROM observations WHERE node = ?", node).map(
          (r) => r.instance_key as string,
        ),
      );
      this.observedKeys.set(node, keys);
    }
    return keys;
  }

  observation(key: string): Observation | undefined {
    const row = this.get("SELECT * FROM observations WHERE instance_key = ?", key);
    if (!row) return undefined;
    // Parsing the body is most of the cost; an unchanged body keeps its parsed form.
    const cached = this.parsedObservations.get(key);
    if (cached && cached.body === row.body && cached.takenAt === row.taken_at) return cached.observation;
    const observation = observationFrom(row);
    this.parsedObservations.set(key, {
      body: row.body as string,
      takenAt: row.taken_at as string,
      observation,
    });
    return observation;
  }

  openCondition(
    type: ConditionType,
    subjectKind: SubjectKind,
    subject: string,
    reason?: string,
    generation?: number,
  ): ConditionRecord | undefined {
    let sql =
      "SELECT * FROM conditions WHERE type = ? AND subject_kind = ? AND subject = ? AND status = 'open'";
    const params: unknown[] = [type, subjectKind, subject];
    if (reason !== undefined) {
      sql += " AND reason = ?";
      params.push(reason);
    }
    if (generation !== undefined) {
      sql += " AND generation = ?";
      params.push(generation);
    }
    const row = this.get(sql, ...params);
    return row ? conditionFrom(row) : undefined;
  }

  openConditionsOf(subjectKind: SubjectKind, subject: string): ConditionRecord[] {
    return this.all(
      "SELECT * FROM conditions WHERE subject_kind = ? AND subject = ? AND status = 'open' ORDER BY opened_at",
      subjectKind,
      subject,
    ).map(conditionFrom);
  }

  condition(id: string): ConditionRecord | undefined {
    const row = this.get("SELECT * FROM conditions WHERE id = ?", id);
    return row ? conditionFrom(row) : undefined;
  }

  conditions(filter: ConditionFilter = {}): ConditionRecord[] {
    const where: string[] = [];
    const params: unknown[] = [];
    const columns: [keyof ConditionFilter, string][] = [
      ["status", "status"],
      ["type", "type"],
      ["subjectKind", "subject_kind"],
      ["subject", "subject"],
      ["revision", "revision"],
      ["assignment", "assignment"],
      ["node", "node"],
    ];
    for (const [field, column] of columns)
      if (filter[field] !== undefined) {
        where.push(`${column} = ?`);
        params.push(filter[field]);
      }
    const clause = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    return this.all(`SELECT * FROM conditions ${clause} ORDER BY opened_at, id`, ...params).map(
      conditionFrom,
    );
  }

  insertCondition(condition: ConditionRecord): void {
    this.run(INSERT_CONDITION, ...CONDITIONS.to(condition));
    this.conditionWritten(condition.id);
  }

  saveCondition(condition: ConditionRecord): void {
    this.run(UPSERT_CONDITION, ...CONDITIONS.to(condition));
    this.conditionWritten(condition.id);
  }

  onConditionWrite(listener: (id: string) => void): () => void {
    this.conditionListeners.add(listener);
    return () => this.conditionListeners.delete(listener);
  }

  private conditionWritten(id: string): void {
    for (const listener of this.conditionListeners) listener(id);
  }

  appendConditionEvent(event: ConditionEvent): void {
    this.run(
      "INSERT INTO condition_history (condition_id, at, event, reason, message, attempt_id) VALUES (?, ?, ?, ?, ?, ?)",
      event.conditionId,
      event.at,
      event.event,
      event.reason,
      event.message,
      nul(event.attemptId),
    );
  }

  conditionHistory(conditionId: string): ConditionEvent[] {
    return this.all("SELECT * FROM condition_history WHERE condition_id = ? ORDER BY seq", conditionId).map(
      (r) =>
        defined(
          {
            conditionId: r.condition_id as string,
            at: r.at as string,
            event: r.event as ConditionEvent["event"],
            reason: r.reason as string,
            message: r.message as string,
          },
          { attemptId: r.attempt_id },
        ) as ConditionEvent,
    );
  }

  openConditionCountsByType(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const row of this.all(
      "SELECT type, count(*) AS n FROM conditions WHERE status = 'open' GROUP BY type",
    ))
      counts[row.type as string] = row.n as number;
    return counts;
  }

  task(id: string): TaskRecord | undefined {
    const row = this.get("SELECT * FROM tasks WHERE id = ?", id);
    return row ? taskFrom(row) : undefined;
  }

  taskOfCondition(conditionId: string): TaskRecord | undefined {
    const row = this.get("SELECT * FROM tasks WHERE condition_id = ?", conditionId);
    return row ? taskFrom(row) : undefined;
  }

  tasks(filter: { status?: TaskStatus } = {}): TaskRecord[] {
    const rows = filter.status
      ? this.all("SELECT * FROM tasks WHERE status = ? ORDER BY created_at, id", filter.status)
      : this.all("SELECT * FROM tasks ORDER BY created_at, id");
    return rows.map(taskFrom);
  }

  insertTask(task: TaskRecord): void {
    this.run(INSERT_TASK, ...TASKS.to(task));
  }

  unpublishedTasks(): TaskRecord[] {
    return this.all(
      "SELECT * FROM tasks WHERE published_at IS NULL AND status = 'open' ORDER BY created_at, id",
    ).map(taskFrom);
  }

  markTaskPublished(id: string, at: string): void {
    this.run("UPDATE tasks SET published_at = ? WHERE id = ? AND published_at IS NULL", at, id);
  }

  saveTask(task: TaskRecord): void {
    this.run(UPSERT_TASK, ...TASKS.to(task));
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
