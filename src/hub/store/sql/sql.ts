/**
 * What the store ports run on: one connection's statements, asynchronous, with `?` placeholders
 * (the PostgreSQL connection numbers them). SQLite and PostgreSQL run the same SQL text; where they
 * differ (a dialect), the port asks `sql.dialect`. Rows come back keyed by column name; one
 * `RecordMap` per record type turns them into records and back, so there is one row-mapping style.
 */

/** A row as the database returns it, keyed by column name. */
export type Row = Record<string, unknown>;

/** The SQL dialects the ports speak. */
export type Dialect = "sqlite" | "postgres";

/** One connection (or one unit of work on it), as the ports use it. */
export interface Sql {
  readonly dialect: Dialect;
  get(text: string, params?: readonly unknown[]): Promise<Row | undefined>;
  all(text: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Resolves with how many rows the statement changed. */
  run(text: string, params?: readonly unknown[]): Promise<number>;
  /**
   * Writes one row by `statement`. A unit of work may hold it and send it later, with the other
   * rows held for the same statement, as one multi-row statement — but always before anything else
   * it runs (a read, another statement, its commit), so nothing can tell it was held, except that
   * a row that breaks a constraint fails a later call of the unit (which then fails as a whole).
   */
  write(statement: RowWrite, row: readonly unknown[]): Promise<void>;
  /** Sends whatever rows `write` holds. */
  settle(): Promise<void>;
  /** Drops whatever rows `write` holds (the unit, or its step, is rolled back). */
  discard(): void;
}

/**
 * A write of rows by key whose outcome nothing reads back from the statement (an insert, an upsert,
 * an update of the rows a key names), as `Sql.write` takes it: the statement for one row or several,
 * and which of a row's values are its key.
 */
export class RowWrite {
  private readonly texts = new Map<number, string>();

  constructor(
    readonly table: string,
    /** The statement for `rows` rows. */
    private readonly build: (rows: number) => string,
    /** Positions of the key's values in a row. */
    private readonly keyAt: readonly number[],
    /**
     * Whether a later row with the same key, held with an earlier one, replaces it because the
     * outcome is the same (an upsert of every column). Otherwise the earlier is sent first (an
     * insert: the later then fails as it would).
     */
    readonly replaces: boolean,
  ) {}

  /** The statement for `rows` rows (built once per size). */
  text(rows: number): string {
    let text = this.texts.get(rows);
    if (text === undefined) {
      text = this.build(rows);
      this.texts.set(rows, text);
    }
    return text;
  }

  /** The row's key, as one string. */
  key(row: readonly unknown[]): string {
    return this.keyAt.length === 1
      ? String(row[this.keyAt[0]!])
      : this.keyAt.map((at) => String(row[at])).join("\0");
  }
}

/**
 * Rows held by a unit of work for `Sql.write` (PostgreSQL): by statement, in the order each
 * statement was first written (a child row's statement never comes before its parent's, as an
 * attempt's outbox row never comes before the attempt), and by each table's keys, so a row a held
 * one of another statement wrote too sends everything held first.
 */
export class HeldRows {
  private byStatement = new Map<RowWrite, Map<string, readonly unknown[]>>();
  private byTable = new Map<string, Map<string, RowWrite>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Whether `row` can be held with what is held now (else everything held must be sent first). */
  fits(statement: RowWrite, row: readonly unknown[]): boolean {
    const holder = this.byTable.get(statement.table)?.get(statement.key(row));
    return holder === undefined || (holder === statement && statement.replaces);
  }

  hold(statement: RowWrite, row: readonly unknown[]): void {
    const key = statement.key(row);
    let rows = this.byStatement.get(statement);
    if (!rows) {
      rows = new Map();
      this.byStatement.set(statement, rows);
    }
    if (!rows.has(key)) this.count++;
    rows.set(key, row);
    let keys = this.byTable.get(statement.table);
    if (!keys) {
      keys = new Map();
      this.byTable.set(statement.table, keys);
    }
    keys.set(key, statement);
  }

  /** Everything held, by statement, and nothing held any more. */
  take(): [RowWrite, (readonly unknown[])[]][] {
    const taken = [...this.byStatement].map(([statement, rows]): [RowWrite, (readonly unknown[])[]] => [
      statement,
      [...rows.values()],
    ]);
    this.clear();
    return taken;
  }

