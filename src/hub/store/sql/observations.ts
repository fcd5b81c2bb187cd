/**
 * The observations port on SQL (tables `reports`, `observations`): each node's latest full report and
 * each instance's latest observation. A report rewrites only the observations that changed, so
 * ingesting the same converged state again costs one row; parsing a stored body is most of the cost
 * of reading one, so an unchanged body keeps its parsed form.
 */
import type { Report } from "../../../model/generated.js";
import { instanceKey } from "../../../model/render.js";
import type { Observation } from "../../records.js";
import type { Observations } from "../store.js";
import { bodyDigest, type StoreCaches } from "./caches.js";
import type { ReadAhead } from "./read-ahead.js";
import { defined, listParam, marks, nul, oneOf, RecordMap, type Row, RowWrite, type Sql } from "./sql.js";

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

const UPSERT_OBSERVATION = OBSERVATIONS.upsertWrite("observations", ["instance_key"]);

/**
 * A node's latest report: reports can arrive out of order (a supervision report built before an
 * apply, delivered after it), and an older one is not the latest observation, so the upsert's WHERE
 * leaves a stored one that is newer (by time, then the agent's sequence) — `newerReport` in SQL.
 */
const UPSERT_REPORT = new RowWrite(
  "reports",
  (rows) => `INSERT INTO reports (node, taken_at, seq, received_at, agent)
     VALUES ${Array.from({ length: rows }, () => `(${marks(5)})`).join(", ")}
     ON CONFLICT (node) DO UPDATE SET taken_at = excluded.taken_at, seq = excluded.seq,
       received_at = excluded.received_at, agent = excluded.agent
     WHERE excluded.taken_at > reports.taken_at
       OR (excluded.taken_at = reports.taken_at
         AND (excluded.seq IS NULL OR reports.seq IS NULL OR excluded.seq > reports.seq))`,
  [0],
  // A later report of the node held with an earlier one is newer than it (saveReport holds only those).
  true,
);

/** Whether `report` is newer than the one `stored` says, as UPSERT_REPORT's WHERE decides it. */
function newerReport(report: Report, stored: { takenAt: string; seq?: number }): boolean {
  if (report.takenAt !== stored.takenAt) return report.takenAt > stored.takenAt;
  return report.seq === undefined || stored.seq === undefined || report.seq > stored.seq;
}

export class ObservationsSql implements Observations {
  constructor(
    private readonly sql: Sql,
    private readonly caches: StoreCaches,
    /** In a unit of work: what it read ahead (read-ahead.ts). */
    private readonly ahead?: ReadAhead,
  ) {}

  /** Reads ahead the observations of `keys` and the latest reports of `nodes`. */
  async readAhead(keys: readonly string[], nodes: readonly string[]): Promise<void> {
    if (!this.ahead) return;
    const { dialect } = this.sql;
    if (keys.length > 0) {
      for (const key of keys) this.ahead.observations.set(key, null);
      for (const row of await this.sql.all(
        `SELECT * FROM observations WHERE ${oneOf(dialect, "instance_key")}`,
        [listParam(dialect, keys)],
      ))
        this.ahead.observations.set(row.instance_key as string, this.observationFrom(row));
    }
    if (nodes.length > 0) {
      for (const node of nodes) this.ahead.reports.set(node, null);
      for (const row of await this.sql.all(
        `SELECT node, taken_at, seq FROM reports WHERE ${oneOf(dialect, "node")}`,
        [listParam(dialect, nodes)],
      ))
        this.ahead.reports.set(row.node as string, reportFrom(row));
    }
  }

  async reportOf(node: string): Promise<{ takenAt: string; seq?: number } | undefined> {
    const ahead = this.ahead?.reports.get(node);
    if (ahead !== undefined) return ahead === null ? undefined : { ...ahead };
    const row = await this.sql.get("SELECT taken_at, seq FROM reports WHERE node = ?", [node]);
    return row ? reportFrom(row) : undefined;
  }

