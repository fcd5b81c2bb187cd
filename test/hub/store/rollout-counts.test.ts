/**
 * What a rollout's gate counts, on every store: intents in flight hold slots and failed ones count
 * against maxFailures, except on skipped nodes (drained, transport not run here, silent) and
 * failures an operator's resume accepted.
 */
import { describe, expect, it } from "vitest";
import type { ConditionRecord, IntentStatus, SkipReason } from "../../../src/hub/records.js";
import type { Store, UnitOfWork } from "../../../src/hub/store/store.js";
import { intentOf, type StoreKind, storeKinds } from "./stores.js";

const AT = "2026-11-30T10:00:00.000Z";

async function storeWith(kind: StoreKind, members: Record<string, IntentStatus>): Promise<Store> {
  const store = await kind.fresh();
  await store.transaction(async (tx) => {
    for (const [node, status] of Object.entries(members)) {
      await tx.nodes.upsert({ name: node, transport: "local", spec: {} as never, revision: "r1" });
      await tx.intents.save(intentOf(`web@${node}`, { status }));
    }
  });
  return store;
}

function open(tx: UnitOfWork, node: string, type: ConditionRecord["type"], reason: string): Promise<void> {
  return tx.conditions.insert({
    id: `${type}-${node}-${reason}`,
    type,
    subjectKind: "node",
    subject: node,
    status: "open",
    since: AT,
    lastObserved: AT,
    reason,
    message: "m",
    evidence: {},
    tried: [],
    resolver: "operator",
    openedAt: AT,
  });
}

/** How each kind of skip is made, by the record the hub keeps for it. */
const SKIPS: [SkipReason, (tx: UnitOfWork, node: string) => Promise<unknown>][] = [
  ["drained", (tx, node) => tx.nodes.setDraining(node, true, { by: "alice", at: AT })],
  ["transport-not-run", (tx, node) => open(tx, node, "TransportDegraded", "TransportNotEnabled")],
  ["silent", (tx, node) => open(tx, node, "NodeSilent", "HeartbeatMissed")],
];

describe.each(storeKinds())("store ($name) - rollout counts", (kind) => {
  it.each(SKIPS)("store - a %s node holds no in-flight slot and counts as no failure", async (skip, make) => {
    const store = await storeWith(kind, {
      a: "dispatched",
      b: "ambiguous",
      c: "blocked",
      d: "stuck",
      e: "held",
    });
    const counts = async () => [
      await store.rollouts.countInFlight("web", "r1"),
      await store.rollouts.countFailed("web", "r1"),
    ];
    expect(await counts()).toEqual([2, 2]);
    await store.transaction(async (tx) => {
      await make(tx, "a");
      await make(tx, "c");
    });
    expect(await store.nodes.skip("a")).toBe(skip);
    expect(await store.nodes.skip("b")).toBeUndefined();
    expect(await counts()).toEqual([1, 1]);
    expect((await store.rollouts.failures("web", "r1", 10)).map((i) => i.instanceKey)).toEqual(["web@d"]);
    expect(await store.rollouts.skipped("web", "r1", 10)).toEqual([
      { instanceKey: "web@a", node: "a", status: "dispatched", skip },
      { instanceKey: "web@c", node: "c", status: "blocked", skip },
    ]);
  });

  it("store - a resume accepts the failures of now; a later one counts again", async () => {
    const store = await storeWith(kind, { a: "blocked", b: "dispatched" });
    const decision = await store.transaction((tx) =>
      tx.rollouts.recordDecision({
        assignment: "web",
        revision: "r1",
        decision: "resume",
        by: "alice",
        reason: "known",
        at: AT,
      }),
    );
    expect(decision).toMatchObject({ seq: 1, accepted: ["web@a"], by: "alice", reason: "known" });
    expect(await store.rollouts.countFailed("web", "r1")).toBe(0);
    await store.transaction(async (tx) =>
      tx.intents.save({ ...(await tx.intents.get("web@b", 1))!, status: "stuck" }),
    );
    expect((await store.rollouts.failures("web", "r1", 10)).map((i) => i.instanceKey)).toEqual(["web@b"]);
    expect(await store.rollouts.decision("web", "r1")).toEqual(decision);
  });
});
