import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type MarkerAgent, natsNode, testBundle } from "../../helpers/marker-agent.js";
import { type NatsTestBed, startNatsTestBed } from "../../helpers/nats-testbed.js";

describe("nats server restart - a rollout resumes after the server comes back", { timeout: 60_000 }, () => {
  let bed: NatsTestBed;
  const runs: MarkerAgent[] = [];
  const nodes = ["node-1", "node-2"];

  beforeAll(async () => {
    bed = await startNatsTestBed({ nodes, heartbeat: { intervalMs: 200, asHealth: true } });
    for (const node of nodes)
      runs.push(await bed.startAgent(node, { applyDelayMs: 150 }, { heartbeatIntervalMs: 200 }));
  });

  afterAll(async () => {
    await bed?.dispose();
  });

  it("nats server restart - attempts queued before the restart and dispatched after it all converge", async () => {
    const { hub, recorded } = bed;
    const before = nodes.flatMap((node) => ["a", "b", "c", "d"].map((app) => testBundle(node, app, 1)));
    for (const bundle of before) await hub.dispatch(bundle, natsNode(bundle.spec.node));
    await recorded.until(() => recorded.results.length >= 1, "the first result");
    await bed.server.restart();
    await recorded.until(
      () => recorded.healthEvents.some((h) => h.reason === "ServerDisconnected" && h.status === "recovered"),
      "the hub to reconnect",
    );
    const after = nodes.map((node) => testBundle(node, "e", 1));
    for (const bundle of after) await hub.dispatch(bundle, natsNode(bundle.spec.node));

    const all = [...before, ...after];
    await recorded.until(
      () => all.every((b) => recorded.results.some((r) => r.attemptId === b.attemptId)),
      "a result for every attempt",
      30_000,
    );
    for (const node of nodes)
      await recorded.until(
        () => recorded.reports.some((r) => r.node === node && r.instances.length === 5),
        `a report of ${node} with all five instances`,
        30_000,
      );
    // Each attempt ran once at most: a redelivery across the restart was replayed, not re-applied.
    const applied = runs.flatMap((r) => r.applied.map((a) => a.attemptId));
    expect(new Set(applied).size).toBe(applied.length);
    expect(applied.sort()).toEqual(all.map((b) => b.attemptId).sort());
    expect(
      recorded.healthEvents.filter((h) => h.reason === "ServerDisconnected").map((h) => h.status),
    ).toEqual(["degraded", "recovered"]);
  });

  it("nats server restart - nodes are not called silent for the hub's own outage", () => {
    const { recorded } = bed;
    expect(recorded.healthEvents.filter((h) => h.reason === "NodeSilent")).toEqual([]);
  });
});
