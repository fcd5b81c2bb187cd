/**
 * Reports and results go by shard: a hub replica consumes only the shards it holds, one that lost a
 * node hands its messages back for the owner, and the single consumer of earlier versions is
 * replaced by the shard consumers on a real nats-server.
 */
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NotOwnedError } from "../../../src/hub/transport.js";
import type { Report } from "../../../src/model/generated.js";
import { SHARDS, shardOf } from "../../../src/model/shards.js";
import { createNatsTransport } from "../../../src/transport/nats/hub.js";
import {
  hubReportsConsumer,
  LEGACY_HUB_REPORTS_CONSUMER,
  REPORTS_STREAM,
  subjects,
} from "../../../src/transport/nats/subjects.js";
import { ensureTopology } from "../../../src/transport/nats/topology.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

/** Two node names in different shards. */
function twoShards(): [string, string] {
  const first = "edge-0";
  for (let i = 1; ; i++) if (shardOf(`edge-${i}`) !== shardOf(first)) return [first, `edge-${i}`];
}

/** A hub transport on `nc` that consumes `node`'s shard alone, started, with what it records. */
async function startOnShardOf(nc: NatsConnection, node: string) {
  const recorded = recordEvents();
  const hub = createNatsTransport({ connection: nc });
  await hub.consumeShards(new Set([shardOf(node)]));
  await hub.start(recorded.events);
  return { hub, recorded };
}

const report = (node: string, takenAt: string): Report =>
  ({ node, takenAt, instances: [] }) as unknown as Report;