  async saveReport(report: Report, receivedAt: string): Promise<string[] | undefined> {
    const row = [report.node, report.takenAt, nul(report.seq), receivedAt, JSON.stringify(report.agent)];
    const latest = this.ahead?.reports.get(report.node);
    if (this.ahead && latest !== undefined) {
      // The stored report was read ahead (a batch of events): whether this one is newer is known
      // here, and its row goes with the unit's other rows.
      if (latest !== null && !newerReport(report, latest)) return undefined;
      await this.sql.write(UPSERT_REPORT, row);
      this.ahead.reports.set(report.node, reportFrom({ taken_at: report.takenAt, seq: nul(report.seq) }));
    } else {
      // One statement, not a read first: no row changed when the stored one is newer.
      if ((await this.sql.run(UPSERT_REPORT.text(1), row)) === 0) return undefined;
      this.ahead?.reports.delete(report.node);
    }
    const { parsedObservations } = this.caches;
    const changed: string[] = [];
    const stored = await this.observedOf(report.node);
    const reported = new Set<string>();
    for (const instance of report.instances) {
      const key = instanceKey(instance.assignment, report.node);
      reported.add(instance.assignment);
      const body = JSON.stringify(instance);
      const digest = bodyDigest(body);
      if (stored.get(instance.assignment) === digest) continue;
      changed.push(key);
      this.ahead?.observations.delete(key);
      await this.sql.write(UPSERT_OBSERVATION, [
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
      ]);
      stored.set(instance.assignment, digest);
    }
    // A full report is all the node holds: an instance it does not mention is not there (another
    // agent's state, a wiped state directory), whatever an earlier report said.
    for (const assignment of stored.keys()) {
      if (reported.has(assignment)) continue;
      const key = instanceKey(assignment, report.node);
      await this.sql.run("DELETE FROM observations WHERE instance_key = ?", [key]);
      stored.delete(assignment);
      parsedObservations.delete(key);
      this.ahead?.observations.delete(key);
      changed.push(key);
    }
    return changed;
  }

  /**
   * Reads ahead what saving reports of `nodes` reads: their latest reports' times, and the
   * assignments they have stored observations of (for those whose are not known yet, see observedOf).
   */
  async readAheadReported(nodes: readonly string[]): Promise<void> {
    if (this.ahead && nodes.length > 0) {
      const { dialect } = this.sql;
      for (const node of nodes) this.ahead.reports.set(node, null);
      for (const row of await this.sql.all(
        `SELECT node, taken_at, seq FROM reports WHERE ${oneOf(dialect, "node")}`,
        [listParam(dialect, nodes)],
      ))
        this.ahead.reports.set(row.node as string, reportFrom(row));
    }
    const unknown = nodes.filter((node) => !this.caches.observed.has(node));
    if (unknown.length === 0) return;
    const observed = new Map(unknown.map((node) => [node, new Map<string, number>()]));
    const { dialect } = this.sql;
    for (const row of await this.sql.all(
      `SELECT node, assignment FROM observations WHERE ${oneOf(dialect, "node")}`,
      [listParam(dialect, unknown)],
    ))
      observed.get(row.node as string)?.set(row.assignment as string, -1);
    for (const [node, assignments] of observed) this.caches.observed.set(node, assignments);
  }

  /**
   * The assignments `node` has stored observations of, with the digests of their bodies as far as
   * this process wrote them (kept up to date by `saveReport`; -1: not known).
   */
  private async observedOf(node: string): Promise<Map<string, number>> {
    let stored = this.caches.observed.get(node);
    if (!stored) {
      stored = new Map(
        (await this.sql.all("SELECT assignment FROM observations WHERE node = ?", [node])).map((r) => [
          r.assignment as string,
          -1,
        ]),
      );
      this.caches.observed.set(node, stored);
    }
    return stored;
  }

  async get(key: string): Promise<Observation | undefined> {
    const ahead = this.ahead?.observations.get(key);
    if (ahead !== undefined) return ahead ?? undefined;
    const row = await this.sql.get("SELECT * FROM observations WHERE instance_key = ?", [key]);
    return row ? this.observationFrom(row) : undefined;
  }

  /** A stored observation, parsed once while its body stays the same (caches.parsedObservations). */
  private observationFrom(row: Row): Observation {
    const key = row.instance_key as string;
    const cached = this.caches.parsedObservations.get(key);
    if (cached && cached.body === row.body && cached.takenAt === row.taken_at) return cached.observation;
    const observation = OBSERVATIONS.from(row);
    this.caches.parsedObservations.set(key, {
      body: row.body as string,
      takenAt: row.taken_at as string,
      observation,
    });
    return observation;
  }
}

/** A node's latest report, as `reportOf` tells it. */
function reportFrom(row: Row): { takenAt: string; seq?: number } {
  return defined({ takenAt: row.taken_at as string }, { seq: row.seq === null ? null : Number(row.seq) });
}
