import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type MarkerAgent, natsNode, testBundle } from "../../helpers/marker-agent.js";
import { type NatsTestBed, startNatsTestBed } from "../../helpers/nats-testbed.js";

describe("nats transport - dispatch, apply, report, result", () => {
  let bed: NatsTestBed;
  let marker: MarkerAgent;

  beforeAll(async () => {
    bed = await startNatsTestBed({ nodes: ["web-1"] });
    marker = await bed.startAgent("web-1", {}, { heartbeatIntervalMs: 200 });
  });

  afterAll(async () => {
    await bed?.dispose();
  });

  it("nats transport - an attempt is applied once and its result and a converged report come back", async () => {
    const { hub, recorded } = bed;
    const bundle = testBundle("web-1", "web", 1);
    await hub.dispatch(bundle, natsNode("web-1"));
    await recorded.until(
      () => recorded.results.some((r) => r.attemptId === bundle.attemptId),
      "the attempt's result",
    );
    await recorded.until(
      () =>
        recorded.reports.some((r) => r.instances.some((i) => i.assignment === "web" && i.generation === 1)),
      "a report at generation 1",
    );
    const result = recorded.results.find((r) => r.attemptId === bundle.attemptId);
    expect(result).toMatchObject({ node: "web-1", assignment: "web", generation: 1, outcome: "succeeded" });
    expect(marker.applied).toEqual([{ attemptId: bundle.attemptId, assignment: "web", generation: 1 }]);
    const onDisk = JSON.parse(readFileSync(join(bed.dir, "web-1", "markers", "web.json"), "utf8"));
    expect(onDisk).toMatchObject({ generation: 1, hash: bundle.hash });
  });

  it("nats transport - the last report is kept in KV steward-observed for the hub to read", async () => {
    const { hub } = bed;
    const last = await hub.lastReports();
    expect(last.map((r) => r.node)).toEqual(["web-1"]);
    expect(last[0]?.instances.find((i) => i.assignment === "web")?.generation).toBe(1);
  });

  it("nats transport - heartbeats reach the hub", async () => {
    const { hub, recorded } = bed;
    await recorded.until(
      () => recorded.heartbeats.filter((h) => h.node === "web-1").length >= 2,
      "two heartbeats",
    );
    expect(hub.silentSince("web-1")).toBeUndefined();
  });

  it("nats transport - a report request makes the agent publish a fresh report", async () => {
    const { hub, recorded } = bed;
    const before = recorded.reports.length;
    await hub.requestReport(natsNode("web-1"));
    await recorded.until(() => recorded.reports.length > before, "a fresh report");
  });

  it("nats transport - a report request to a node with no agent connected is a transient NodeNotConnected", async () => {
    const { hub } = bed;
    await expect(hub.requestReport(natsNode("db-9"))).rejects.toMatchObject({
      failureClass: "transient",
      reason: "NodeNotConnected",
    });
  });

  it("nats transport - dispatching to a node on another transport is refused as permanent", async () => {
    const { hub } = bed;
    const node = { ...natsNode("web-1"), spec: { transport: "ssh" as const, roots: ["/srv"] } };
    await expect(hub.dispatch(testBundle("web-1", "web", 2), node)).rejects.toMatchObject({
      failureClass: "permanent",
      reason: "WrongTransport",
    });
  });
});
