/**
 * The store on PostgreSQL (node-postgres), for hubs beyond one machine: several replicas share it.
 * A store's units of work run one at a time, as on SQLite: the hub's parts (a batch of reconciles,
 * the inbox, the relay) then never interleave their writes to the same rows. Each takes a connection
 * from the pool and runs `BEGIN ISOLATION LEVEL REPEATABLE READ` … `COMMIT`, so a unit of another
 * process (a CLI command, a second replica) that wrote the same row meanwhile makes this one fail
 * (a serialization failure: rolled back, and run again on what is committed now — so a unit of
 * work acts outside the store only after it committed) rather than lose that write; committed
 * reads go to any connection, at once. The ports run the same SQL as on SQLite, its `?` placeholders
 * numbered here, each text prepared once per connection (Statements).
 *
 * The schema is brought up to date on open, once: every replica that starts takes the same advisory
 * lock first, so replicas starting together apply each migration exactly once, and one that finds
 * the schema newer than it understands refuses to run rather than misread it.
 */
import pg from "pg";
import { EnvironmentError } from "../../model/errors.js";
import { withoutPassword } from "./location.js";
import type { Migration } from "./migrations.js";
import { POSTGRES_MIGRATIONS } from "./postgres-migrations.js";
import { HeldRows, type Row, type RowWrite, runRows, type Sql } from "./sql/sql.js";
import { SqlStore } from "./sql/store.js";
import type { Signals } from "./store.js";

/** SQLSTATEs of a unit of work that lost a race with another: run again. */
const SERIALIZATION_FAILURE = "40001";
const DEADLOCK = "40P01";
/**
 * SQLSTATE of a connection the server ended because its transaction sat idle too long (IDLE_IN_UNIT_MS):
 * the server rolled that transaction back before any COMMIT reached it, so the unit runs again.
 */
const IDLE_IN_TRANSACTION_TIMEOUT = "25P03";
const RETRIES = 8;

/**
 * How long a unit of work's connection may sit idle inside its transaction before the server ends
 * it. A unit only runs queries (it acts outside the store after it committed), so a long gap means
 * its process is paused or gone: the server then ends its transaction and releases its locks — a
 * unit holds its nodes' lease rows (`holds`, FOR KEY SHARE), which a replica taking those leases
 * over must otherwise wait for, however long the pause lasts.
 */
const IDLE_IN_UNIT_MS = 5_000;

/** The advisory lock every replica takes while it migrates (an arbitrary constant, steward's own). */
const MIGRATION_LOCK = 7_117_018;

