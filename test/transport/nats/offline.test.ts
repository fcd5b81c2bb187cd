import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { natsNode, testBundle } from "../../helpers/marker-agent.js";
import { type NatsTestBed, startNatsTestBed } from "../../helpers/nats-testbed.js";

describe("nats offline node - converges the current generation, not every intermediate one", () => {
  let bed: NatsTestBed;

  beforeAll(async () => {
    bed = await startNatsTestBed({ nodes: ["edge-2"] });
  });

  afterAll(async () => {
    await bed?.dispose();
  });

  it("nats offline node - an agent offline during two commits applies only the latest when it returns", async () => {
    const { hub, recorded } = bed;
    const web2 = testBundle("edge-2", "web", 2);
    const web3 = testBundle("edge-2", "web", 3);
    const proxy1 = testBundle("edge-2", "proxy", 1);
    await hub.dispatch(web2, natsNode("edge-2"));
    await hub.dispatch(proxy1, natsNode("edge-2"));
    await hub.dispatch(web3, natsNode("edge-2"));
    // While the node is away the bus shows what waits for it: one attempt per instance, the newest.
    expect((await hub.busState()).nodes).toEqual([
      { node: "edge-2", waiting: 2, inProgress: 0, redelivered: 0 },
    ]);

    const runs = await bed.startAgent("edge-2");
    await recorded.until(
      () => [web3, proxy1].every((b) => recorded.results.some((r) => r.attemptId === b.attemptId)),
      "results for web@3 and proxy@1",
    );
    await recorded.until(
      () =>
        recorded.reports.some(
          (r) =>
            r.instances.find((i) => i.assignment === "web")?.generation === 3 && r.instances.length === 2,
        ),
      "a report with web at generation 3",
    );
    expect(runs.applied.map((a) => `${a.assignment}@${a.generation}`).sort()).toEqual(["proxy@1", "web@3"]);
    expect(recorded.results.some((r) => r.attemptId === web2.attemptId)).toBe(false);
  });

  it("nats offline node - an attempt older than the generation already applied is answered Superseded, not applied", async () => {
    const { hub, recorded } = bed;
    const runs = await bed.startAgent("edge-2");
    const late = testBundle("edge-2", "web", 2);
    await hub.dispatch(late, natsNode("edge-2"));
    await recorded.until(
      () => recorded.results.some((r) => r.attemptId === late.attemptId),
      "the late result",
    );
    expect(recorded.results.find((r) => r.attemptId === late.attemptId)).toMatchObject({
      outcome: "failed",
      failureClass: "permanent",
      reason: "Superseded",
      generation: 2,
    });
    expect(runs.applied).toEqual([]);
  });

  it("nats offline node - the same generation again is applied (healing is the ordinary path run again)", async () => {
    const { hub, recorded } = bed;
    const runs = await bed.startAgent("edge-2");
    const again = testBundle("edge-2", "web", 3);
    await hub.dispatch(again, natsNode("edge-2"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === again.attemptId), "the result");
    expect(runs.applied.map((a) => a.attemptId)).toEqual([again.attemptId]);
  });
});
