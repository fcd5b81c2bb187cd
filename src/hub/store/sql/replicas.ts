/**
 * The replicas port on SQL (tables `replicas`, `leases`, migration 501): who runs, and which
 * replica holds which lease with which fencing token. Times are ISO 8601 text, compared as text.
 */
import type { LeaseRecord, ReplicaRecord } from "../../records.js";
import type { Replicas } from "../store.js";
import { marks, RecordMap, type Sql } from "./sql.js";

const REPLICAS = new RecordMap<ReplicaRecord>([
  "id",
  "address",
  "startedAt",
  "renewedAt",
  "expiresAt",
  ["shards", "int"],
  ["nodes", "int"],
  "session",
]);
const UPSERT_REPLICA = REPLICAS.upsertSql("replicas", ["id"]);
/**
 * A live replica (other than the one asking) whose session the server no longer has: its process
 * died, and the server closed its connection (PostgreSQL; application_name is visible to every role).
 */
const GONE = `expires_at > ? AND id <> ? AND session IS NOT NULL
  AND session NOT IN (SELECT application_name FROM pg_stat_activity WHERE application_name IS NOT NULL)`;
const LEASES = new RecordMap<LeaseRecord>(["name", "holder", ["token", "int"], "expiresAt"]);

export class ReplicasSql implements Replicas {
  constructor(private readonly sql: Sql) {}

  async list(): Promise<ReplicaRecord[]> {
    return (await this.sql.all("SELECT * FROM replicas ORDER BY id")).map((r) => REPLICAS.from(r));
  }

  async live(at: string): Promise<ReplicaRecord[]> {
    return (await this.sql.all("SELECT * FROM replicas WHERE expires_at > ? ORDER BY id", [at])).map((r) =>
      REPLICAS.from(r),
    );
  }

  async gone(at: string, self: string): Promise<string[]> {
    if (this.sql.dialect !== "postgres") return [];
    return (await this.sql.all(`SELECT id FROM replicas WHERE ${GONE} ORDER BY id`, [at, self])).map(
      (r) => r.id as string,
    );
  }

  async expireGone(at: string, self: string): Promise<string[]> {
    const gone = await this.gone(at, self);
    if (gone.length === 0) return gone;
    await this.sql.run(`UPDATE leases SET expires_at = '' WHERE holder IN (${marks(gone.length)})`, gone);
    await this.sql.run(`UPDATE replicas SET expires_at = '' WHERE id IN (${marks(gone.length)})`, gone);
    return gone;
  }

  async leases(): Promise<LeaseRecord[]> {
    return (await this.sql.all("SELECT * FROM leases ORDER BY name")).map((r) => LEASES.from(r));
  }

  async holds(holder: string, leases: readonly { name: string; token: number }[]): Promise<boolean> {
    if (leases.length === 0) return true;
    // FOR KEY SHARE on PostgreSQL: a takeover (it changes the token, a key: migration 502) that
    // commits after this check waits for this unit of work to end, and one that committed since it
    // began makes it fail (repeatable read); a renewal (expires_at only) never waits for it.
    const rows = await this.sql.all(
      `SELECT name, holder, token FROM leases WHERE name IN (${marks(leases.length)})${this.sql.dialect === "postgres" ? " FOR KEY SHARE" : ""}`,
      leases.map((l) => l.name),
    );
    const held = new Map(rows.map((r) => [r.name as string, r]));
    return leases.every((l) => {
      const row = held.get(l.name);
      return row !== undefined && row.holder === holder && Number(row.token) === l.token;
    });
  }

  async heartbeat(replica: ReplicaRecord): Promise<void> {
    await this.sql.run(UPSERT_REPLICA, REPLICAS.to(replica));
  }

  async acquire(name: string, holder: string, at: string, expiresAt: string): Promise<number | undefined> {
    await this.sql.run(
      "INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, 1, ?) ON CONFLICT (name) DO NOTHING",
      [name, holder, expiresAt],
    );
    await this.sql.run(
      `UPDATE leases SET token = CASE WHEN holder = ? THEN token ELSE token + 1 END, holder = ?, expires_at = ?
        WHERE name = ? AND (holder = ? OR expires_at <= ?)`,
      [holder, holder, expiresAt, name, holder, at],
    );
    const row = await this.sql.get("SELECT holder, token FROM leases WHERE name = ?", [name]);
    return row?.holder === holder ? Number(row.token) : undefined;
  }

  async renew(holder: string, names: readonly string[], expiresAt: string): Promise<Map<string, number>> {
    const held = new Map<string, number>();
    if (names.length === 0) return held;
    await this.sql.run(
      `UPDATE leases SET expires_at = ? WHERE holder = ? AND name IN (${marks(names.length)})`,
      [expiresAt, holder, ...names],
    );
    for (const row of await this.sql.all(
      `SELECT name, token FROM leases WHERE holder = ? AND name IN (${marks(names.length)})`,
      [holder, ...names],
    ))
      held.set(row.name as string, Number(row.token));
    return held;
  }

  async release(holder: string, names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    // Expired at once (kept with its token, so the next holder's token is greater).
    await this.sql.run(
      `UPDATE leases SET expires_at = '' WHERE holder = ? AND name IN (${marks(names.length)})`,
      [holder, ...names],
    );
  }

  async remove(id: string): Promise<void> {
    await this.sql.run("UPDATE leases SET expires_at = '' WHERE holder = ?", [id]);
    await this.sql.run("DELETE FROM replicas WHERE id = ?", [id]);
  }
}
