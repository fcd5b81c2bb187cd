/**
 * The hub's durable state in one SQLite file (better-sqlite3): the embedded default store. Every
 * state change runs in one transaction. The schema evolves by numbered migrations (migrations.ts),
 * applied in order on open and recorded in `schema_migrations`, so an old state directory upgrades
 * itself and a newer one is refused rather than misread.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { EnvironmentError } from "../../model/errors.js";
import { MIGRATIONS, type Migration } from "./migrations.js";

export type Db = Database.Database;

/** Opens (creating if needed) the SQLite database at `path` and brings its schema up to date. */
export function openDatabase(path: string, migrations: readonly Migration[] = MIGRATIONS): Db {
  const db = openConnection(path);
  migrate(db, migrations);
  return db;
}

/**
 * SQLite's own page cache per connection, KiB. better-sqlite3 builds SQLite with 16 MiB, which a
 * hub's file outgrows early (10,000 instances), so the cache fills and stays full: 16 MiB resident
 * per connection, over pages the kernel's page cache holds already. A few MiB keep the B-trees'
 * upper levels and the rows a rollout touches again; a miss is a read from the kernel's cache.
 */
const PAGE_CACHE_KIB = { writer: 4_096, reader: 2_048 };

/** Opens a connection to the SQLite database at `path` (creating it if needed), without migrating it. */
export function openConnection(path: string, role: "writer" | "reader" = "writer"): Db {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  let db: Db;
  try {
    db = new Database(path);
  } catch (error) {
    throw new EnvironmentError(`cannot open the hub database ${path}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  db.pragma(`cache_size = -${PAGE_CACHE_KIB[role]}`);
  return db;
}

/**
 * Applies the migrations the database has not seen yet, each in its own transaction. The transaction
 * takes the write lock first and looks again, so two processes opening a new file at once (a hub and
 * `steward status`, say) apply each migration once: the second finds it done.
 */
export function migrate(db: Db, migrations: readonly Migration[]): void {
  db.exec(
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
  );
  const applied = new Set(
    (db.prepare("SELECT version FROM schema_migrations").all() as { version: number }[]).map(
      (row) => row.version,
    ),
  );
  const newest = Math.max(0, ...applied);
  const known = Math.max(0, ...migrations.map((m) => m.version));
  if (newest > known)
    throw new EnvironmentError(
      `the hub database is at schema version ${newest}, newer than this steward understands (${known}): upgrade steward`,
    );
  for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
    if (applied.has(migration.version)) continue;
    db.transaction(() => {
      if (db.prepare("SELECT 1 FROM schema_migrations WHERE version = ?").get(migration.version)) return;
      db.exec(migration.sql);
      db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(
        migration.version,
        migration.name,
        new Date().toISOString(),
      );
    }).immediate();
  }
}
