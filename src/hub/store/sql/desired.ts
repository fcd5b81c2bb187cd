/**
 * The desired-state port on SQL: reads of the syncer's tables (`revisions`, `generations`,
 * `instances`, `sync_state`, `sync_events`; written by generations.ts) and the hub's writes of a
 * revision's declarations (`assignment_policies`, `fleet_settings`). Parsed specs are cached: a
 * generation never changes once written.
 */
import { canonicalJson } from "../../../model/canonical.js";
import type { FleetSettings } from "../../../model/fleet.js";
import type { SyncState } from "../../../repo/store.js";
import type { DesiredInstance, RevisionRecord } from "../../records.js";
import type {
  AssignmentPolicy,
  DesiredState,
  InstanceRow,
  RevisionMember,
  SyncEventRecord,
} from "../store.js";
import type { StoreCaches } from "./caches.js";
import { revisionFrom, SYNC_EVENTS, SYNC_STATE } from "./generations.js";
import type { ReadAhead } from "./read-ahead.js";
import { defined, listParam, oneOf, RecordMap, type Row, type Sql } from "./sql.js";

const INSTANCES = new RecordMap<InstanceRow>([
  ["key", "value", "instance_key"],
  "assignment",
  "node",
  "generation",
  "revision",
  "retiredAt",
]);

const MEMBERS = new RecordMap<RevisionMember>(["instanceKey", "generation", "assignment", "node"]);

const keys = (rows: readonly Row[]) => rows.map((r) => r.instance_key as string);

/** An instance's current generation with its assignment's current policy (`WHERE` names which). */
const CURRENT = `SELECT i.instance_key, i.assignment, i.node, i.generation, i.hash, g.revision, i.retired_at,
         g.spec, coalesce(p.rollout, g.rollout) AS rollout, coalesce(p.budget, g.budget) AS budget
    FROM instances i JOIN generations g ON g.instance_key = i.instance_key AND g.generation = i.generation
    LEFT JOIN assignment_policies p ON p.assignment = i.assignment`;

export class DesiredStateSql implements DesiredState {
  constructor(
    private readonly sql: Sql,
    private readonly caches: StoreCaches,
    /** In a unit of work: what it read ahead (read-ahead.ts). */
    private readonly ahead?: ReadAhead,
  ) {}

  private desiredFrom(row: Row | undefined): DesiredInstance | undefined {
    if (!row) return undefined;
    const key = row.instance_key as string;
    const generation = row.generation as number;
    const { specs } = this.caches;
    return defined(
      {
        key,
        assignment: row.assignment as string,
        node: row.node as string,
        generation,
        hash: row.hash as string,
        revision: row.revision as string,
        spec: specs.parse(row.spec as string),
        rollout: specs.parse(row.rollout as string),
        budget: specs.parse(row.budget as string),
      } as DesiredInstance,
      { retiredAt: row.retired_at },
    );
  }

  async instance(key: string): Promise<DesiredInstance | undefined> {
    const ahead = this.ahead?.desired.get(key);
    if (ahead !== undefined) return ahead === null ? undefined : { ...ahead };
    return this.desiredFrom(await this.sql.get(`${CURRENT} WHERE i.instance_key = ?`, [key]));
  }

  /** Reads ahead the instances `keys` name (read-ahead.ts). */
  async readAhead(keys: readonly string[]): Promise<void> {
    if (!this.ahead) return;
    const { dialect } = this.sql;
    for (const key of keys) this.ahead.desired.set(key, null);
    for (const row of await this.sql.all(`${CURRENT} WHERE ${oneOf(dialect, "i.instance_key")}`, [
      listParam(dialect, keys),
    ]))
      this.ahead.desired.set(row.instance_key as string, this.desiredFrom(row)!);
  }

  async at(key: string, generation: number): Promise<DesiredInstance | undefined> {
    return this.desiredFrom(
      await this.sql.get(
        `SELECT instance_key, assignment, node, generation, hash, revision, NULL AS retired_at, spec, rollout, budget
           FROM generations WHERE instance_key = ? AND generation = ?`,
        [key, generation],
      ),
    );
  }

  async instances(): Promise<InstanceRow[]> {
    return (
      await this.sql.all(
        "SELECT instance_key, assignment, node, generation, revision, retired_at FROM instances ORDER BY instance_key",
      )
    ).map((r) => INSTANCES.from(r));
  }

  async activeKeysOfNode(node: string): Promise<string[]> {
    return keys(
      await this.sql.all(
        "SELECT instance_key FROM instances WHERE node = ? AND retired_at IS NULL ORDER BY instance_key",
        [node],
      ),
    );
  }

  async activeKeysOfNodes(nodes: readonly string[]): Promise<string[]> {
    if (nodes.length === 0) return [];
    const { dialect } = this.sql;
    return keys(
      await this.sql.all(
        `SELECT instance_key FROM instances WHERE ${oneOf(dialect, "node")} AND retired_at IS NULL ORDER BY node, instance_key`,
        [listParam(dialect, nodes)],
      ),
    );
  }

