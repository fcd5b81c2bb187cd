/**
 * What a hub reads for many nodes at once (its start, a takeover, a fleet declared by one sync), on
 * every store: one query answers for all of them what a query per node answered.
 */
import { describe, expect, it } from "vitest";
import { attemptOf, generation, intentOf, storeKinds } from "./stores.js";

const AT = "2026-12-06T12:00:00.000Z";

describe.each(storeKinds())("store ($name) - reads for a fleet", (kind) => {
  it("store - live instance keys, nodes with intents in a status and open attempts, for several nodes at once", async () => {
    const store = await kind.fresh();
    const keys = ["web@n1", "db@n1", "web@n2", "web@n3", "db@n3"];
    await store.generations.recordRevision({
      branch: "main",
      revision: {
        sha: "a".repeat(40),
        authorName: "A",
        authorEmail: "a@example.test",
        message: "a",
        committedAt: AT,
      },
      outcome: "applied",
      generations: keys.map((key) => generation(key, 1)),
      retired: [],
      at: new Date(AT),
    });
    await store.generations.recordRevision({
      branch: "main",
      revision: {
        sha: "b".repeat(40),
        authorName: "A",
        authorEmail: "a@example.test",
        message: "b",
        committedAt: AT,
      },
      outcome: "applied",
      generations: [],
      retired: ["db@n3"],
      at: new Date(AT),
    });
    await store.transaction(async (tx) => {
      await tx.intents.save(intentOf("web@n1", { status: "backoff", createdAt: AT, updatedAt: AT }));
      await tx.intents.save(intentOf("web@n2", { status: "converged", createdAt: AT, updatedAt: AT }));
      await tx.intents.save(intentOf("web@n3", { status: "stuck", createdAt: AT, updatedAt: AT }));
      await tx.intents.save(intentOf("db@n1", { status: "stuck", createdAt: AT, updatedAt: AT }));
      for (const [n, status] of [
        [1, "dispatched"],
        [2, "succeeded"],
        [3, "ambiguous"],
        [4, "queued"],
      ] as const)
        await tx.attempts.insert(attemptOf(n, AT, { status }), "{}");
    });
    for (const reads of [store, await store.reopen()]) {
      expect(await reads.desired.activeKeysOfNodes(["n3", "n1", "n9"])).toEqual([
        "db@n1",
        "web@n1",
        "web@n3",
      ]);
      expect(await reads.desired.activeKeysOfNodes([])).toEqual([]);
      expect(await reads.intents.nodesWith(["backoff", "stuck"])).toEqual(["n1", "n3"]);
      expect(await reads.intents.nodesWith(["converged"])).toEqual(["n2"]);
      expect((await reads.attempts.openOfNodes(["n1", "n2", "n3"])).map((a) => [a.id, a.status])).toEqual([
        ["A001", "dispatched"],
        ["A003", "ambiguous"],
      ]);
      expect(await reads.attempts.openOfNodes([])).toEqual([]);
    }
  });

  it("store - the policies a revision declares are read in one query and written only where they changed", async () => {
    const store = await kind.fresh();
    const budget = { attempts: 3, window: "1h", backoff: { initial: "10s", max: "5m" } } as never;
    const canary = { stage: "auto", canary: { count: 1 } } as never;
    const save = (revision: string, policies: [string, unknown][]) =>
      store.transaction((tx) =>
        tx.desired.savePolicies(
          revision,
          policies.map(([assignment, rollout]) => ({ assignment, rollout: rollout as never, budget })),
        ),
      );
    expect(
      await save("r1", [
        ["web", canary],
        ["db", { stage: "auto" }],
      ]),
    ).toEqual(["web", "db"]);
    expect(
      await save("r2", [
        ["web", canary],
        ["db", { stage: "auto" }],
      ]),
    ).toEqual([]);
    expect(
      await save("r3", [
        ["db", { stage: "manual" }],
        ["web", canary],
        ["cache", { stage: "auto" }],
      ]),
    ).toEqual(["db", "cache"]);
    expect(await save("r4", [])).toEqual([]);
  });
});
