/**
 * The nodes port on SQL (table `nodes`): each node as last declared, its drain state, and when it was
 * last heard. Why the rollouts go on around a node (its SkipReason) is read from the facts the hub
 * records: the drain, and the conditions it keeps open by observation.
 */
import type { NodeRecord, SkipReason } from "../../records.js";
import type { Nodes } from "../store.js";
import type { ReadAhead } from "./read-ahead.js";
import { listParam, nul, oneOf, RecordMap, RowWrite, type Sql } from "./sql.js";

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

/**
 * Why the rollouts go on around node `n` (SkipReason), or NULL when they wait for it: drained, a
 * transport this hub does not run, silent. Each is a durable fact the hub records (the drain, and
 * the conditions it keeps open by observation), so the CLI and the hub count the same way; the
 * conditions are found through the partial index of open conditions by subject.
 */
export const SKIP_REASON = `(CASE WHEN n.draining = 1 THEN 'drained'
  WHEN EXISTS (SELECT 1 FROM conditions c WHERE c.subject_kind = 'node' AND c.subject = n.name AND c.status = 'open'
                 AND c.type = 'TransportDegraded' AND c.reason = 'TransportNotEnabled') THEN 'transport-not-run'
  WHEN EXISTS (SELECT 1 FROM conditions c WHERE c.subject_kind = 'node' AND c.subject = n.name AND c.status = 'open'
                 AND c.type = 'NodeSilent') THEN 'silent' END)`;

/** Every node `SKIP_REASON` names, from the indexes of drained nodes and of open conditions. */
export const SKIPPED_NODES = `SELECT name AS node FROM nodes WHERE draining = 1
  UNION SELECT subject FROM conditions WHERE status = 'open' AND type = 'NodeSilent' AND subject_kind = 'node'
  UNION SELECT subject FROM conditions WHERE status = 'open' AND type = 'TransportDegraded'
          AND reason = 'TransportNotEnabled' AND subject_kind = 'node'`;

/**
 * Rows of node times, as an UPDATE of every node they name: `(SELECT ? AS name, ...) UNION ALL
 * (SELECT ?, ...)`, a form SQLite and PostgreSQL both read (one row on SQLite, which writes at once).
 */
function touchWrite(columns: readonly string[], set: string, where = ""): RowWrite {
  const row = (first: boolean) =>
    `SELECT ${columns.map((column) => (first ? `? AS ${column}` : "?")).join(", ")}`;
  return new RowWrite(
    "nodes",
    (rows) =>
      `UPDATE nodes SET ${set} FROM (${Array.from({ length: rows }, (_, i) => row(i === 0)).join(" UNION ALL ")}) AS v
        WHERE nodes.name = v.name${where}`,
    [0],
    // Two writes of one node's times in a unit are sent in order: the heartbeat only moves forward.
    false,
  );
}

/** A report's times: the last heartbeat only moves forward; the report's time is the latest report's. */
const TOUCH_REPORTED = touchWrite(
  ["name", "heartbeat_at", "report_at"],
  `last_heartbeat_at = CASE WHEN nodes.last_heartbeat_at IS NULL OR nodes.last_heartbeat_at < v.heartbeat_at
     THEN v.heartbeat_at ELSE nodes.last_heartbeat_at END, last_report_at = v.report_at`,
);

/** A heartbeat's time, when later than the one stored. */
const TOUCH_HEARD = touchWrite(
  ["name", "heartbeat_at"],
  "last_heartbeat_at = v.heartbeat_at",
  " AND (nodes.last_heartbeat_at IS NULL OR nodes.last_heartbeat_at < v.heartbeat_at)",
);

export class NodesSql implements Nodes {
  constructor(
    private readonly sql: Sql,
    /** In a unit of work: what it read ahead (read-ahead.ts). */
    private readonly ahead?: ReadAhead,
  ) {}

