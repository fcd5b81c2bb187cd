import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/hub/store/database.js";
import { GenerationConflictError, SqliteGenerationStore } from "../../src/hub/store/generations.js";
import type { NewGeneration, RevisionInfo } from "../../src/repo/store.js";
import { removeTempDirs, tempDir } from "../helpers/git.js";

afterAll(removeTempDirs);

function open() {
  const db = openDatabase(join(tempDir("steward-store-"), "hub.db"));
  return { db, store: new SqliteGenerationStore(db) };
}

const revision = (sha: string, message = `commit ${sha}`): RevisionInfo => ({
  sha: sha.padEnd(40, "0"),
  authorName: "A",
  authorEmail: "a@example.test",
  message,
  committedAt: "2026-01-01T00:00:00.000Z",
});

const generation = (key: string, n: number, hash = `sha256:${key}-${n}`): NewGeneration => {
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

const at = new Date("2026-02-01T00:00:00Z");

/** A store where revision "a" is applied with generation 1 of web@n1. */
function openWithFirstRevision() {
  const opened = open();
  opened.store.recordRevision({
    branch: "main",
    revision: revision("a"),
    outcome: "applied",
    generations: [generation("web@n1", 1)],
    at,
  });
  return opened;
}

describe("store", () => {
  it("store - the 101 contract tables keep their columns; 102 adds sync_events and sync_state.source", () => {
    const { db } = open();
    const columns = (table: string) =>
      (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name);
    expect(columns("revisions")).toEqual([
      "sha",
      "seq",
      "branch",
      "author_name",
      "author_email",
      "message",
      "committed_at",
      "synced_at",
      "outcome",
      "diagnostics",
      "superseded_by",
      "changed_assignments",
    ]);
    expect(columns("generations")).toEqual([
      "instance_key",
      "generation",
      "assignment",
      "node",
      "hash",
      "spec",
      "rollout",
      "budget",
      "revision",
      "created_at",
    ]);
    expect(columns("instances")).toEqual([
      "instance_key",
      "assignment",
      "node",
      "generation",
      "hash",
      "revision",
      "retired_at",
      "retired_by",
    ]);
    expect(columns("sync_state")).toEqual(["branch", "head", "last_good", "updated_at", "source"]);
    expect(columns("sync_events")).toEqual([
      "id",
      "branch",
      "kind",
      "head",
      "last_good",
      "message",
      "opened_at",
      "last_seen_at",
      "resolved_at",
    ]);
    db.close();
  });

  it("store - a generation that is not one above the last refuses the whole revision, writing nothing", () => {
    const { db, store } = openWithFirstRevision();
    const version = store.version();
    let error: unknown;
    try {
      store.recordRevision({
        branch: "main",
        revision: revision("b"),
        outcome: "applied",
        superseded: [revision("c")],
        generations: [generation("db@n1", 1), generation("web@n1", 1)],
        at,
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(GenerationConflictError);
    expect((error as GenerationConflictError).code).toBe("E_GENERATION_CONFLICT");
    expect(store.version()).toBe(version);
    expect(store.revision(revision("b").sha)).toBeUndefined();
    expect(store.revision(revision("c").sha)).toBeUndefined();
    expect([...store.currentInstances().keys()]).toEqual(["web@n1"]);
    expect(store.syncState("main")).toMatchObject({ head: revision("a").sha, lastGood: revision("a").sha });
    db.close();
  });

  it("store - an invalid revision moves the head but not the last good revision", () => {
    const { db, store } = openWithFirstRevision();
    const diagnostics = [
      { severity: "error" as const, code: "yaml/syntax", file: "a.yaml", line: 1, column: 2, message: "bad" },
    ];
    store.recordRevision({ branch: "main", revision: revision("b"), outcome: "invalid", diagnostics, at });
    expect(store.syncState("main")).toMatchObject({ head: revision("b").sha, lastGood: revision("a").sha });
    expect(store.revision(revision("b").sha)).toMatchObject({ outcome: "invalid", diagnostics });
    expect(store.currentInstances().get("web@n1")).toMatchObject({
      generation: 1,
      revision: revision("a").sha,
    });
    db.close();
  });

  it("store - one open event per branch and kind: opening again updates it, resolving closes it", () => {
    const { db, store } = open();
    const first = store.openEvent({ branch: "main", kind: "fetch-failed", message: "ECONNREFUSED" }, at);
    const again = store.openEvent(
      { branch: "main", kind: "fetch-failed", message: "ETIMEDOUT" },
      new Date("2026-02-01T00:01:00Z"),
    );
    expect(again).toMatchObject({
      id: first.id,
      message: "ETIMEDOUT",
      openedAt: first.openedAt,
      lastSeenAt: "2026-02-01T00:01:00.000Z",
    });
    store.openEvent(
      { branch: "main", kind: "force-push", message: "rewritten", head: "h", lastGood: "g" },
      at,
    );
    expect(store.openEvents("main").map((e) => e.kind)).toEqual(["fetch-failed", "force-push"]);
    expect(store.resolveEvent("main", "fetch-failed", at)).toMatchObject({
      id: first.id,
      resolvedAt: at.toISOString(),
    });
    expect(store.resolveEvent("main", "fetch-failed", at)).toBeUndefined();
    expect(store.openEvents().map((e) => e.kind)).toEqual(["force-push"]);
    expect(store.openEvent({ branch: "main", kind: "fetch-failed", message: "again" }, at).id).not.toBe(
      first.id,
    );
    db.close();
  });

  it("store - history lists generations newest first with their revisions and marks the current and retired ones", () => {
    const { db, store } = open();
    store.recordRevision({
      branch: "main",
      revision: revision("a", "first\n"),
      outcome: "applied",
      generations: [generation("web@n1", 1), generation("web@n2", 1)],
      at,
    });
    store.recordRevision({
      branch: "main",
      revision: revision("b", "second\n"),
      outcome: "applied",
      generations: [generation("web@n1", 2)],
      retired: ["web@n2"],
      at: new Date("2026-02-02T00:00:00Z"),
    });
    const history = store.history({ assignment: "web" });
    expect(
      history.map((e) => [
        e.instanceKey,
        e.generation,
        e.revision.message,
        e.current,
        e.retiredBy?.slice(0, 1),
      ]),
    ).toEqual([
      ["web@n1", 2, "second\n", true, undefined],
      ["web@n1", 1, "first\n", false, undefined],
      ["web@n2", 1, "first\n", false, "b"],
    ]);
    expect(store.history({ assignment: "web", node: "n2" })).toHaveLength(1);
    expect(store.generation("web@n1", 2)?.spec.roots).toEqual(["/srv"]);
    db.close();
  });
});
