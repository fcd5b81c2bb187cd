import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { observeAdvisory } from "../../../src/transport/nats/advisories.js";
import { createNatsTransport } from "../../../src/transport/nats/hub.js";
import { MAILBOX_STREAM, subjects } from "../../../src/transport/nats/subjects.js";
import { natsNode, testBundle } from "../../helpers/marker-agent.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { type NatsTestBed, startNatsTestBed } from "../../helpers/nats-testbed.js";
import { recordEvents } from "../../helpers/transport-events.js";

describe("nats advisories - the bus itself is observed", { timeout: 60_000 }, () => {
  let bed: NatsTestBed;

  beforeAll(async () => {
    bed = await startNatsTestBed({ nodes: ["db-1"] });
  });

  afterAll(async () => {
    await bed?.dispose();
  });

  it("nats advisories - a deleted stream is recreated by running the topology again, and attempts flow again", async () => {
    const { hub, recorded } = bed;
    await bed.startAgent("db-1");
    const jsm = await jetstreamManager(hub.connection);
    await jsm.streams.delete(MAILBOX_STREAM);
    // The server announces the stream deleted (nats-server 2.9 sometimes loses that advisory when
    // the stream is recreated at once); a dispatch that finds no stream repairs the topology too.
    const bundle = testBundle("db-1", "db", 3);
    await recorded.until(async () => {
      try {
        await hub.dispatch(bundle, natsNode("db-1"));
        return true;
      } catch (error) {
        expect((error as { reason?: string }).reason).toBe("StreamUnavailable");
        return false;
      }
    }, "the attempt dispatched again");
    expect((await jsm.streams.info(MAILBOX_STREAM)).config.name).toBe(MAILBOX_STREAM);
    await recorded.until(
      () => recorded.results.some((r) => r.attemptId === bundle.attemptId),
      "a result again",
    );
    // Each degraded observation of the deletion is recovered once the stream is back.
    await recorded.until(() => {
      const last = recorded.healthEvents.filter((h) => h.reason === "StreamDeleted").at(-1);
      return last === undefined || last.status === "recovered";
    }, "the deletion recovered");
  });

  it("nats advisories - the hub losing its server is ServerDisconnected, and reconnecting recovers it", async () => {
    const { recorded } = bed;
    await bed.server.restart();
    await recorded.until(
      () => recorded.healthEvents.some((h) => h.reason === "ServerDisconnected" && h.status === "recovered"),
      "reconnected",
    );
    const events = recorded.healthEvents.filter((h) => h.reason === "ServerDisconnected");
    expect(events.map((h) => h.status)).toEqual(["degraded", "recovered"]);
    expect(events[0]?.node).toBeUndefined();
  });
});