describe("nats shards - each hub replica records its own shards' reports and results", {
  timeout: 60_000,
}, () => {
  let server: TestNatsServer;
  let nc: NatsConnection;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
  });

  afterAll(async () => {
    await nc?.close();
    await server?.dispose();
  });

  it("nats shards - a transport told its shards hears only those nodes; given another shard, it hears that one's waiting messages", async () => {
    const [mine, theirs] = twoShards();
    const { hub, recorded } = await startOnShardOf(nc, mine);
    try {
      const js = jetstream(nc);
      await js.publish(subjects.report(theirs), JSON.stringify(report(theirs, "2026-12-01T00:00:01Z")));
      await js.publish(subjects.report(mine), JSON.stringify(report(mine, "2026-12-01T00:00:02Z")));
      await recorded.until(() => recorded.reports.length === 1, "the own shard's report");
      expect(recorded.reports.map((r) => r.node)).toEqual([mine]);
      // The other shard's report waits on its own consumer, not taken by this transport.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(recorded.reports.map((r) => r.node)).toEqual([mine]);
      const jsm = await jetstreamManager(nc);
      expect(
        (await jsm.consumers.info(REPORTS_STREAM, hubReportsConsumer(shardOf(theirs)))).num_pending,
      ).toBe(1);

      await hub.consumeShards(new Set([shardOf(theirs)]));
      await recorded.until(() => recorded.reports.length === 2, "the report of the shard taken over");
      expect(recorded.reports.map((r) => r.node)).toEqual([mine, theirs]);
      // The first shard given up: its next report waits for whoever takes it.
      await js.publish(subjects.report(mine), JSON.stringify(report(mine, "2026-12-01T00:00:03Z")));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(recorded.reports).toHaveLength(2);
      expect((await jsm.consumers.info(REPORTS_STREAM, hubReportsConsumer(shardOf(mine)))).num_pending).toBe(
        1,
      );
      await hub.consumeShards(new Set([shardOf(mine), shardOf(theirs)]));
      await recorded.until(() => recorded.reports.length === 3, "the report of the shard taken back");
      expect(recorded.reports[2]?.takenAt).toBe("2026-12-01T00:00:03Z");
    } finally {
      await hub.stop();
    }
  });

  it("nats shards - a message the hub refuses as another replica's is handed back, not dropped, and comes again", async () => {
    const [node] = twoShards();
    let refusals = 0;
    const recorded = recordEvents({
      onReport: () => {
        if (++refusals <= 2) throw new NotOwnedError(node);
      },
    });
    const hub = createNatsTransport({ connection: nc });
    await hub.start(recorded.events);
    try {
      await jetstream(nc).publish(
        subjects.report(node),
        JSON.stringify(report(node, "2026-12-01T00:01:00Z")),
      );
      await recorded.until(() => recorded.reports.length === 1, "the report, once owned");
      expect(refusals).toBe(3);
      expect(recorded.reports[0]?.takenAt).toBe("2026-12-01T00:01:00Z");
    } finally {
      await hub.stop();
    }
  });

  it("nats shards - a message the hub is still recording past its ack deadline is not delivered again meanwhile", async () => {
    const [node] = twoShards();
    let handed = 0;
    const recorded = recordEvents({
      onReport: async () => {
        handed++;
        // Longer than the consumer's 5 s ack deadline: a slow store, a hub behind on a burst.
        await new Promise((resolve) => setTimeout(resolve, 8_000));
      },
    });
    const hub = createNatsTransport({ connection: nc });
    await hub.start(recorded.events);
    try {
      await jetstream(nc).publish(
        subjects.report(node),
        JSON.stringify(report(node, "2026-12-01T00:01:30Z")),
      );
      await recorded.until(() => recorded.reports.length === 1, "the slowly recorded report", 20_000);
      const info = await (await jetstreamManager(nc)).consumers.info(
        REPORTS_STREAM,
        hubReportsConsumer(shardOf(node)),
      );
      expect(handed).toBe(1);
      expect([info.num_ack_pending, info.num_redelivered]).toEqual([0, 0]);
    } finally {
      await hub.stop();
    }
  });

  it("nats shards - a message whose subject names another shard than its node's is dropped for good, never handed out again", async () => {
    const [node, other] = twoShards();
    const recorded = recordEvents();
    const hub = createNatsTransport({ connection: nc });
    await hub.start(recorded.events);
    try {
      const js = jetstream(nc);
      const wrong = `steward.agent.${shardOf(other)}.report.${node}`;
      await js.publish(wrong, JSON.stringify(report(node, "2026-12-01T00:02:00Z")));
      await js.publish(subjects.report(node), JSON.stringify(report(node, "2026-12-01T00:02:01Z")));
      await recorded.until(() => recorded.reports.length === 1, "the rightly addressed report");
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(recorded.reports.map((r) => r.takenAt)).toEqual(["2026-12-01T00:02:01Z"]);
      const jsm = await jetstreamManager(nc);
      // Refused for good: not handed out again once its ack deadline (5 s) has passed.
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      const info = await jsm.consumers.info(REPORTS_STREAM, hubReportsConsumer(shardOf(other)));
      expect([info.num_pending, info.num_ack_pending, info.num_redelivered]).toEqual([0, 0, 0]);
    } finally {
      await hub.stop();
    }
  });

  it("nats shards - the single consumer of earlier versions and its messages give way to one consumer per shard", async () => {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(REPORTS_STREAM);
    await jsm.streams.add({
      name: REPORTS_STREAM,
      subjects: ["steward.report.*", "steward.result.*"],
      retention: RetentionPolicy.Workqueue,
    });
    await jsm.consumers.add(REPORTS_STREAM, {
      durable_name: LEGACY_HUB_REPORTS_CONSUMER,
      ack_policy: AckPolicy.Explicit,
    });
    await jetstream(nc).publish("steward.report.edge-0", "{}");
    await ensureTopology(nc, jsm);
    const consumers: string[] = [];
    for await (const info of jsm.consumers.list(REPORTS_STREAM)) consumers.push(info.name);
    expect(consumers.sort()).toEqual(Array.from({ length: SHARDS }, (_, s) => hubReportsConsumer(s)).sort());
    const info = await jsm.streams.info(REPORTS_STREAM);
    expect(info.config.subjects).toEqual([subjects.agentMessages]);
    expect(info.state.messages).toBe(0);
  });
});

describe("nats shards - a server restart while the shards change", { timeout: 60_000 }, () => {
  it("nats shards - a round of shard consumers the server's restart failed does not fail the rounds after it", async () => {
    const server = await startNatsServer();
    const nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    const [mine, theirs] = twoShards();
    const { hub, recorded } = await startOnShardOf(nc, mine);
    try {
      await server.stop();
      // The server is down: the other shard's consumer cannot be looked up.
      await expect(hub.consumeShards(new Set([shardOf(mine), shardOf(theirs)]))).rejects.toThrow();
      await server.process.start();
      // A flush sent while the client was away is refused with the disconnect: until one passes.
      while (
        !(await nc.flush().then(
          () => true,
          () => false,
        ))
      );
      // Once it answers again, the next round takes the shard: it is not the failed round again.
      await hub.consumeShards(new Set([shardOf(mine), shardOf(theirs)]));
      await jetstream(nc).publish(
        subjects.report(theirs),
        JSON.stringify(report(theirs, "2026-12-01T00:03:00Z")),
      );
      await recorded.until(
        () => recorded.reports.length === 1,
        "the report of the shard taken after the restart",
      );
      expect(recorded.reports[0]?.node).toBe(theirs);
    } finally {
      await hub.stop();
      await nc.close();
      await server.dispose();
    }
  });
});
