import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { SyncOutcome } from "../../src/repo/syncer.js";
import { removeTempDirs } from "../helpers/git.js";
import { assignmentYaml, nodeYaml, smallFleet } from "./fleet.js";
import { type Harness, harness, MODES } from "./harness.js";

function applied(outcome: SyncOutcome): Extract<SyncOutcome, { kind: "applied" }> {
  if (outcome.kind !== "applied") throw new Error(`expected applied, got ${JSON.stringify(outcome)}`);
  return outcome;
}

function generationsOf(outcome: SyncOutcome): Record<string, number> {
  return Object.fromEntries(applied(outcome).generations.map((g) => [g.instanceKey, g.generation]));
}

describe.each(MODES)("syncer over %s", (mode) => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });
  afterAll(removeTempDirs);

  it("syncer - first sync records generation 1 for every instance with its revision", async () => {
    h = await harness(mode, smallFleet());
    const head = h.repo.rev();
    const outcome = applied(await h.syncer.sync());
    expect(outcome.head).toBe(head);
    expect(generationsOf(outcome)).toEqual({ "db@db-1": 1, "web@web-1": 1, "web@web-2": 1 });
    expect(outcome.revision).toMatchObject({
      sha: head,
      authorName: "Test Author",
      authorEmail: "author@example.test",
      message: "initial\n",
    });
    const current = await h.store.currentInstances();
    expect([...current.keys()].sort()).toEqual(["db@db-1", "web@web-1", "web@web-2"]);
    expect(current.get("web@web-1")).toMatchObject({ generation: 1, revision: head });
    expect(await h.store.syncState("main")).toMatchObject({ head, lastGood: head });
    expect(await h.store.revision(head)).toMatchObject({
      outcome: "applied",
      changedAssignments: ["db", "web"],
    });
    const record = await h.store.generation("web@web-1", 1);
    expect(record?.spec.resources[0]).toMatchObject({ kind: "file", content: "web v1\n" });
  });

  it("syncer - a sync without new commits is up to date and changes nothing", async () => {
    h = await harness(mode, smallFleet());
    await h.syncer.sync();
    const version = await h.store.version();
    const outcome = await h.syncer.sync();
    expect(outcome).toMatchObject({ kind: "up-to-date", head: h.repo.rev(), lastGood: h.repo.rev() });
    expect(await h.store.version()).toBe(version);
  });

  it("syncer - a changed assignment gets the next generation on each of its nodes, nothing else moves", async () => {
    h = await harness(mode, smallFleet());
    await h.syncer.sync();
    const sha = h.commit("web v2", {
      "assignments/web.yaml": assignmentYaml("web", { selector: { role: "web" }, content: "web v2\n" }),
    });
    const outcome = applied(await h.syncer.sync());
    expect(generationsOf(outcome)).toEqual({ "web@web-1": 2, "web@web-2": 2 });
    expect(outcome.unchanged).toBe(1);
    expect(outcome.changedAssignments).toEqual(["web"]);
    expect((await h.store.currentInstances()).get("db@db-1")).toMatchObject({ generation: 1 });
    expect((await h.store.currentInstances()).get("web@web-2")).toMatchObject({
      generation: 2,
      revision: sha,
    });
  });

  it("syncer - a revert back to older content is a new generation carrying the old hash", async () => {
    h = await harness(mode, smallFleet());
    await h.syncer.sync();
    const first = (await h.store.currentInstances()).get("db@db-1")!.hash;
    h.commit("db v2", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
    });
    await h.syncer.sync();
    const second = (await h.store.currentInstances()).get("db@db-1")!.hash;
    h.commit("back to db v1", { "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"] }) });
    const outcome = applied(await h.syncer.sync());
    expect(generationsOf(outcome)).toEqual({ "db@db-1": 3 });
    const now = (await h.store.currentInstances()).get("db@db-1")!;
    expect(second).not.toBe(first);
    expect(now).toMatchObject({ generation: 3, hash: first });
    expect((await h.store.history({ assignment: "db" })).map((e) => [e.generation, e.hash])).toEqual([
      [3, first],
      [2, second],
      [1, first],
    ]);
  });

  it("syncer - renaming a file without changing its content makes no new generation", async () => {
    h = await harness(mode, smallFleet());
    await h.syncer.sync();
    const db = smallFleet()["assignments/db.yaml"]!;
    h.commit("move db", { "assignments/db.yaml": null, "assignments/data/database.yaml": db });
    const outcome = applied(await h.syncer.sync());
    expect(outcome.generations).toEqual([]);
    expect(outcome.retired).toEqual([]);
    expect(outcome.unchanged).toBe(3);
    expect((await h.store.currentInstances()).get("db@db-1")).toMatchObject({ generation: 1 });
  });

  it("syncer - a node joining a selector gets generation 1, one leaving is retired, and its return is a new generation", async () => {
    h = await harness(mode, smallFleet());
    await h.syncer.sync();
    h.commit("web-3", { "nodes/web-3.yaml": nodeYaml("web-3", { role: "web" }) });
    expect(generationsOf(await h.syncer.sync())).toEqual({ "web@web-3": 1 });

    const leave = h.commit("web-2 leaves web", { "nodes/web-2.yaml": nodeYaml("web-2", { role: "spare" }) });
    const left = applied(await h.syncer.sync());
    expect(left.generations).toEqual([]);
    expect(left.retired).toEqual(["web@web-2"]);
    expect((await h.store.currentInstances()).get("web@web-2")).toMatchObject({
      generation: 1,
      retiredBy: leave,
    });

    h.commit("web-2 is back", { "nodes/web-2.yaml": nodeYaml("web-2", { role: "web" }) });
    expect(generationsOf(await h.syncer.sync())).toEqual({ "web@web-2": 2 });
    const back = (await h.store.currentInstances()).get("web@web-2")!;
    expect(back.retiredAt).toBeUndefined();
    expect(back.generation).toBe(2);
  });

  it("syncer - an invalid commit between two valid ones advances nothing; the next valid one proceeds", async () => {
    h = await harness(mode, smallFleet());
    const good = h.repo.rev();
    await h.syncer.sync();
    const bad = h.commit("db on a node that does not exist", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-9"], content: "db v2\n" }),
    });
    const invalid = await h.syncer.sync();
    expect(invalid).toMatchObject({ kind: "invalid", head: bad, lastGood: good });
    const diagnostics = invalid.kind === "invalid" ? invalid.diagnostics : [];
    expect(diagnostics).toContainEqual(
      expect.objectContaining({ code: "node/undeclared", file: "assignments/db.yaml", line: 6, column: 11 }),
    );
    expect((await h.store.currentInstances()).get("db@db-1")).toMatchObject({
      generation: 1,
      revision: good,
    });
    expect(await h.store.syncState("main")).toMatchObject({ head: bad, lastGood: good });
    expect(await h.store.revision(bad)).toMatchObject({ outcome: "invalid" });
    expect((await h.store.revision(bad))?.diagnostics[0]?.code).toBe("node/undeclared");
    expect(await h.syncer.sync()).toMatchObject({ kind: "up-to-date", head: bad, lastGood: good });

    const fixed = h.commit("db v2 on db-1", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
    });
    const outcome = applied(await h.syncer.sync());
    expect(generationsOf(outcome)).toEqual({ "db@db-1": 2 });
    expect(outcome.superseded).toEqual([]);
    expect(await h.store.syncState("main")).toMatchObject({ head: fixed, lastGood: fixed });
  });

  it("syncer - several commits in one fetch: the head wins and the others are recorded superseded by it", async () => {
    h = await harness(mode, smallFleet());
    await h.syncer.sync();
    const c1 = h.repo.commit("web v2", {
      "assignments/web.yaml": assignmentYaml("web", { selector: { role: "web" }, content: "web v2\n" }),
    });
    const c2 = h.repo.commit("web v3", {
      "assignments/web.yaml": assignmentYaml("web", { selector: { role: "web" }, content: "web v3\n" }),
    });
    const c3 = h.repo.commit("web v4 and db v2", {
      "assignments/web.yaml": assignmentYaml("web", { selector: { role: "web" }, content: "web v4\n" }),
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
    });
    h.push();
    const outcome = applied(await h.syncer.sync());
    expect(outcome.head).toBe(c3);
    expect(outcome.superseded).toEqual([c1, c2]);
    expect(generationsOf(outcome)).toEqual({ "db@db-1": 2, "web@web-1": 2, "web@web-2": 2 });
    expect(await h.store.revision(c1)).toMatchObject({ outcome: "superseded", supersededBy: c3 });
    expect(await h.store.revision(c2)).toMatchObject({ outcome: "superseded", supersededBy: c3 });
    expect((await h.store.revisions("main")).map((r) => [r.sha, r.outcome])).toEqual([
      [c3, "applied"],
      [c2, "superseded"],
      [c1, "superseded"],
      [h.repo.rev("HEAD~3"), "applied"],
    ]);
    expect((await h.store.generation("web@web-1", 2))?.spec.resources[0]).toMatchObject({
      content: "web v4\n",
    });
  });

  it("syncer - generations continue from the store after a restart, never reused", async () => {
    h = await harness(mode, smallFleet());
    await h.syncer.sync();
    h.commit("db v2", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
    });
    await h.syncer.sync();
    h.syncer.close();
    h.syncer = h.restart();
    h.commit("db v3", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v3\n" }),
    });
    expect(generationsOf(await h.syncer.sync())).toEqual({ "db@db-1": 3 });
  });
});

describe("syncer on a large commit", () => {
  afterAll(removeTempDirs);

  it("syncer - a commit adding 2000 assignments is synced in one pass, and only the one changed later moves", {
    timeout: 90_000,
  }, async () => {
    const h = await harness("path", smallFleet());
    try {
      await h.syncer.sync();
      const files: Record<string, string> = {};
      for (let i = 0; i < 2000; i++)
        files[`assignments/bulk/app-${String(i).padStart(4, "0")}.yaml`] = assignmentYaml(`app-${i}`, {
          nodes: ["db-1"],
        });
      h.commit("2000 assignments", files);
      const bulk = applied(await h.syncer.sync());
      expect(bulk.generations).toHaveLength(2000);
      expect(bulk.unchanged).toBe(3);
      h.commit("one of them changes", {
        "assignments/bulk/app-1234.yaml": assignmentYaml("app-1234", { nodes: ["db-1"], content: "v2\n" }),
      });
      expect(generationsOf(await h.syncer.sync())).toEqual({ "app-1234@db-1": 2 });
    } finally {
      await h.close();
    }
  });
});
