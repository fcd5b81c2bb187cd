import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NatsAgent, runNatsAgent } from "../../../src/transport/nats/agent.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { silentLog } from "../../../src/transport/nats/log.js";
import { MarkerAgent, natsNode, testBundle } from "../../helpers/marker-agent.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

describe("nats agent before hub - an agent started before the hub waits for it", () => {
  let server: TestNatsServer;
  let agent: NatsAgent | undefined;
  let hub: NatsTransport | undefined;
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-early-"));
  const recorded = recordEvents();

  beforeAll(async () => {
    server = await startNatsServer();
  });

  afterAll(async () => {
    await agent?.stop();
    await hub?.stop();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats agent before hub - the agent runs with no streams yet and takes its attempt once the hub has made them", async () => {
    const warnings: string[] = [];
    const log = { ...silentLog, warn: (_: object, message: string) => warnings.push(message) };
    agent = await runNatsAgent({
      servers: server.url,
      node: "web-1",
      agent: new MarkerAgent("web-1", dir),
      log,
    });
    await recorded.until(
      () => warnings.some((w) => w.includes("waiting for the hub to create it")),
      "the agent to notice it has no mailbox yet",
    );
    hub = createNatsTransport({ servers: server.url, nodes: ["web-1"] });
    await hub.start(recorded.events);
    const bundle = testBundle("web-1", "web", 1);
    await hub.dispatch(bundle, natsNode("web-1"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === bundle.attemptId), "the result");
    expect(recorded.results[0]?.outcome).toBe("succeeded");
  });
});

describe("nats agent during a server restart - an agent whose server goes away as it starts", () => {
  it("nats agent during a server restart - waits for the server and runs, instead of failing its start", async () => {
    const server = await startNatsServer();
    const dir = mkdtempSync(join(tmpdir(), "steward-nats-early-"));
    const nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    const warnings: string[] = [];
    const log = { ...silentLog, warn: (_: object, message: string) => warnings.push(message) };
    let agent: NatsAgent | undefined;
    try {
      await server.stop();
      // Its first round trip goes out while the server is down, and is cut off when the client is back.
      const starting = runNatsAgent({
        connection: nc,
        node: "web-2",
        agent: new MarkerAgent("web-2", dir),
        log,
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      await server.process.start();
      agent = await starting;
      expect(warnings).toContain("waiting for the NATS server");
      const hub = createNatsTransport({ servers: server.url, nodes: ["web-2"] });
      const recorded = recordEvents();
      await hub.start(recorded.events);
      try {
        const bundle = testBundle("web-2", "web", 1);
        await hub.dispatch(bundle, natsNode("web-2"));
        await recorded.until(
          () => recorded.results.some((r) => r.attemptId === bundle.attemptId),
          "the result",
        );
      } finally {
        await hub.stop();
      }
    } finally {
      await agent?.stop();
      await nc.close();
      await server.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
