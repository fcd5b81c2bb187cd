/**
 * What a rollout's gate counts, on a real SQLite store: intents in flight hold slots and failed
 * ones count against maxFailures, except on skipped nodes (drained, transport not run here,
 * silent) and failures an operator's resume accepted.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ConditionRecord, IntentRecord, IntentStatus, SkipReason } from "../../src/hub/records.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const AT = "2026-11-30T10:00:00.000Z";

function storeWith(members: Record<string, IntentStatus>): SqliteStore {
  dir = mkdtempSync(join(tmpdir(), "steward-counts-"));
  const store = new SqliteStore(join(dir, "hub.db"));
  for (const [node, status] of Object.entries(members)) {
    store.upsertNode({ name: node, transport: "local", spec: {} as never, revision: "r1" });
    const intent: IntentRecord = {
      instanceKey: `web@${node}`,
      generation: 1,
      assignment: "web",
      node,
      revision: "r1",
      hash: "h",
      state: "running",
      status,
      failures: 0,
      everConverged: false,
      createdAt: AT,
      updatedAt: AT,
    };
    store.saveIntent(intent);
  }
  return store;
}

function open(store: SqliteStore, node: string, type: ConditionRecord["type"], reason: string): void {
  store.insertCondition({
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
const SKIPS: [SkipReason, (store: SqliteStore, node: string) => void][] = [
  ["drained", (store, node) => store.setDraining(node, true, { by: "alice", at: AT })],
  ["transport-not-run", (store, node) => open(store, node, "TransportDegraded", "TransportNotEnabled")],
  ["silent", (store, node) => open(store, node, "NodeSilent", "HeartbeatMissed")],
];

describe("hub - rollout counts", () => {
  it.each(SKIPS)("hub - a %s node holds no in-flight slot and counts as no failure", (skip, make) => {
    const store = storeWith({ a: "dispatched", b: "ambiguous", c: "blocked", d: "stuck", e: "held" });
    expect([store.countInFlight("web", "r1"), store.countFailed("web", "r1")]).toEqual([2, 2]);
    make(store, "a");
    make(store, "c");
    expect(store.nodeSkip("a")).toBe(skip);
    expect(store.nodeSkip("b")).toBeUndefined();
    expect([store.countInFlight("web", "r1"), store.countFailed("web", "r1")]).toEqual([1, 1]);
    expect(store.rolloutFailures("web", "r1", 10).map((i) => i.instanceKey)).toEqual(["web@d"]);
    expect(store.rolloutSkipped("web", "r1", 10)).toEqual([
      { instanceKey: "web@a", node: "a", status: "dispatched", skip },
      { instanceKey: "web@c", node: "c", status: "blocked", skip },
    ]);
    store.close();
  });

  it("hub - a resume accepts the failures of now; a later one counts again", () => {
    const store = storeWith({ a: "blocked", b: "dispatched" });
    const decision = store.recordRolloutDecision({
      assignment: "web",
      revision: "r1",
      decision: "resume",
      by: "alice",
      reason: "known",
      at: AT,
    });
    expect(decision).toMatchObject({ seq: 1, accepted: ["web@a"], by: "alice", reason: "known" });
    expect(store.countFailed("web", "r1")).toBe(0);
    store.saveIntent({ ...store.intent("web@b", 1)!, status: "stuck" });
    expect(store.rolloutFailures("web", "r1", 10).map((i) => i.instanceKey)).toEqual(["web@b"]);
    expect(store.rolloutDecision("web", "r1")).toEqual(decision);
    store.close();
  });
});
