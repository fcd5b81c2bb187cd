import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