  async activeKeysOfAssignment(assignment: string): Promise<string[]> {
    return keys(
      await this.sql.all(
        "SELECT instance_key FROM instances WHERE assignment = ? AND retired_at IS NULL ORDER BY instance_key",
        [assignment],
      ),
    );
  }

  async keysChangedBy(sha: string): Promise<string[]> {
    return keys(
      await this.sql.all(
        "SELECT instance_key FROM instances WHERE revision = ? UNION SELECT instance_key FROM instances WHERE retired_by = ?",
        [sha, sha],
      ),
    );
  }

  async generationsOf(sha: string): Promise<RevisionMember[]> {
    return (
      await this.sql.all(
        "SELECT instance_key, generation, assignment, node FROM generations WHERE revision = ? ORDER BY assignment, node",
        [sha],
      )
    ).map((r) => MEMBERS.from(r));
  }

  async revisionsAfter(seq: number): Promise<RevisionRecord[]> {
    return (await this.sql.all("SELECT * FROM revisions WHERE seq > ? ORDER BY seq", [seq])).map(
      revisionFrom,
    );
  }

  private async oneRevision(text: string, params: readonly unknown[]): Promise<RevisionRecord | undefined> {
    const row = await this.sql.get(text, params);
    return row ? revisionFrom(row) : undefined;
  }

  revision(sha: string): Promise<RevisionRecord | undefined> {
    return this.oneRevision("SELECT * FROM revisions WHERE sha = ?", [sha]);
  }

  latestRevision(): Promise<RevisionRecord | undefined> {
    return this.oneRevision("SELECT * FROM revisions ORDER BY seq DESC LIMIT 1", []);
  }

  nextAppliedRevision(seq: number): Promise<RevisionRecord | undefined> {
    return this.oneRevision(
      "SELECT * FROM revisions WHERE seq > ? AND outcome = 'applied' ORDER BY seq LIMIT 1",
      [seq],
    );
  }

  previousAppliedRevision(seq: number): Promise<RevisionRecord | undefined> {
    return this.oneRevision(
      "SELECT * FROM revisions WHERE seq < ? AND outcome = 'applied' ORDER BY seq DESC LIMIT 1",
      [seq],
    );
  }

  async revisionByPrefix(prefix: string): Promise<RevisionRecord | undefined> {
    const rows = await this.sql.all("SELECT * FROM revisions WHERE sha LIKE ? || '%' LIMIT 2", [
      prefix.toLowerCase(),
    ]);
    return rows.length === 1 ? revisionFrom(rows[0]!) : undefined;
  }

  async openSyncEvents(): Promise<SyncEventRecord[]> {
    return (await this.sql.all("SELECT * FROM sync_events WHERE resolved_at IS NULL ORDER BY id")).map((r) =>
      SYNC_EVENTS.from(r),
    );
  }

  async syncState(branch: string): Promise<SyncState | undefined> {
    const row = await this.sql.get("SELECT * FROM sync_state WHERE branch = ?", [branch]);
    return row ? SYNC_STATE.from(row) : undefined;
  }

  async fleetSettings(): Promise<FleetSettings | undefined> {
    const row = await this.sql.get("SELECT settings FROM fleet_settings WHERE id = 1");
    return row ? (JSON.parse(row.settings as string) as FleetSettings) : undefined;
  }

  async savePolicies(revision: string, policies: readonly AssignmentPolicy[]): Promise<string[]> {
    if (policies.length === 0) return [];
    const stored = new Map<string, Row>();
    for (const row of await this.sql.all(
      `SELECT assignment, rollout, budget FROM assignment_policies WHERE ${oneOf(this.sql.dialect, "assignment")}`,
      [
        listParam(
          this.sql.dialect,
          policies.map((p) => p.assignment),
        ),
      ],
    ))
      stored.set(row.assignment as string, row);
    const changed: string[] = [];
    for (const { assignment, rollout, budget } of policies) {
      const rolloutJson = canonicalJson(rollout);
      const budgetJson = canonicalJson(budget);
      const existing = stored.get(assignment);
      if (existing && existing.rollout === rolloutJson && existing.budget === budgetJson) continue;
      this.ahead?.desired.clear();
      await this.sql.run(
        `INSERT INTO assignment_policies (assignment, revision, rollout, budget) VALUES (?, ?, ?, ?)
         ON CONFLICT (assignment) DO UPDATE SET revision = excluded.revision, rollout = excluded.rollout, budget = excluded.budget`,
        [assignment, revision, rolloutJson, budgetJson],
      );
      changed.push(assignment);
    }
    return changed;
  }

  async saveFleetSettings(revision: string, settings: FleetSettings): Promise<void> {
    await this.sql.run(
      `INSERT INTO fleet_settings (id, revision, settings) VALUES (1, ?, ?)
       ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, settings = excluded.settings`,
      [revision, JSON.stringify(settings)],
    );
  }
}
