import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ConditionChange,
  type ConditionWatch,
  watchConditions,
} from "../../../src/transport/nats/conditions.js";
import { connectNats } from "../../../src/transport/nats/connect.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

const silent = {
  id: "01JCOND0000000000000000001",
  type: "NodeSilent",
  status: "open" as const,
  subject: { node: "edge-2" },
  since: "2026-01-01T00:00:00.000Z",
  reason: "HeartbeatMissed",
  message: "no heartbeat from node edge-2 since 2026-01-01T00:00:00.000Z",
};
const stuck = {
  ...silent,
  id: "01JCOND0000000000000000002",
  type: "Stuck",
  subject: { instance: "web@web-1" },
};

describe("nats conditions - open conditions are mirrored to KV and anyone can watch them", () => {
  let server: TestNatsServer;
  let hub: NatsTransport;
  let watch: ConditionWatch | undefined;

  beforeAll(async () => {
    server = await startNatsServer();
    hub = createNatsTransport({ servers: server.url });
    await hub.start(recordEvents().events);
  });

  afterAll(async () => {
    await watch?.stop();
    await hub?.stop();
    await server?.dispose();
  });

  it("nats conditions - a watcher sees what is open now, then opening and resolving as they happen", async () => {
    await hub.conditions.put(silent);
    const changes: ConditionChange[] = [];
    const viewer = await connectNats({ servers: server.url, identity: "viewer" });
    watch = await watchConditions(viewer, (change) => {
      changes.push(change);
    });
    await watch.initialized;
    expect(changes).toEqual([{ kind: "open", id: silent.id, condition: silent, initial: true }]);

    await hub.conditions.put(stuck);
    await hub.conditions.put({ ...silent, status: "resolved" });
    const until = Date.now() + 10_000;
    while (changes.length < 3 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(changes.slice(1)).toEqual([
      { kind: "open", id: stuck.id, condition: stuck, initial: false },
      { kind: "resolved", id: silent.id, initial: false },
    ]);
    expect((await hub.conditions.list()).map((c) => c.id)).toEqual([stuck.id]);
    await watch.stop();
    watch = undefined;
    await viewer.close();
  });

  it("nats conditions - an empty bucket's watch is initialized at once", async () => {
    await hub.conditions.replaceAll([]);
    const viewer = await connectNats({ servers: server.url, identity: "viewer" });
    const changes: ConditionChange[] = [];
    const emptyWatch = await watchConditions(viewer, (change) => {
      changes.push(change);
    });
    await emptyWatch.initialized;
    expect(changes.filter((c) => c.kind === "open")).toEqual([]);
    await emptyWatch.stop();
    await viewer.close();
  });

  it("nats conditions - replaceAll makes the bucket hold exactly the hub's open conditions", async () => {
    await hub.conditions.put(silent);
    await hub.conditions.replaceAll([stuck]);
    expect(await hub.conditions.list()).toEqual([stuck]);
  });

  it("nats conditions - a condition id that cannot be a key is refused", async () => {
    await expect(hub.conditions.put({ ...silent, id: "has space" })).rejects.toThrow(/cannot be a key/);
  });
});
