/** The syncer's GenerationStore port, on every store: revisions, generations, sync state and events. */
import { describe, expect, it } from "vitest";
import { GenerationConflictError } from "../../../src/hub/store/sql/generations.js";
import type { RevisionInfo } from "../../../src/repo/store.js";
import { generation, type StoreKind, storeKinds } from "./stores.js";

const revision = (sha: string, message = `commit ${sha}`): RevisionInfo => ({
  sha: sha.padEnd(40, "0"),
  authorName: "A",
  authorEmail: "a@example.test",
  message,
  committedAt: "2026-01-01T00:00:00.000Z",
});

const at = new Date("2026-02-01T00:00:00Z");

describe.each(storeKinds())("store ($name) - generations", (kind: StoreKind) => {
  const open = async () => {
    const hub = await kind.fresh();
    return { hub, store: hub.generations };
  };

  /** A store where revision "a" is applied with generation 1 of web@n1. */
  const openWithFirstRevision = async () => {
    const opened = await open();
    await opened.store.recordRevision({
      branch: "main",
      revision: revision("a"),
      outcome: "applied",
      generations: [generation("web@n1", 1)],
      at,
    });
    return opened;
  };

  it("store - the 101 contract tables keep their columns; 102 adds sync_events and sync_state.source", async () => {
    const { hub } = await open();
    const columns = (table: string) => kind.columns(hub, table);
    expect(await columns("revisions")).toEqual([
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
    expect(await columns("generations")).toEqual([
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
    expect(await columns("instances")).toEqual([
      "instance_key",
      "assignment",
      "node",
      "generation",
      "hash",
      "revision",
      "retired_at",
      "retired_by",
    ]);
    expect(await columns("sync_state")).toEqual(["branch", "head", "last_good", "updated_at", "source"]);
    expect(await columns("sync_events")).toEqual([
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
  });

  it("store - a generation that is not one above the last refuses the whole revision, writing nothing", async () => {
    const { store } = await openWithFirstRevision();
    const version = await store.version();
    let error: unknown;
    try {
      await store.recordRevision({
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
    expect(await store.version()).toBe(version);
    expect(await store.revision(revision("b").sha)).toBeUndefined();
    expect(await store.revision(revision("c").sha)).toBeUndefined();
    expect([...(await store.currentInstances()).keys()]).toEqual(["web@n1"]);
    expect(await store.syncState("main")).toMatchObject({
      head: revision("a").sha,
      lastGood: revision("a").sha,
    });
  });

  it("store - a revision of many instances records each generation and instance, whatever the count", async () => {
    // 101 = 64 + 32 + 4 + 1: every size of multi-row statement that count takes, and one alone.
    const { hub, store } = await openWithFirstRevision();
    const keys = Array.from({ length: 100 }, (_, i) => `app@n${String(i).padStart(3, "0")}`);
    await store.recordRevision({
      branch: "main",
      revision: revision("b"),
      outcome: "applied",
      generations: [generation("web@n1", 2), ...keys.map((key) => generation(key, 1))],
      at,
    });
    const current = await store.currentInstances();
    expect([...current.keys()].sort()).toEqual([...keys, "web@n1"].sort());
    expect(current.get("web@n1")).toMatchObject({ generation: 2, hash: "sha256:web@n1-2" });
    expect(current.get("app@n099")).toMatchObject({ generation: 1, hash: "sha256:app@n099-1" });
    expect((await hub.desired.generationsOf(revision("b").sha)).length).toBe(101);
    expect((await store.generation("app@n042", 1))?.spec.node).toBe("n042");
    // The next revision goes on from each instance's own last generation.
    await expect(
      store.recordRevision({
        branch: "main",
        revision: revision("c"),
        outcome: "applied",
        generations: [generation("app@n000", 2), generation("app@n099", 3)],
        at,
      }),
    ).rejects.toThrow(/generation 3 of app@n099 is not one above its last \(1\)/);
  });

  it("store - an invalid revision moves the head but not the last good revision", async () => {
    const { store } = await openWithFirstRevision();
    const diagnostics = [
      { severity: "error" as const, code: "yaml/syntax", file: "a.yaml", line: 1, column: 2, message: "bad" },
    ];
    await store.recordRevision({
      branch: "main",
      revision: revision("b"),
      outcome: "invalid",
      diagnostics,
      at,
    });
    expect(await store.syncState("main")).toMatchObject({
      head: revision("b").sha,
      lastGood: revision("a").sha,
    });
    expect(await store.revision(revision("b").sha)).toMatchObject({ outcome: "invalid", diagnostics });
    expect((await store.currentInstances()).get("web@n1")).toMatchObject({
      generation: 1,
      revision: revision("a").sha,
    });
  });

  it("store - one open event per branch and kind: opening again updates it, resolving closes it", async () => {
    const { store } = await open();
    const first = await store.openEvent(
      { branch: "main", kind: "fetch-failed", message: "ECONNREFUSED" },
      at,
    );
    const again = await store.openEvent(
      { branch: "main", kind: "fetch-failed", message: "ETIMEDOUT" },
      new Date("2026-02-01T00:01:00Z"),
    );
    expect(again).toMatchObject({
      id: first.id,
      message: "ETIMEDOUT",
      openedAt: first.openedAt,
      lastSeenAt: "2026-02-01T00:01:00.000Z",
    });
    await store.openEvent(
      { branch: "main", kind: "force-push", message: "rewritten", head: "h", lastGood: "g" },
      at,
    );
    expect((await store.openEvents("main")).map((e) => e.kind)).toEqual(["fetch-failed", "force-push"]);
    expect(await store.resolveEvent("main", "fetch-failed", at)).toMatchObject({
      id: first.id,
      resolvedAt: at.toISOString(),
    });
    expect(await store.resolveEvent("main", "fetch-failed", at)).toBeUndefined();
    expect((await store.openEvents()).map((e) => e.kind)).toEqual(["force-push"]);
    expect(
      (await store.openEvent({ branch: "main", kind: "fetch-failed", message: "again" }, at)).id,
    ).not.toBe(first.id);
  });

  it("store - history lists generations newest first with their revisions and marks the current and retired ones", async () => {
    const { store } = await open();
    await store.recordRevision({
      branch: "main",
      revision: revision("a", "first\n"),
      outcome: "applied",
      generations: [generation("web@n1", 1), generation("web@n2", 1)],
      at,
    });
    await store.recordRevision({
      branch: "main",
      revision: revision("b", "second\n"),
      outcome: "applied",
      generations: [generation("web@n1", 2)],
      retired: ["web@n2"],
      at: new Date("2026-02-02T00:00:00Z"),
    });
    const history = await store.history({ assignment: "web" });
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
    expect(await store.history({ assignment: "web", node: "n2" })).toHaveLength(1);
    expect((await store.generation("web@n1", 2))?.spec.roots).toEqual(["/srv"]);
  });
});
