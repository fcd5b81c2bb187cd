/**
 * The store on SQLite (better-sqlite3): the embedded default. better-sqlite3 cannot run an async
 * function inside its transaction, so units of work run one at a time: each takes a lock, then
 * `BEGIN IMMEDIATE` … `COMMIT` on the writing connection (a unit waits for the previous one, never
 * for the database). Committed reads go to a second connection on the same file (WAL lets it read
 * while a unit writes), so a read outside a unit never sees a unit's uncommitted writes; while no
 * unit is open they go to the writing connection, whose cache is warm. Statements are prepared once
 * per connection.
 */
import type Database from "better-sqlite3";
import { type Db, openConnection, openDatabase } from "./database.js";
import type { RowWrite, Sql } from "./sql/sql.js";
import { SqlStore } from "./sql/store.js";

/** One better-sqlite3 connection as the ports' Sql: statements prepared once, run at once. */
class SqliteSql implements Sql {
  readonly dialect = "sqlite" as const;
  private readonly statements = new Map<string, Database.Statement<unknown[]>>();

  constructor(readonly db: Db) {}

  private statement(text: string): Database.Statement<unknown[]> {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare<unknown[]>(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  async get(text: string, params: readonly unknown[] = []): Promise<Record<string, unknown> | undefined> {
    return this.statement(text).get(...params) as Record<string, unknown> | undefined;
  }

  async all(text: string, params: readonly unknown[] = []): Promise<Record<string, unknown>[]> {
    return this.statement(text).all(...params) as Record<string, unknown>[];
  }

  async run(text: string, params: readonly unknown[] = []): Promise<number> {
    return this.statement(text).run(...params).changes;
  }

  /** At once: SQLite has no round trip to save. */
  async write(statement: RowWrite, row: readonly unknown[]): Promise<void> {
    this.statement(statement.text(1)).run(...row);
  }

  async settle(): Promise<void> {}

  discard(): void {}
}

/**
 * Committed reads: on the writing connection while no unit of work is open (its page cache is the
 * warm one), on the reading connection while one is (so they never see its uncommitted writes).
 */
class CommittedReads implements Sql {
  readonly dialect = "sqlite" as const;

  constructor(
    private readonly writer: SqliteSql,
    private readonly reader: SqliteSql,
    private readonly unitOpen: () => boolean,
  ) {}

  get(text: string, params?: readonly unknown[]) {
    return (this.unitOpen() ? this.reader : this.writer).get(text, params);
  }

  all(text: string, params?: readonly unknown[]) {
    return (this.unitOpen() ? this.reader : this.writer).all(text, params);
  }

  run(text: string, params?: readonly unknown[]) {
    return (this.unitOpen() ? this.reader : this.writer).run(text, params);
  }

  write(statement: RowWrite, row: readonly unknown[]) {
    return (this.unitOpen() ? this.reader : this.writer).write(statement, row);
  }

  async settle(): Promise<void> {}

  discard(): void {}
}

/** The Store over one SQLite database file (see the module comment). */
export class SqliteStore extends SqlStore {
  /** The writing connection: for tests and tools that look at the file itself. */
  readonly db: Db;
  private readonly writer: SqliteSql;
  private readonly reader: SqliteSql;
  /** Whether a unit of work has begun and not yet ended. */
  private open = false;

  constructor(path: string) {
    const db = openDatabase(path);
    const writer = new SqliteSql(db);
    let reader = writer;
    if (path !== ":memory:") {
      const readDb = openConnection(path, "reader");
      readDb.pragma("query_only = ON");
      reader = new SqliteSql(readDb);
    }
    let open = () => false;
    super(new CommittedReads(writer, reader, () => open()), `sqlite:${path}`);
    open = () => this.open;
    this.db = db;
    this.writer = writer;
    this.reader = reader;
  }

  protected unit<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    return this.oneAtATime(async () => {
      const { db } = this.writer;
      db.exec("BEGIN IMMEDIATE");
      this.open = true;
      try {
        const result = await work(this.writer);
        db.exec("COMMIT");
        return result;
      } catch (error) {
        // Some failures (a full disk) end the transaction themselves.
        if (db.inTransaction) db.exec("ROLLBACK");
        throw error;
      } finally {
        this.open = false;
      }
    });
  }

  async close(): Promise<void> {
    // A unit of work still running ends first.
    await this.settled();
    if (this.reader !== this.writer && this.reader.db.open) this.reader.db.close();
    if (this.db.open) this.db.close();
  }
}
