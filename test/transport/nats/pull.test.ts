import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ATTEMPTS_STREAM, attemptConsumer } from "../../../src/transport/nats/subjects.js";
import { natsNode, testBundle } from "../../helpers/marker-agent.js";
import { type NatsTestBed, startNatsTestBed } from "../../helpers/nats-testbed.js";

describe("nats agent pull", { timeout: 60_000 }, () => {
  let bed: NatsTestBed;

  beforeAll(async () => {
    // An attempt not acknowledged (nor said to be in progress) within 500 ms is delivered again.
    bed = await startNatsTestBed({ nodes: ["n1"], attemptDelivery: { maxDeliver: 3, backoffMs: [500] } });
  });

  afterAll(async () => {
    await bed?.dispose();
  });

  it("nats agent pull - an attempt that arrives while another applies waits in hand, kept alive, and runs once", async () => {
    const { hub, recorded } = bed;
    const runs = await bed.startAgent("n1", { applyDelayMs: 1_500 }, { progressIntervalMs: 200 });
    const first = testBundle("n1", "app-a", 1);
    await hub.dispatch(first, natsNode("n1"));
    await recorded.until(() => runs.applied.length === 0 && runs.started > 0, "the first apply under way");
    // Delivered to the agent while it is busy: it waits three ack deadlines before its turn.
    const second = testBundle("n1", "app-b", 1);
    await hub.dispatch(second, natsNode("n1"));
    await recorded.until(
      () => [first, second].every((b) => recorded.results.some((r) => r.attemptId === b.attemptId)),
      "both results",
    );
    expect(runs.applied.map((a) => a.attemptId)).toEqual([first.attemptId, second.attemptId]);
    // Never delivered again meanwhile: the agent would have handed the copy to apply, as a replay.
    expect(runs.replayed).toBe(0);
    expect(recorded.results.filter((r) => r.attemptId === second.attemptId)).toHaveLength(1);
    expect(recorded.results.some((r) => r.duplicate)).toBe(false);
    const jsm = await jetstreamManager(hub.connection);
    const consumer = await jsm.consumers.info(ATTEMPTS_STREAM, attemptConsumer("n1"));
    expect(consumer.num_redelivered).toBe(0);
    expect(consumer.num_ack_pending).toBe(0);
  });
});
