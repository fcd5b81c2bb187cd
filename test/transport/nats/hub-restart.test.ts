import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Agent } from "../../../src/agent/agent.js";
import { type NatsAgent, runNatsAgent } from "../../../src/transport/nats/agent.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { REPORTS_STREAM } from "../../../src/transport/nats/subjects.js";
import { countedRuns, natsNode, testBundle } from "../../helpers/marker-agent.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

/** A hub that dies: its connection drops with no goodbye, whatever it was doing. */
async function kill(hub: NatsTransport): Promise<void> {
  killed.add(hub);
  await hub.connection.close();
}

const killed = new Set<NatsTransport>();

describe("nats hub restart - nothing is run twice and nothing is lost", { timeout: 60_000 }, () => {
  let server: TestNatsServer;
  let dir: string;
  let agent: NatsAgent | undefined;
  const hubs: NatsTransport[] = [];
  const root = () => join(dir, "root");
  /** (Re)starts the node's real Agent on its one root and state directory. */
  async function restartAgent(): Promise<void> {
    await agent?.stop();
    const real = new Agent({ node: "web-1", root: root(), stateDir: join(dir, "state"), probeSettleMs: 0 });
    agent = await runNatsAgent({ servers: server.url, node: "web-1", agent: real });
  }
  const runsOf = (attemptId: string) => countedRuns(root(), "web").filter((line) => line.endsWith(attemptId));

  async function startHub(recorded: ReturnType<typeof recordEvents>): Promise<NatsTransport> {
    const hub = createNatsTransport({ servers: server.url, nodes: ["web-1"] });
    await hub.start(recorded.events);
    hubs.push(hub);
    return hub;
  }

  beforeAll(async () => {
    server = await startNatsServer();
    dir = mkdtempSync(join(tmpdir(), "steward-nats-hub-"));
  });

  afterAll(async () => {
    await agent?.stop();
    for (const hub of hubs) if (!killed.has(hub)) await hub.stop();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats hub restart - a hub killed after publishing re-publishes the same attempt and it runs once", async () => {
    const first = recordEvents();
    const hub1 = await startHub(first);
    const bundle = testBundle("web-1", "web", 1, "running", { countRuns: true });
    await hub1.dispatch(bundle, natsNode("web-1"));
    await kill(hub1);

    // The new hub finds the attempt in its outbox, not marked as sent, and hands it over again.
    const second = recordEvents();
    const hub2 = await startHub(second);
    await hub2.dispatch(bundle, natsNode("web-1"));

    await restartAgent();
    await second.until(() => second.results.some((r) => r.attemptId === bundle.attemptId), "the result");

    // Once more after it ran (the outbox relay raced the crash): still de-duplicated by the stream.
    await hub2.dispatch(bundle, natsNode("web-1"));
    const fence = testBundle("web-1", "fence", 1, "running", { countRuns: true });
    await hub2.dispatch(fence, natsNode("web-1"));
    await second.until(
      () => second.results.some((r) => r.attemptId === fence.attemptId),
      "the fence's result",
    );

    expect(runsOf(bundle.attemptId)).toHaveLength(1);
    expect(second.results.filter((r) => r.attemptId === bundle.attemptId)).toHaveLength(1);
    await hub2.stop();
  });

  it("nats hub restart - a hub killed while recording a result gets it again after restart, with no new run", async () => {
    let stall = false;
    const third = recordEvents({
      // The hub is busy recording when it dies: its handler never returns.
      onResult: () => (stall ? new Promise<void>(() => {}) : undefined),
    });
    const hub3 = await startHub(third);
    stall = true;
    await restartAgent();
    const bundle = testBundle("web-1", "web", 2, "running", { countRuns: true });
    await hub3.dispatch(bundle, natsNode("web-1"));
    await third.until(() => runsOf(bundle.attemptId).length === 1, "the apply");
    await kill(hub3);
    stall = false;

    const fourth = recordEvents();
    const hub4 = await startHub(fourth);
    await fourth.until(
      () => fourth.results.some((r) => r.attemptId === bundle.attemptId),
      "the redelivered result",
    );
    await fourth.until(
      () => fourth.reports.some((r) => r.instances.some((i) => i.assignment === "web" && i.generation === 2)),
      "the redelivered report",
    );
    expect(runsOf(bundle.attemptId)).toHaveLength(1);
    await hub4.stop();
  });

  it("nats hub restart - results and reports published while no hub runs are delivered when one starts", async () => {
    await agent?.stop();
    const fifth = recordEvents();
    const hub5 = await startHub(fifth);
    const bundle = testBundle("web-1", "web", 3, "running", { countRuns: true });
    await hub5.dispatch(bundle, natsNode("web-1"));
    await hub5.stop();
    await restartAgent();
    // Wait until the result and report are on the stream, with no hub to take them.
    const watcher = await connect({ servers: server.url });
    const jsm = await jetstreamManager(watcher);
    await fifth.until(() => runsOf(bundle.attemptId).length === 1, "the apply");
    await fifth.until(
      async () => (await jsm.streams.info(REPORTS_STREAM)).state.messages >= 2,
      "result and report stored",
    );
    await watcher.close();

    const sixth = recordEvents();
    await startHub(sixth);
    // First the last known state from KV, then what arrived while the hub was away.
    await sixth.until(() => sixth.results.some((r) => r.attemptId === bundle.attemptId), "the result");
    await sixth.until(
      () => sixth.reports.some((r) => r.instances.some((i) => i.assignment === "web" && i.generation === 3)),
      "a report at generation 3",
    );
    expect(sixth.reports[0]?.node).toBe("web-1");
  });
});