  clear(): void {
    this.byStatement = new Map();
    this.byTable = new Map();
    this.count = 0;
  }
}

/** `undefined` as SQL NULL. */
export const nul = (value: unknown) => (value === undefined ? null : value);

/** Copies the defined members of `values` onto `target` (SQL NULL becomes an absent member). */
export function defined<T extends object>(target: T, values: Record<string, unknown>): T {
  for (const [key, value] of Object.entries(values))
    if (value !== null && value !== undefined) (target as Record<string, unknown>)[key] = value;
  return target;
}

/** How a record field is stored: as is, as JSON text, as 0/1, or as an integer (PostgreSQL may return text). */
type Kind = "value" | "json" | "bool" | "int";
/** A field, with how it is stored and (when not its snake_case name) its column. */
export type Field<T> = (keyof T & string) | [keyof T & string, Kind, string?];

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * Maps records to rows and back, one list of fields per table: SQL NULL is an absent member, JSON
 * columns are parsed, booleans are 0/1. One mapping per record type, no hand-written twins.
 */
export class RecordMap<T extends object> {
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
      if (kind === "bool") record[field] = value === 1 || value === true;
      else if (value !== null && value !== undefined)
        record[field] =
          kind === "json" ? JSON.parse(value as string) : kind === "int" ? Number(value) : value;
    }
    return record as T;
  }

  /**
   * The record as `from` would read it back once written (its fields only, absent for none, booleans
   * as booleans), sharing its JSON members: what a unit of work read ahead keeps of its own writes.
   */
  copy(record: T): T {
    const copy: Record<string, unknown> = {};
    for (const [field, kind] of this.fields) {
      const value = (record as Record<string, unknown>)[field];
      if (kind === "bool") copy[field] = value === true || value === 1;
      else if (value !== null && value !== undefined) copy[field] = value;
    }
    return copy as T;
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

  /** `insertSql` as a RowWrite; `key`: the table's key columns. */
  insertWrite(table: string, key: readonly string[]): RowWrite {
    return new RowWrite(table, (rows) => this.insertSql(table, rows), this.keyAt(key), false);
  }

  /** `upsertSql` as a RowWrite. */
  upsertWrite(table: string, key: readonly string[]): RowWrite {
    return new RowWrite(table, (rows) => this.upsertSql(table, key, rows), this.keyAt(key), true);
  }

  private keyAt(key: readonly string[]): number[] {
    return key.map((column) => {
      const at = this.columns.indexOf(column);
      if (at < 0) throw new Error(`${column} is not a column of this record`);
      return at;
    });
  }

  /** An insert of `rows` rows (one by default). */
  insertSql(table: string, rows = 1): string {
    const row = `(${marks(this.columns.length)})`;
    return `INSERT INTO ${table} (${this.columns.join(", ")}) VALUES ${Array.from({ length: rows }, () => row).join(", ")}`;
  }

  /** An upsert of every column on conflict with `key`, of `rows` rows (one by default). */
  upsertSql(table: string, key: readonly string[], rows = 1): string {
    const updates = this.columns
      .filter((c) => !key.includes(c))
      .map((c) => `${c} = excluded.${c}`)
      .join(", ");
    return `${this.insertSql(table, rows)} ON CONFLICT (${key.join(", ")}) DO UPDATE SET ${updates}`;
  }
}

/** Counts by a column (`SELECT column, count(*) AS n ... GROUP BY column`) as a record. */
export function countsOf(rows: readonly Row[], column: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const row of rows) counts[row[column] as string] = Number(row.n);
  return counts;
}

const MARKS: string[] = [];

/** `?, ?, ?` for `n` values. */
export function marks(n: number): string {
  let found = MARKS[n];
  if (found === undefined) {
    found = Array.from({ length: n }, () => "?").join(", ");
    MARKS[n] = found;
  }
  return found;
}

/**
 * `column` is one of a list bound as one parameter (`listParam`): one statement text for any number
 * of values, prepared once, where `IN (?, ?, …)` would be a text per length.
 */
export function oneOf(dialect: Dialect, column: string): string {
  return dialect === "postgres" ? `${column} = ANY(?)` : `${column} IN (SELECT value FROM json_each(?))`;
}

/** The parameter `oneOf` binds: an array on PostgreSQL, its JSON text on SQLite. */
export function listParam(dialect: Dialect, values: readonly string[]): unknown {
  return dialect === "postgres" ? values : JSON.stringify(values);
}

/** Rows per statement of a multi-row write: powers of two, so a write has at most seven texts. */
const CHUNKS = [64, 32, 16, 8, 4, 2, 1];

/**
 * Writes `rows` (each a row's values) with statements of several rows each, `text(n)` being the
 * statement of n rows: a round trip per 64 rows rather than per row, and at most seven texts to
 * prepare. `text` is asked once per size (keep what it builds).
 */
export async function runRows(
  sql: Sql,
  rows: readonly (readonly unknown[])[],
  text: (rows: number) => string,
): Promise<void> {
  let at = 0;
  for (const size of CHUNKS)
    while (rows.length - at >= size) {
      await sql.run(text(size), rows.slice(at, at + size).flat());
      at += size;
    }
}

/** `build(n)`, built once per n. */
export function bySize(build: (rows: number) => string): (rows: number) => string {
  const built = new Map<number, string>();
  return (rows) => {
    let text = built.get(rows);
    if (text === undefined) {
      text = build(rows);
      built.set(rows, text);
    }
    return text;
  };
}
