import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countedRuns, natsNode, testBundle } from "../../helpers/marker-agent.js";
import { type NatsTestBed, startNatsTestBed } from "../../helpers/nats-testbed.js";

describe("nats offline node - converges the current generation, not every intermediate one", {
  timeout: 60_000,
}, () => {
  let bed: NatsTestBed;
  const counting = { countRuns: true };

  beforeAll(async () => {
    bed = await startNatsTestBed({ nodes: ["edge-2"] });
  });

  afterAll(async () => {
    await bed?.dispose();
  });

  it("nats offline node - an agent offline during two commits applies only the latest when it returns, the waiting attempts together", async () => {
    const { hub, recorded } = bed;
    const web2 = testBundle("edge-2", "web", 2, "running", counting);
    const web3 = testBundle("edge-2", "web", 3, "running", counting);
    const proxy1 = testBundle("edge-2", "proxy", 1, "running", counting);
    await hub.dispatch(web2, natsNode("edge-2"));
    await hub.dispatch(proxy1, natsNode("edge-2"));
    await hub.dispatch(web3, natsNode("edge-2"));
    // While the node is away its mailbox holds what waits for it: one attempt per instance, the newest.
    expect(await hub.mailbox("edge-2")).toEqual([
      { assignment: "proxy", attemptId: proxy1.attemptId, generation: 1 },
      { assignment: "web", attemptId: web3.attemptId, generation: 3 },
    ]);

    const root = await bed.startRealAgent("edge-2");
    await recorded.until(
      () => [web3, proxy1].every((b) => recorded.results.some((r) => r.attemptId === b.attemptId)),
      "results for web@3 and proxy@1",
    );
    await recorded.until(
      () =>
        recorded.reports.some(
          (r) =>
            r.instances.find((i) => i.assignment === "web")?.generation === 3 &&
            r.instances.every((i) => i.converged),
        ),
      "a converged report with web at generation 3",
    );
    expect(countedRuns(root, "web")).toEqual([`3 ${web3.attemptId}`]);
    expect(countedRuns(root, "proxy")).toEqual([`1 ${proxy1.attemptId}`]);
    // Both waiting attempts were taken together and answered by one report: no report shows one
    // of them applied without the other.
    const generations = recorded.reports
      .map((r) => ({
        web: r.instances.find((i) => i.assignment === "web")?.generation,
        proxy: r.instances.find((i) => i.assignment === "proxy")?.generation,
      }))
      .filter((g) => g.web === 3 || g.proxy === 1);
    expect(generations.length).toBeGreaterThan(0);
    expect(generations.every((g) => g.web === 3 && g.proxy === 1)).toBe(true);
    expect(recorded.results.some((r) => r.attemptId === web2.attemptId)).toBe(false);
  });

  it("nats offline node - an attempt older than the generation already applied is answered Superseded, not applied", async () => {
    const { hub, recorded } = bed;
    const root = await bed.startRealAgent("edge-2");
    const late = testBundle("edge-2", "web", 2, "running", counting);
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
    expect(countedRuns(root, "web")).toHaveLength(1);
    expect(readFileSync(join(root, "srv/web.conf"), "utf8")).toBe("generation 3\n");
  });

  it("nats offline node - the same generation again repairs drift (healing is the ordinary path run again)", async () => {
    const { hub, recorded } = bed;
    const root = await bed.startRealAgent("edge-2");
    writeFileSync(join(root, "srv/web.conf"), "changed behind steward's back\n");
    const again = testBundle("edge-2", "web", 3, "running", counting);
    await hub.dispatch(again, natsNode("edge-2"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === again.attemptId), "the result");
    expect(recorded.results.find((r) => r.attemptId === again.attemptId)?.outcome).toBe("succeeded");
    expect(readFileSync(join(root, "srv/web.conf"), "utf8")).toBe("generation 3\n");
    // The run-once command of generation 3 does not run a second time.
    expect(countedRuns(root, "web")).toHaveLength(1);
  });
});