  /** Reads ahead `names`. */
  async readAhead(names: readonly string[]): Promise<void> {
    if (!this.ahead || names.length === 0) return;
    const found = await this.named(names);
    for (const name of names) this.ahead.nodes.set(name, found.get(name) ?? null);
  }

  async get(name: string): Promise<NodeRecord | undefined> {
    const ahead = this.ahead?.nodes.get(name);
    if (ahead !== undefined) return ahead === null ? undefined : { ...ahead };
    const row = await this.sql.get("SELECT * FROM nodes WHERE name = ?", [name]);
    return row ? NODES.from(row) : undefined;
  }

  async named(names: Iterable<string>): Promise<Map<string, NodeRecord>> {
    const wanted = [...new Set(names)];
    const found = new Map<string, NodeRecord>();
    if (wanted.length === 0) return found;
    const { dialect } = this.sql;
    for (const row of await this.sql.all(`SELECT * FROM nodes WHERE ${oneOf(dialect, "name")}`, [
      listParam(dialect, wanted),
    ]))
      found.set(row.name as string, NODES.from(row));
    return found;
  }

  async list(): Promise<NodeRecord[]> {
    return (await this.sql.all("SELECT * FROM nodes ORDER BY name")).map((r) => NODES.from(r));
  }

  async skip(name: string): Promise<SkipReason | undefined> {
    const row = await this.sql.get(`SELECT ${SKIP_REASON} AS skip FROM nodes n WHERE n.name = ?`, [name]);
    return (row?.skip as SkipReason | null) ?? undefined;
  }

  async upsert(node: Pick<NodeRecord, "name" | "transport" | "spec" | "revision">): Promise<void> {
    this.ahead?.nodes.delete(node.name);
    this.ahead?.noneFailed.clear();
    await this.sql.run(
      `INSERT INTO nodes (name, transport, spec, revision) VALUES (?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET transport = excluded.transport, spec = excluded.spec,
         revision = excluded.revision, removed_at = NULL`,
      [node.name, node.transport, JSON.stringify(node.spec), nul(node.revision)],
    );
  }

  async markRemoved(declared: readonly string[], at: string): Promise<void> {
    this.ahead?.nodes.clear();
    this.ahead?.noneFailed.clear();
    const keep = new Set(declared);
    for (const row of await this.sql.all("SELECT name FROM nodes WHERE removed_at IS NULL"))
      if (!keep.has(row.name as string))
        await this.sql.run("UPDATE nodes SET removed_at = ? WHERE name = ?", [at, row.name]);
  }

  async setDraining(
    name: string,
    draining: boolean,
    detail: { by: string; reason?: string; at: string },
  ): Promise<boolean> {
    // A node drained or back: which failures count changes.
    this.ahead?.nodes.delete(name);
    this.ahead?.noneFailed.clear();
    const changes = await this.sql.run(
      "UPDATE nodes SET draining = ?, drain_reason = ?, drained_at = ?, drained_by = ? WHERE name = ?",
      [
        draining ? 1 : 0,
        draining ? nul(detail.reason) : null,
        draining ? detail.at : null,
        draining ? detail.by : null,
        name,
      ],
    );
    return changes > 0;
  }

  async touch(name: string, at: { heartbeatAt?: string; reportAt?: string }): Promise<void> {
    this.ahead?.nodes.delete(name);
    // The last heartbeat only moves forward; a report's time is the latest report's (saveReport
    // already refused an older one). Held with the unit's other rows (Sql.write): one statement for
    // a batch of reports and heartbeats.
    if (at.heartbeatAt && at.reportAt)
      await this.sql.write(TOUCH_REPORTED, [name, at.heartbeatAt, at.reportAt]);
    else if (at.heartbeatAt) await this.sql.write(TOUCH_HEARD, [name, at.heartbeatAt]);
    else if (at.reportAt)
      await this.sql.run("UPDATE nodes SET last_report_at = ? WHERE name = ?", [at.reportAt, name]);
  }
}
