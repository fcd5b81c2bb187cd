import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NatsAgent, runNatsAgent } from "../../../src/transport/nats/agent.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { MarkerAgent, natsNode, testBundle } from "../../helpers/marker-agent.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

describe("nats offline node - converges the current generation, not every intermediate one", () => {
  let server: TestNatsServer;
  let dir: string;
  let hub: NatsTransport;
  let agent: NatsAgent | undefined;
  const recorded = recordEvents();

  beforeAll(async () => {
    server = await startNatsServer();
    dir = mkdtempSync(join(tmpdir(), "steward-nats-offline-"));
    hub = createNatsTransport({ servers: server.url, nodes: ["edge-2"] });
    await hub.start(recorded.events);
  });

  afterAll(async () => {
    await agent?.stop();
    await hub?.stop();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats offline node - an agent offline during two commits applies only the latest when it returns", async () => {
    const web2 = testBundle("edge-2", "web", 2);
    const web3 = testBundle("edge-2", "web", 3);
    const proxy1 = testBundle("edge-2", "proxy", 1);
    await hub.dispatch(web2, natsNode("edge-2"));
    await hub.dispatch(proxy1, natsNode("edge-2"));
    await hub.dispatch(web3, natsNode("edge-2"));

    const runs = new MarkerAgent("edge-2", dir);
    agent = await runNatsAgent({ servers: server.url, node: "edge-2", agent: runs });
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
    const runs = new MarkerAgent("edge-2", dir);
    await agent?.stop();
    agent = await runNatsAgent({ servers: server.url, node: "edge-2", agent: runs });
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
    const runs = new MarkerAgent("edge-2", dir);
    await agent?.stop();
    agent = await runNatsAgent({ servers: server.url, node: "edge-2", agent: runs });
    const again = testBundle("edge-2", "web", 3);
    await hub.dispatch(again, natsNode("edge-2"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === again.attemptId), "the result");
    expect(runs.applied.map((a) => a.attemptId)).toEqual([again.attemptId]);
  });
});
