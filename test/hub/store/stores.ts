/**
 * The stores the conformance suite runs against: every test in test/hub/store/ (and the other store
 * tests that take a StoreKind) runs once per store kind, on a fresh database each time (a SQLite
 * file in a temporary directory; a PostgreSQL database on a server the suite starts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onTestFinished } from "vitest";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import type { Store } from "../../../src/hub/store/store.js";

/** A fresh store, another connection to it, and how to throw it away. */
export interface OpenedStore {
  store: Store & { reopen(): Promise<Store> };
  dispose(): Promise<void>;
}

/** A kind of store: how to open a fresh one, and how to read its schema. */
export interface StoreKind {
  name: string;
  /** A fresh, empty store; `dispose` closes it (and every reopened one) and removes its database. */
  create(): Promise<OpenedStore>;
  /** A fresh, empty store, disposed of when the test finishes. */
  fresh(): Promise<OpenedStore["store"]>;
  /** A table's columns, in order (the schema is part of the contract the syncer's tables keep). */
  columns(store: Store, table: string): Promise<string[]>;
}

/** `fresh` from `create`: disposed of when the test finishes. */
function freshFrom(create: () => Promise<OpenedStore>): () => Promise<OpenedStore["store"]> {
  return async () => {
    const opened = await create();
    onTestFinished(() => opened.dispose());
    return opened.store;
  };
}

async function createSqlite(): Promise<OpenedStore> {
  const dir = mkdtempSync(join(tmpdir(), "steward-store-"));
  const path = join(dir, "hub.db");
  const opened: Store[] = [];
  const open = () => {
    const store = new SqliteStore(path);
    opened.push(store);
    return store;
  };
  return {
    store: Object.assign(open(), { reopen: async () => open() }),
    async dispose() {
      for (const each of opened) await each.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const sqlite: StoreKind = {
  name: "sqlite",
  create: createSqlite,
  fresh: freshFrom(createSqlite),
  async columns(store, table) {
    const db = (store as SqliteStore).db;
    return (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name);
  },
};

/** Every store kind the suite runs against. */
export function storeKinds(): StoreKind[] {
  return [sqlite];
}
