/**
 * Migrations of an existing hub database: what an earlier steward left is brought up to today's
 * rules when a newer one opens it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { migrate, openConnection, openDatabase } from "../../src/hub/store/database.js";
import { MIGRATIONS } from "../../src/hub/store/migrations.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("hub - migrations", () => {
  it("hub - attempts an earlier hub left dispatched behind a newer generation end superseded, their outbox rows gone", async () => {
    dir = mkdtempSync(join(tmpdir(), "steward-migrate-"));
    const path = join(dir, "hub.db");
    const old = openDatabase(
      path,
      MIGRATIONS.filter((m) => m.version < 206),
    );
    const at = "2026-11-30T10:00:00.000Z";
    for (const [sha, seq] of [
      ["a".repeat(40), 1],
      ["b".repeat(40), 2],
    ] as const)
      old
        .prepare(
          "INSERT INTO revisions (sha, seq, branch, author_name, author_email, message, committed_at, synced_at, outcome) VALUES (?, ?, 'main', 't', 't@x', 'm', ?, ?, 'applied')",
        )
        .run(sha, seq, at, at);
    for (const generation of [1, 2])
      old
        .prepare(
          "INSERT INTO generations (instance_key, generation, assignment, node, hash, spec, rollout, budget, revision, created_at) VALUES ('app@n1', ?, 'app', 'n1', ?, '{}', '{}', '{}', ?, ?)",
        )
        .run(generation, `h${generation}`, (generation === 1 ? "a" : "b").repeat(40), at);
    old
      .prepare(
        "INSERT INTO instances (instance_key, assignment, node, generation, hash, revision) VALUES ('app@n1', 'app', 'n1', 2, 'h2', ?)",
      )
      .run("b".repeat(40));
    const attempt = old.prepare(
      "INSERT INTO attempts (id, instance_key, generation, assignment, node, status, created_at) VALUES (?, 'app@n1', ?, 'app', 'n1', ?, ?)",
    );
    attempt.run("OLD-DISPATCHED", 1, "dispatched", at);
    attempt.run("OLD-AMBIGUOUS", 1, "ambiguous", at);
    attempt.run("OLD-FAILED", 1, "failed", at);
    attempt.run("CURRENT", 2, "dispatched", at);
    old
      .prepare(
        "INSERT INTO outbox (attempt_id, node, bundle, created_at) VALUES ('OLD-DISPATCHED', 'n1', '{}', ?)",
      )
      .run(at);
    old.close();

    const store = new SqliteStore(path);
    try {
      expect(await store.attempts.get("OLD-DISPATCHED")).toMatchObject({
        status: "superseded",
        supersededBy: 2,
      });
      expect(await store.attempts.get("OLD-AMBIGUOUS")).toMatchObject({
        status: "superseded",
        supersededBy: 2,
      });
      expect((await store.attempts.get("OLD-FAILED"))!.status).toBe("failed");
      expect((await store.attempts.get("CURRENT"))!.status).toBe("dispatched");
      expect(await store.attempts.outbox()).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it("hub - two processes opening a new database at once apply each migration once; the second finds them done", () => {
    dir = mkdtempSync(join(tmpdir(), "steward-migrate-"));
    const path = join(dir, "hub.db");
    const first = openConnection(path);
    const second = openConnection(path);
    try {
      // The first reads what is applied (nothing), then the second migrates everything before the
      // first takes the write lock: the interleaving of two processes started together.
      let raced = false;
      const racing = MIGRATIONS.map((migration, i) =>
        i > 0
          ? migration
          : {
              ...migration,
              get version() {
                if (!raced) {
                  raced = true;
                  migrate(second, MIGRATIONS);
                }
                return migration.version;
              },
            },
      );
      migrate(first, racing);
      expect(raced).toBe(true);
      const versions = first.prepare("SELECT version FROM schema_migrations ORDER BY version").all();
      expect(versions).toEqual(
        MIGRATIONS.map((m) => ({ version: m.version })).sort((a, b) => a.version - b.version),
      );
    } finally {
      first.close();
      second.close();
    }
  });
});
