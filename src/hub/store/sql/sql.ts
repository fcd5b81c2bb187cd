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

  insertSql(table: string): string {
    return `INSERT INTO ${table} (${this.columns.join(", ")}) VALUES (${this.columns.map(() => "?").join(", ")})`;
  }

  /** An upsert of every column on conflict with `key`. */
  upsertSql(table: string, key: readonly string[]): string {
    const updates = this.columns
      .filter((c) => !key.includes(c))
      .map((c) => `${c} = excluded.${c}`)
      .join(", ");
    return `${this.insertSql(table)} ON CONFLICT (${key.join(", ")}) DO UPDATE SET ${updates}`;
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
