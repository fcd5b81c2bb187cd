/**
 * What only the PostgreSQL store has to promise: replicas that start together migrate the schema
 * once, a schema newer than this steward is refused, statements prepared before a schema change run
 * again, and its location never shows a password.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresStore } from "../../../src/hub/store/postgres.js";
import { POSTGRES_MIGRATIONS } from "../../../src/hub/store/postgres-migrations.js";
import { EnvironmentError } from "../../../src/model/errors.js";
import { startPostgresServer, type TestPostgresServer } from "../../helpers/postgres-server.js";

let server: TestPostgresServer;
beforeAll(async () => {
  server = await startPostgresServer();
});
afterAll(() => server?.dispose());

async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

describe("store (postgres) - migrations and location", () => {
  it("store - replicas starting at once on an empty database apply each migration exactly once", async () => {
    const url = await server.createDatabase();
    const stores = await Promise.all(
      Array.from({ length: 5 }, () => PostgresStore.open({ url, connections: 2 })),
    );
    try {
      const applied = await query<{ version: number; n: string }>(
        url,
        "SELECT version, count(*) AS n FROM schema_migrations GROUP BY version ORDER BY version",
      );
      expect(applied.map((r) => r.version)).toEqual(
        POSTGRES_MIGRATIONS.map((m) => m.version).sort((a, b) => a - b),
      );
      expect(applied.every((r) => Number(r.n) === 1)).toBe(true);
      // Every one of them works on the one schema.
      await stores[0]!.transaction((tx) => tx.meta.set("revision_seq", "3"));
      for (const store of stores) expect(await store.meta.get("revision_seq")).toBe("3");
    } finally {
      for (const store of stores) await store.close();
    }
  });

  it("store - a schema newer than this steward understands is refused, naming the versions", async () => {
    const url = await server.createDatabase();
    await (await PostgresStore.open({ url })).close();
    await query(
      url,
      "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 'now')",
    );
    const refused = await PostgresStore.open({ url }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(EnvironmentError);
    expect((refused as Error).message).toMatch(
      /schema version 999, newer than this steward understands .*: upgrade steward/,
    );
  });

  it("store - statements prepared before another replica changed the schema run again, in units and in reads", async () => {
    const url = await server.createDatabase();
    // One connection: the reads and the units run on the one that prepared the statements.
    const store = await PostgresStore.open({ url, connections: 1 });
    try {
      const node = {
        name: "web-1",
        transport: "nats" as const,
        spec: { transport: "nats", roots: ["/srv"] },
      };
      await store.transaction((tx) => tx.nodes.upsert(node as never));
      expect((await store.nodes.get("web-1"))?.transport).toBe("nats");
      expect((await store.transaction((tx) => tx.nodes.get("web-1")))?.transport).toBe("nats");
      // A newer replica's migration: the rows of `SELECT * FROM nodes` change shape under the
      // prepared statement, which the server then refuses to run as prepared.
      await query(url, "ALTER TABLE nodes ADD COLUMN note TEXT");
      expect((await store.nodes.get("web-1"))?.transport).toBe("nats");
      await query(url, "ALTER TABLE nodes ADD COLUMN other TEXT");
      expect((await store.transaction((tx) => tx.nodes.get("web-1")))?.transport).toBe("nats");
      expect((await store.nodes.list()).map((n) => n.name)).toEqual(["web-1"]);
    } finally {
      await store.close();
    }
  });

  it("store - a unit the server ended for idling in its transaction runs again, once committed, and the process lives on", async () => {
    const url = await server.createDatabase();
    const store = await PostgresStore.open({ url, connections: 1, idleInUnitMs: 200 });
    const crashes: unknown[] = [];
    const crashed = (error: unknown) => crashes.push(error);
    process.on("uncaughtException", crashed);
    try {
      let runs = 0;
      const counted = await store.transaction(async (tx) => {
        runs++;
        const seen = Number((await tx.meta.get("counter")) ?? "0");
        // The first run stalls (a paused process): the server ends its connection meanwhile.
        if (runs === 1) await new Promise((resolve) => setTimeout(resolve, 600));
        await tx.meta.set("counter", String(seen + 1));
        return seen + 1;
      });
      expect(runs).toBe(2);
      expect(counted).toBe(1);
      expect(await store.meta.get("counter")).toBe("1");
      // The pool's one connection was replaced: the next unit runs.
      await store.transaction((tx) => tx.meta.set("counter", "2"));
      expect(await store.meta.get("counter")).toBe("2");
      expect(crashes).toEqual([]);
    } finally {
      process.off("uncaughtException", crashed);
      await store.close();
    }
  });

  it("store - its location is the URL without the password, whatever the URL carried", async () => {
    const url = (await server.createDatabase()).replace("steward@", "steward:s3cret@");
    const store = await PostgresStore.open({ url });
    try {
      expect(store.location).not.toContain("s3cret");
      expect(store.location).toBe(url.replace(":s3cret", ""));
    } finally {
      await store.close();
    }
  });

  it("store - a server that is not there is an environment error naming the store, not its password", async () => {
    const refused = await PostgresStore.open({ url: "postgres://steward:s3cret@127.0.0.1:1/none" }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(EnvironmentError);
    expect((refused as Error).message).toMatch(
      /^cannot open the hub's store postgres:\/\/steward@127\.0\.0\.1:1\/none: /,
    );
    expect((refused as Error).message).not.toContain("s3cret");
  });
});
