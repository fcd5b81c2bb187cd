import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectNats } from "../../../src/transport/nats/connect.js";
import { createNatsTransport, hubBusOf, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { CONDITIONS_BUCKET } from "../../../src/transport/nats/subjects.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";
import { nodes } from "../../hub/helpers/fleet.js";
import { type Harness, startHarness } from "../../hub/helpers/harness.js";

const RETRY_MS = 5_000;

async function until(check: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check()); ) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("nats bus feed - the hub's open conditions on KV stay exactly the open ones, across an outage", {
  timeout: 60_000,
}, () => {
  let server: TestNatsServer;
  let nats: NatsTransport;
  let viewer: NatsConnection;
  let h: Harness;
  const logLines: Record<string, unknown>[] = [];
  const keys = async () => {
    const kv = await new Kvm(viewer).open(CONDITIONS_BUCKET);
    const found: string[] = [];
    for await (const key of await kv.keys()) found.push(key);
    return found.sort();
  };
  const openIds = async () => (await h.store.conditions.list({ status: "open" })).map((c) => c.id).sort();

  beforeAll(async () => {
    server = await startNatsServer();
    // The hub's bus is the NATS transport's; the nodes here are local, so it only carries the bus.
    nats = createNatsTransport({ servers: server.url, publishTimeoutMs: 1_000 });
    await nats.start(recordEvents().events);
    viewer = await connectNats({ servers: server.url, identity: "viewer" });
  });

  afterAll(async () => {
    await viewer?.close();
    await nats?.stop();
    await server?.dispose();
  });

  it("nats bus feed - a condition opened shows up; one resolved while the server was down is gone once it is back", async () => {
    // Started in the test: the harness closes itself (and checks its conditions) when the test ends.
    h = await startHarness({ files: nodes("n1"), logLines, hubOptions: () => ({ bus: hubBusOf(nats) }) });
    const events = h.hub.eventsFor("nats");
    const transportIs = (status: "degraded" | "recovered", reason: string) =>
      events.health({ status, reason, message: `${reason} ${status}` });
    await transportIs("degraded", "ServerDisconnected");
    await until(
      async () => (await keys()).length === 1 && (await openIds()).length === 1,
      "the condition on KV",
    );
    expect(await keys()).toEqual(await openIds());

    await server.stop();
    // Resolved, and another opened, while the bus is unreachable: the hub records both regardless.
    await transportIs("recovered", "ServerDisconnected");
    await transportIs("degraded", "SlowConsumer");
    expect(await openIds()).toHaveLength(1);
    await until(
      () => logLines.some((l) => String(l.msg).startsWith("could not bring the bus level")),
      "the feed to fail",
    );

    await server.restart();
    // The feed tries again after its pause and replaces the whole board: it cannot know what it missed.
    await until(async () => {
      h.clock.advance(RETRY_MS);
      await new Promise((r) => setTimeout(r, 200));
      try {
        return JSON.stringify(await keys()) === JSON.stringify(await openIds());
      } catch {
        return false;
      }
    }, "the KV bucket to hold exactly the open conditions");
    expect(await h.store.conditions.get((await keys())[0] as string)).toMatchObject({
      status: "open",
      reason: "SlowConsumer",
    });
  });
});
