/**
 * How many copies JetStream keeps of steward's streams and buckets: 3 on a cluster (the hub asks
 * the server it connects to whether it is in one), 1 on a single server, an explicit count when
 * given; streams made before are brought level, and a count the servers cannot place is refused
 * with the fix.
 */
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { credentialsAuthenticator, untilServerAnswers } from "../../../src/transport/nats/connect.js";
import { natsOptionsFromFlags } from "../../../src/transport/nats/flags.js";
import { createNatsTransport } from "../../../src/transport/nats/hub.js";
import {
  CONDITIONS_BUCKET,
  hubReportsConsumer,
  MAILBOX_STREAM,
  OBSERVED_BUCKET,
  REPORTS_STREAM,
  TASKS_STREAM,
} from "../../../src/transport/nats/subjects.js";
import { ensureTopology, replicasOn } from "../../../src/transport/nats/topology.js";
import { startNatsCluster, type TestNatsCluster } from "../../helpers/nats-cluster.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

const STREAMS = [
  MAILBOX_STREAM,
  REPORTS_STREAM,
  TASKS_STREAM,
  `KV_${OBSERVED_BUCKET}`,
  `KV_${CONDITIONS_BUCKET}`,
];

async function replicasOf(jsm: JetStreamManager): Promise<Record<string, [number, number]>> {
  const found: Record<string, [number, number]> = {};
  for (const name of STREAMS) {
    const info = await jsm.streams.info(name);
    // Declared replicas, and the servers holding a copy (the leader and its followers).
    found[name] = [info.config.num_replicas, 1 + (info.cluster?.replicas?.length ?? 0)];
  }
  return found;
}

describe("nats replicas - streams and buckets in 3 copies on a cluster, 1 on a single server", {
  timeout: 60_000,
}, () => {
  let cluster: TestNatsCluster;
  let single: TestNatsServer;
  let admin: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    // One after the other: a cluster that fails to form must not leave the single server running.
    single = await startNatsServer();
    cluster = await startNatsCluster({ nodes: ["edge-1"] });
    admin = await connect({
      servers: cluster.urls.split(","),
      authenticator: credentialsAuthenticator(cluster.creds("hub")),
    });
    jsm = await jetstreamManager(admin);
  });
  afterAll(async () => {
    await admin?.close();
    await cluster?.dispose();
    await single?.dispose();
  });

  it("nats replicas - the replica count follows the server: 3 in a cluster, 1 alone, an override wins", () => {
    const cases: { info: { cluster?: string } | undefined; override?: number; replicas: number }[] = [
      { info: { cluster: "steward" }, replicas: 3 },
      { info: {}, replicas: 1 },
      { info: undefined, replicas: 1 },
      { info: { cluster: "steward" }, override: 1, replicas: 1 },
      { info: {}, override: 3, replicas: 3 },
    ];
    for (const { info, override, replicas } of cases)
      expect(replicasOn(info, override), JSON.stringify({ info, override })).toBe(replicas);
    expect(admin.info?.cluster).toBe("steward");
    expect(natsOptionsFromFlags({ nats: cluster.urls, natsReplicas: "1" }, "/")).toMatchObject({
      replicas: 1,
    });
    expect(() => natsOptionsFromFlags({ nats: cluster.urls, natsReplicas: "three" }, "/")).toThrow(
      /--nats-replicas three must be a number of copies from 1 to 5/,
    );
    expect(() => natsOptionsFromFlags({ natsReplicas: "3" }, "/")).toThrow(
      /--nats-replicas only applies with --nats URL/,
    );
  });

  it("nats replicas - a hub on the cluster makes every stream and bucket R3, each on all three servers, and its consumers too", async () => {
    const hub = createNatsTransport({ servers: cluster.urls, creds: cluster.creds("hub") });
    try {
      await hub.start(recordEvents().events);
      expect(await replicasOf(jsm)).toEqual(Object.fromEntries(STREAMS.map((name) => [name, [3, 3]])));
      const consumer = await jsm.consumers.info(REPORTS_STREAM, hubReportsConsumer(0));
      expect(1 + (consumer.cluster?.replicas?.length ?? 0)).toBe(3);
    } finally {
      await hub.stop();
    }
  });

  it("nats replicas - the operator-mode configuration (the default) forms a cluster too, and the hub's credentials get R3 streams there", async () => {
    const operator = await startNatsCluster({ nodes: [], operator: true });
    const hub = createNatsTransport({ servers: operator.urls, creds: operator.creds("hub") });
    try {
      await hub.start(recordEvents().events);
      const local = await jetstreamManager(hub.connection);
      expect(hub.connection.info?.cluster).toBe("steward");
      expect(await replicasOf(local)).toEqual(Object.fromEntries(STREAMS.map((name) => [name, [3, 3]])));
    } finally {
      await hub.stop();
      await operator.dispose();
    }
  });

  it("nats replicas - told 1, the streams shrink to one copy; the next ensure on the cluster brings them and their consumers back to 3", async () => {
    // As the hub runs it: through a leader election (JetStream "temporarily unavailable") it waits.
    const ensure = (options: { replicas?: number }) =>
      untilServerAnswers(
        () => ensureTopology(admin, jsm, options),
        () => {},
      );
    await ensure({ replicas: 1 });
    expect(await replicasOf(jsm)).toEqual(Object.fromEntries(STREAMS.map((name) => [name, [1, 1]])));
    await ensure({});
    // The new followers catch up in the background; the declared count is what ensure sets.
    const grown = await replicasOf(jsm);
    for (const name of STREAMS) expect(grown[name]?.[0], name).toBe(3);
    const consumerCopies = async () => {
      const info = await jsm.consumers.info(REPORTS_STREAM, hubReportsConsumer(0));
      return 1 + (info.cluster?.replicas?.length ?? 0);
    };
    await expect
      .poll(
        async () =>
          Object.values(await replicasOf(jsm)).every(([, held]) => held === 3) && (await consumerCopies()),
        { timeout: 15_000 },
      )
      .toBe(3);
  });

  it("nats replicas - a hub on a single server keeps one copy; asked for 3 there it says why it cannot and what to do", async () => {
    const nc = await connect({ servers: single.url });
    try {
      const local = await jetstreamManager(nc);
      expect(nc.info?.cluster).toBeUndefined();
      await ensureTopology(nc, local);
      expect(Object.values(await replicasOf(local)).map(([declared]) => declared)).toEqual([1, 1, 1, 1, 1]);
      await local.streams.delete(MAILBOX_STREAM);
      await expect(ensureTopology(nc, local, { replicas: 3 })).rejects.toThrow(
        /JetStream cannot keep stream STEWARD_MAILBOX in 3 replicas \(.*\): the cluster needs at least 3 servers with JetStream up — start the missing ones, or give the hub --nats-replicas/,
      );
    } finally {
      await nc.close();
    }
  });
});
