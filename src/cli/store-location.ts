/**
 * Where the hub's store is, as `--store` and `STEWARD_STORE` name it: `sqlite:PATH` (the embedded
 * default, `<state>/hub.db`) or `postgres://USER@HOST[:PORT]/DATABASE` (a password in the URL, or in
 * PGPASSWORD or ~/.pgpass). A running hub records its store in `<state>/hub.json` (never with a
 * password), so the commands run beside it find it without the flag.
 */
import { resolve } from "node:path";
import { withoutPassword } from "../hub/store/location.js";
import type { Store } from "../hub/store/store.js";
import { UsageError } from "../model/errors.js";

/** A store location, parsed. */
export type StoreLocation = { kind: "sqlite"; path: string } | { kind: "postgres"; url: string };

/** Parses a store location; a relative SQLite path is taken from `cwd`. Throws UsageError for anything else. */
export function parseStoreLocation(text: string, cwd: string): StoreLocation {
  const given = text.trim();
  if (/^postgres(ql)?:\/\//.test(given)) return { kind: "postgres", url: given };
  const sqlite = /^sqlite:(.+)$/.exec(given)?.[1];
  if (sqlite) return { kind: "sqlite", path: resolve(cwd, sqlite) };
  throw new UsageError(
    `--store ${JSON.stringify(given)}: give sqlite:PATH (e.g. sqlite:.steward/hub.db) or postgres://USER@HOST[:PORT]/DATABASE`,
    { given },
  );
}

/** The location as it may be shown and recorded: a PostgreSQL URL without its password. */
export function describeStoreLocation(location: StoreLocation): string {
  return location.kind === "sqlite" ? `sqlite:${location.path}` : withoutPassword(location.url);
}

/** Opens the store at `location` (PostgreSQL: connecting, and migrating it once if need be). */
export async function openStoreAt(location: StoreLocation): Promise<Store> {
  if (location.kind === "sqlite") {
    const { SqliteStore } = await import("../hub/store/sqlite.js");
    return new SqliteStore(location.path);
  }
  const { PostgresStore } = await import("../hub/store/postgres.js");
  return PostgresStore.open({ url: location.url });
}