/** `text` with its `?` placeholders numbered `$1`, `$2`, … (the ports' SQL has no `?` in a literal). */
function numbered(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/** SQLSTATE of a prepared statement whose table changed under it (a replica migrated the schema). */
const FEATURE_NOT_SUPPORTED = "0A000";

/** Whether `error` is a prepared statement's plan outdated by a schema change: prepared again, it runs. */
function outdatedPlan(error: unknown): boolean {
  return (
    (error as { code?: string }).code === FEATURE_NOT_SUPPORTED &&
    /cached plan/.test((error as Error).message)
  );
}

/**
 * The ports' statements as the server prepares them: each text once per connection, by name, so the
 * server parses and plans it once rather than for every query (a rollout runs each of them once or
 * more per instance). Bounded: past `max` texts (the ports have about 150), a new text runs unnamed.
 * After a schema change the server refuses a prepared statement whose rows changed shape; `renew`
 * then names every text afresh, so each connection prepares it again.
 */
class Statements {
  private readonly named = new Map<string, pg.QueryConfig>();
  /** Names are never reused: a connection may still hold a statement of an earlier name. */
  private serial = 0;

  constructor(private readonly max = 1_024) {}

  config(text: string, values: readonly unknown[]): pg.QueryConfig {
    let found = this.named.get(text);
    if (found === undefined) {
      found = { text: numbered(text) };
      if (this.named.size < this.max) found.name = `steward_${++this.serial}`;
      this.named.set(text, found);
    }
    return { name: found.name, text: found.text, values: values as unknown[] };
  }

  renew(): void {
    this.named.clear();
  }
}

/** Anything that runs a query: the pool (committed reads) or one unit of work's connection. */
type Queryable = Pick<pg.Pool, "query"> | pg.PoolClient;

/**
 * Rows a unit of work holds at most before it sends them (Sql.write): a rollout's batch of
 * reconciles or the inbox's batch of events writes a few thousand.
 */
const MAX_HELD_ROWS = 4_096;

/**
 * A connection (or the pool) as the ports' Sql. In a unit of work, rows written by `write` are held
 * and sent before the unit's next statement, as multi-row statements of up to 64 rows: a reconcile
 * or an event writes its intent, attempt or observation rows without a round trip of its own.
 */
class PostgresSql implements Sql {
  readonly dialect = "postgres" as const;
  private readonly held = new HeldRows();

  constructor(
    private readonly target: Queryable,
    private readonly statements: Statements,
    /** Outside a transaction (the pool's committed reads): a query refused for an outdated plan runs again, a write is sent at once. */
    private readonly again = false,
  ) {}

  private async query(text: string, params: readonly unknown[]): Promise<pg.QueryResult> {
    if (this.held.size > 0) await this.settle();
    try {
      return await this.target.query(this.statements.config(text, params));
    } catch (error) {
      if (!this.again || !outdatedPlan(error)) throw error;
      this.statements.renew();
      return this.target.query(this.statements.config(text, params));
    }
  }

  async get(text: string, params: readonly unknown[] = []): Promise<Row | undefined> {
    return (await this.query(text, params)).rows[0] as Row | undefined;
  }

  async all(text: string, params: readonly unknown[] = []): Promise<Row[]> {
    return (await this.query(text, params)).rows as Row[];
  }

  async run(text: string, params: readonly unknown[] = []): Promise<number> {
    return (await this.query(text, params)).rowCount ?? 0;
  }

  async write(statement: RowWrite, row: readonly unknown[]): Promise<void> {
    if (this.again) {
      await this.run(statement.text(1), row);
      return;
    }
    if (!this.held.fits(statement, row)) await this.settle();
    this.held.hold(statement, row);
    if (this.held.size >= MAX_HELD_ROWS) await this.settle();
  }

  async settle(): Promise<void> {
    // Taken first: the statements that send them do not send them again.
    for (const [statement, rows] of this.held.take()) await runRows(this, rows, (n) => statement.text(n));
  }

  discard(): void {
    this.held.clear();
  }
}

/** Options of a PostgreSQL store. */
export interface PostgresStoreOptions {
  /** `postgres://user[:password]@host[:port]/database` (the password may come from PGPASSWORD instead). */
  url: string;
  /** Connections in the pool (default 8): units of work that may run at once. */
  connections?: number;
  /** How long a unit's connection may sit idle inside its transaction (default IDLE_IN_UNIT_MS). */
  idleInUnitMs?: number;
}

/** The Store over one PostgreSQL database (see the module comment). */
export class PostgresStore extends SqlStore {
  readonly signals: Signals;
  private listener: pg.Client | undefined;
  /** The session `announce` keeps open: its name, and its connection while it is open. */
  private presence: { name: string; client?: pg.Client } | undefined;
  private closed = false;
  private readonly channels = new Map<string, Set<(payload: string) => void>>();

  private constructor(
    private readonly pool: pg.Pool,
    /**
     * The replicas' lease units' own connections: a renewal never waits for a connection behind the
     * committed reads queued on the pool (a replica taking over thousands of nodes queues thousands).
     */
    private readonly leasePool: pg.Pool,
    location: string,
    private readonly statements: Statements,
    private readonly url: string,
  ) {
    super(new PostgresSql(pool, statements, true), location);
    this.signals = {
      send: async (channel, payload) => {
        await this.pool.query("SELECT pg_notify($1, $2)", [channel, payload]);
      },
      listen: async (channel, listener) => {
        let listeners = this.channels.get(channel);
        if (!listeners) {
          listeners = new Set();
          this.channels.set(channel, listeners);
          await (await this.listening()).query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        }
        listeners.add(listener);
      },
    };
  }

  /** The connection that listens (one per store, opened on the first `listen`). */
  private async listening(): Promise<pg.Client> {
    if (this.listener) return this.listener;
    const client = new pg.Client({ connectionString: this.url });
    client.on("error", () => undefined);
    client.on("notification", (message) => {
      for (const listener of this.channels.get(message.channel) ?? []) listener(message.payload ?? "");
    });
    await client.connect();
    this.listener = client;
    return client;
  }

  /** Connects, brings the schema up to date (once, whichever replica gets there first) and opens the store. */
  static async open(
    options: PostgresStoreOptions,
    migrations: readonly Migration[] = POSTGRES_MIGRATIONS,
  ): Promise<PostgresStore> {
    const location = withoutPassword(options.url);
    const poolOf = (max: number) => {
      const pool = new pg.Pool({
        connectionString: options.url,
        max,
        // Connections stay open while the store is: each holds the statements it prepared and the
        // plans the server settled on for them, and a fresh one parses and plans every statement
        // of a unit again (pg-pool closes a connection idle for 10 s by default: at 100,000
        // instances a change after a quiet spell went out in 141 ms, most of it spent so).
        idleTimeoutMillis: 0,
        // …without keeping a process that has nothing else to do from exiting.
        allowExitOnIdle: true,
        idle_in_transaction_session_timeout: options.idleInUnitMs ?? IDLE_IN_UNIT_MS,
      });
      // An idle connection the server closed (a restart) is an error on the pool: the next query reconnects.
      pool.on("error", () => undefined);
      return pool;
    };
    const pool = poolOf(options.connections ?? 8);
    try {
      await migrate(pool, migrations);
    } catch (error) {
      await pool.end().catch(() => undefined);
      if (error instanceof EnvironmentError) throw error;
      throw new EnvironmentError(`cannot open the hub's store ${location}: ${(error as Error).message}`, {
        cause: error,
      });
    }
    return new PostgresStore(pool, poolOf(2), location, new Statements(), options.url);
  }

  protected unit<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    return this.oneAtATime(() => this.retried(work));
  }

  /** On a connection of its own, at once: the replicas' leases (leaseTransaction). */
  protected override unitBeside<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    return this.retried(work, this.leasePool);
  }

  /**
   * A unit of another process (a replica, a command) wrote the same rows first: run it again on
   * what is committed now, a few times, as PostgreSQL advises for repeatable read. One refused
   * for a statement prepared before a schema change runs again with its statements prepared anew.
   */
  private async retried<T>(work: (sql: Sql) => Promise<T>, pool = this.pool): Promise<T> {
    for (let tries = 1; ; tries++) {
      try {
        return await this.unitNow(work, pool);
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (outdatedPlan(error) && tries < RETRIES) {
          this.statements.renew();
          continue;
        }
        const again =
          code === SERIALIZATION_FAILURE || code === DEADLOCK || code === IDLE_IN_TRANSACTION_TIMEOUT;
        if (!again || tries >= RETRIES) throw error;
        // Rolled back: what the caches learned in it may be ahead of the database.
        this.caches.rolledBack();
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 50 * tries));
      }
    }
  }

  private async unitNow<T>(work: (sql: Sql) => Promise<T>, pool: pg.Pool): Promise<T> {
    const client = await pool.connect();
    // A checked-out connection the server ends (idle too long in the transaction, a restart) is an
    // error on the client, which has no other listener then: it is this unit's failure, never the
    // process's. Its next statement is refused; the unit fails with the server's reason.
    let lost: Error | undefined;
    const onLost = (error: Error) => {
      lost ??= error;
    };
    client.on("error", onLost);
    let broken = false;
    try {
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      try {
        const sql = new PostgresSql(client, this.statements);
        const result = await work(sql);
        await sql.settle();
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => {
          broken = true;
        });
        throw lost ?? error;
      }
    } catch (error) {
      throw lost ?? error;
    } finally {
      client.off("error", onLost);
      // A connection whose rollback failed, or that the server ended, is not given to the next unit.
      client.release(broken || lost !== undefined);
    }
  }

  override async announce(id: string): Promise<string> {
    // application_name keeps printable ASCII (anything else becomes '?') up to 63 bytes: the name
    // recorded is the one the server shows.
    const name = `steward ${id}`.replace(/[^\x20-\x7e]/g, "?").slice(0, 63);
    this.presence = { name };
    await this.present(this.presence);
    return name;
  }

  override session(): string | undefined {
    return this.presence?.client ? this.presence.name : undefined;
  }

  /** Opens the presence connection, and opens it again a second after it was lost. */
  private async present(presence: { name: string; client?: pg.Client }): Promise<void> {
    if (this.closed || this.presence !== presence) return;
    const client = new pg.Client({ connectionString: this.url, application_name: presence.name });
    let lost = false;
    const again = () => {
      if (lost) return;
      lost = true;
      if (presence.client === client) presence.client = undefined;
      if (!this.closed) setTimeout(() => void this.present(presence), 1_000).unref();
    };
    client.on("error", again);
    client.on("end", again);
    try {
      await client.connect();
      presence.client = client;
    } catch {
      again();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.presence?.client?.end().catch(() => undefined);
    // A unit of work still running ends first.
    await this.settled();
    await this.listener?.end().catch(() => undefined);
    await this.pool.end();
    await this.leasePool.end();
  }
}

/** Applies the migrations the database has not seen yet, under the migration lock. */
async function migrate(pool: pg.Pool, migrations: readonly Migration[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT COLLATE "C" NOT NULL, applied_at TEXT COLLATE "C" NOT NULL)',
    );
    const applied = new Set(
      (await client.query<{ version: number }>("SELECT version FROM schema_migrations")).rows.map(
        (r) => r.version,
      ),
    );
    const newest = Math.max(0, ...applied);
    const known = Math.max(0, ...migrations.map((m) => m.version));
    if (newest > known)
      throw new EnvironmentError(
        `the hub's store is at schema version ${newest}, newer than this steward understands (${known}): upgrade steward`,
      );
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (applied.has(migration.version)) continue;
      await client.query(migration.sql);
      await client.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)", [
        migration.version,
        migration.name,
        new Date().toISOString(),
      ]);
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
