import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SilenceChange } from "../../../src/transport/nats/hub.js";
import { natsNode, testBundle } from "../../helpers/marker-agent.js";
import { type NatsTestBed, startNatsTestBed } from "../../helpers/nats-testbed.js";

const BEAT_MS = 100;

describe("nats heartbeats - silence raises a signal and the next beat clears it, by watching", () => {
  let bed: NatsTestBed;
  const changes: SilenceChange[] = [];
  const start = () => bed.startAgent("web-1", { withService: true }, { heartbeatIntervalMs: BEAT_MS });

  beforeAll(async () => {
    bed = await startNatsTestBed({
      nodes: ["web-1"],
      heartbeat: { intervalMs: BEAT_MS, asHealth: true },
      onSilence: (change) => {
        changes.push(change);
      },
    });
  });

  afterAll(async () => {
    await bed?.dispose();
  });

  it("nats heartbeats - a node expected but never heard is silent since the hub started watching", async () => {
    const { hub, recorded } = bed;
    await recorded.until(() => hub.silentSince("web-1") !== undefined, "web-1 to be silent");
    expect(changes).toEqual([{ status: "silent", node: "web-1", since: hub.silentSince("web-1") }]);
    expect(recorded.healthEvents).toContainEqual(
      expect.objectContaining({ status: "degraded", node: "web-1", reason: "NodeSilent" }),
    );
  });

  it("nats heartbeats - the node's first beat clears the silence", async () => {
    const { hub, recorded } = bed;
    await start();
    await recorded.until(() => hub.silentSince("web-1") === undefined, "web-1 to beat");
    const last = recorded.healthEvents.filter((h) => h.reason === "NodeSilent").at(-1);
    expect(last).toMatchObject({ status: "recovered", node: "web-1" });
    expect(recorded.heartbeats.some((h) => h.node === "web-1")).toBe(true);
    expect(changes.at(-1)).toMatchObject({ status: "heard", node: "web-1" });
  });

  it("nats heartbeats - an instance with a running service beats too, and both fall silent when the agent stops", async () => {
    const { hub, recorded } = bed;
    const bundle = testBundle("web-1", "web", 1);
    await hub.dispatch(bundle, natsNode("web-1"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === bundle.attemptId), "the result");
    await recorded.until(
      () => hub.silent().length === 0 && recorded.heartbeats.length > 3,
      "beats after the service started",
    );
    const stoppedAt = Date.now();
    await bed.stopAgent("web-1");
    await recorded.until(
      () => hub.silentSince("web-1") !== undefined && hub.silentSince("web-1", "web") !== undefined,
      "node and instance silent",
    );
    // Raised by a timer after about three missed beats, not at the next poll of anything.
    const since = hub.silentSince("web-1") as Date;
    expect(since.getTime()).toBeLessThanOrEqual(stoppedAt + 5);
    expect(recorded.healthEvents).toContainEqual(
      expect.objectContaining({
        status: "degraded",
        node: "web-1",
        assignment: "web",
        reason: "InstanceSilent",
      }),
    );
    await start();
    await recorded.until(
      () => hub.silentSince("web-1") === undefined && hub.silentSince("web-1", "web") === undefined,
      "both beating again",
    );
  });

  it("nats heartbeats - a service stopped on purpose says so and is not called silent", async () => {
    const { hub, recorded } = bed;
    const stop = testBundle("web-1", "web", 2, "stopped");
    await hub.dispatch(stop, natsNode("web-1"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === stop.attemptId), "the result");
    const raised = recorded.healthEvents.length;
    await new Promise((resolve) => setTimeout(resolve, BEAT_MS * 6));
    expect(hub.silentSince("web-1", "web")).toBeUndefined();
    expect(recorded.healthEvents.slice(raised).filter((h) => h.reason === "InstanceSilent")).toEqual([]);
    expect(changes.filter((c) => c.assignment === "web").map((c) => c.status)).toEqual(["silent", "heard"]);
  });
});
