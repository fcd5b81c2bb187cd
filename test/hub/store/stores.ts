/**
 * The stores the conformance suite runs against: every test in test/hub/store/ (and the other store
 * tests that take a StoreKind) runs once per store kind, on a fresh database each time (a SQLite
 * file in a temporary directory; a PostgreSQL database on a server the suite starts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, onTestFinished } from "vitest";
import type { AttemptRecord, IntentRecord } from "../../../src/hub/records.js";
import { PostgresStore } from "../../../src/hub/store/postgres.js";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import type { Store } from "../../../src/hub/store/store.js";
import type { NewGeneration } from "../../../src/repo/store.js";
import { startPostgresServer, type TestPostgresServer } from "../../helpers/postgres-server.js";

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

/** The test file's PostgreSQL server, started when first needed and stopped after the file. */
let server: Promise<TestPostgresServer> | undefined;
afterAll(async () => {
  const started = server;
  server = undefined;
  if (started) await (await started).dispose();
});

/** The database URL of each PostgreSQL store opened, to read its schema. */
const urls = new WeakMap<Store, string>();

async function createPostgres(): Promise<OpenedStore> {
  server ??= startPostgresServer();
  const url = await (await server).createDatabase();
  const opened: Store[] = [];
  const open = async () => {
    const store = await PostgresStore.open({ url, connections: 4 });
    urls.set(store, url);
    opened.push(store);
    return store;
  };
  return {
    store: Object.assign(await open(), { reopen: open }),
    async dispose() {
      for (const each of opened) await each.close();
    },
  };
}

const postgres: StoreKind = {
  name: "postgres",
  create: createPostgres,
  fresh: freshFrom(createPostgres),
  async columns(store, table) {
    const client = new pg.Client({ connectionString: urls.get(store)! });
    await client.connect();
    try {
      const rows = await client.query<{ column_name: string }>(
        "SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position",
        [table],
      );
      return rows.rows.map((r) => r.column_name);
    } finally {
      await client.end();
    }
  },
};

/** Every store kind the suite runs against. */
export function storeKinds(): StoreKind[] {
  return [sqlite, postgres];
}

/** Generation `n` of instance `key` (`assignment@node`) as the syncer records it: a spec with nothing in it. */
export const generation = (key: string, n: number, hash = `sha256:${key}-${n}`): NewGeneration => {
  const [assignment, node] = key.split("@") as [string, string];
  return {
    instanceKey: key,
    generation: n,
    assignment,
    node,
    hash,
    spec: { assignment, node, state: "running", dependsOn: [], roots: ["/srv"], resources: [], probes: [] },
    rollout: { stage: "apply" },
    budget: { attempts: 5, withinMs: 1000 },
  };
};

/** An intent of instance `key` at generation 1 of revision r1, with `fields` over it. */
export function intentOf(key: string, fields: Partial<IntentRecord> = {}): IntentRecord {
  const [assignment, node] = key.split("@") as [string, string];
  return {
    instanceKey: key,
    generation: 1,
    assignment,
    node,
    revision: "r1",
    hash: "h",
    state: "running",
    status: "pending",
    failures: 0,
    everConverged: false,
    createdAt: "2026-11-30T10:00:00.000Z",
    updatedAt: "2026-11-30T10:00:00.000Z",
    ...fields,
  };
}

/** Attempt `n` (id `A` and n in `digits` digits) on node `n<n>` of assignment web, queued at `createdAt`, with `fields` over it. */
export function attemptOf(
  n: number,
  createdAt: string,
  fields: Partial<AttemptRecord> = {},
  digits = 3,
): AttemptRecord {
  return {
    id: `A${String(n).padStart(digits, "0")}`,
    instanceKey: `web@n${n}`,
    generation: 1,
    assignment: "web",
    node: `n${n}`,
    status: "queued",
    createdAt,
    ...fields,
  };
}