describe("nats advisories - what each advisory means", () => {
  const cases: { name: string; subject: string; body: object; expected: object | undefined }[] = [
    {
      name: "max deliveries on the task agents' consumer names the consumer and the message",
      subject: "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.STEWARD_TASKS.task-agents",
      body: { stream: "STEWARD_TASKS", consumer: "task-agents", stream_seq: 7, deliveries: 20 },
      expected: {
        health: {
          status: "degraded",
          reason: "MaxDeliveriesExceeded",
          message:
            "message 7 of STEWARD_TASKS was delivered to task-agents 20 times and never acknowledged; it will not be delivered again",
        },
        exhausted: { stream: "STEWARD_TASKS", seq: 7 },
      },
    },
    {
      name: "max deliveries on the hub's reports is about the transport as a whole",
      subject: "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.STEWARD_REPORTS.hub-shard-5",
      body: { stream: "STEWARD_REPORTS", consumer: "hub-shard-5", stream_seq: 3, deliveries: 10 },
      expected: {
        health: {
          status: "degraded",
          reason: "MaxDeliveriesExceeded",
          message: expect.stringContaining("delivered to the hub 10 times"),
        },
        exhausted: { stream: "STEWARD_REPORTS", seq: 3 },
      },
    },
    {
      name: "a deleted consumer of ours asks for a repair",
      subject: "$JS.EVENT.ADVISORY.CONSUMER.DELETED.STEWARD_REPORTS.hub-shard-5",
      body: { stream: "STEWARD_REPORTS", consumer: "hub-shard-5" },
      expected: {
        health: expect.objectContaining({ reason: "ConsumerDeleted", status: "degraded" }),
        repair: true,
      },
    },
    {
      name: "the single consumer of earlier versions, which the hub deletes itself, is not missed",
      subject: "$JS.EVENT.ADVISORY.CONSUMER.DELETED.STEWARD_REPORTS.hub",
      body: { stream: "STEWARD_REPORTS", consumer: "hub" },
      expected: undefined,
    },
    {
      name: "another application's stream is none of our business",
      subject: "$JS.EVENT.ADVISORY.STREAM.DELETED.ORDERS",
      body: { stream: "ORDERS" },
      expected: undefined,
    },
    {
      name: "an agent disconnecting is observed with the server's reason",
      subject: "$SYS.ACCOUNT.STEWARD.DISCONNECT",
      body: { client: { name: "steward-node_web-1" }, reason: "Slow Consumer (Write Deadline)" },
      expected: {
        health: {
          status: "degraded",
          node: "web-1",
          reason: "AgentDisconnected",
          message: "agent of web-1 disconnected from the server: Slow Consumer (Write Deadline)",
        },
      },
    },
    {
      name: "an agent connecting recovers AgentDisconnected",
      subject: "$SYS.ACCOUNT.STEWARD.CONNECT",
      body: { client: { name: "steward-node_web-1" } },
      expected: {
        health: expect.objectContaining({ status: "recovered", node: "web-1", reason: "AgentDisconnected" }),
      },
    },
    {
      name: "the hub's own connection events are not about a node",
      subject: "$SYS.ACCOUNT.STEWARD.DISCONNECT",
      body: { client: { name: "steward-hub" } },
      expected: undefined,
    },
  ];
  for (const c of cases)
    it(`nats advisories - ${c.name}`, () => {
      expect(observeAdvisory(c.subject, c.body)).toEqual(c.expected);
    });
});

describe("nats advisories - storage near the account's limit", () => {
  let server: TestNatsServer;

  beforeAll(async () => {
    server = await startNatsServer({
      config: (storeDir) =>
        [
          `jetstream { store_dir: ${JSON.stringify(storeDir)} }`,
          "accounts { STEWARD { jetstream: { max_file: 2M, max_mem: 1M }, users: [ { user: hub, password: hub } ] } }",
        ].join("\n"),
    });
  });

  afterAll(async () => {
    await server?.dispose();
  });

  it("nats advisories - a hub starting on a nearly full store says StorageNearLimit", async () => {
    const nc = await connect({ servers: server.url, user: "hub", pass: "hub" });
    const first = createNatsTransport({ connection: nc });
    await first.start(recordEvents().events);
    await first.stop();
    const js = jetstream(nc);
    // Reports the hub takes (a readable body from the node its subject names) and never records.
    const filler = JSON.stringify({
      node: "node-1",
      takenAt: "2026-12-01T00:00:00Z",
      pad: "x".repeat(100_000),
    });
    for (let i = 0; i < 19; i++) await js.publish(subjects.report("node-1"), filler);
    const recorded = recordEvents();
    const second = createNatsTransport({ connection: nc });
    // Nothing consumes reports here but the hub itself, and its handler holds them: the store stays full.
    await second.start({ ...recorded.events, report: () => new Promise(() => {}) });
    expect(recorded.healthEvents).toContainEqual(
      expect.objectContaining({ status: "degraded", reason: "StorageNearLimit" }),
    );
    expect((await second.busState()).storage.limitBytes).toBe(2_000_000);
    await nc.close();
  });
});
