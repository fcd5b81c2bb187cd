/**
 * Several hub replicas start at the same moment on a server that has none of steward's streams yet:
 * each ensures the whole topology, and none of them fails because another was creating the same
 * stream, consumer or bucket; a create the server refuses for a moment is tried again (a real
 * nats-server).
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OBSERVED_BUCKET } from "../../../src/transport/nats/subjects.js";
import { ensureTopology } from "../../../src/transport/nats/topology.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";

describe("nats topology - replicas starting together", { timeout: 120_000 }, () => {
  let server: TestNatsServer;
  let connections: NatsConnection[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
    connections = await Promise.all([1, 2, 3].map(() => connect({ servers: server.url })));
  });
  afterAll(async () => {
    for (const nc of connections) await nc.close();
    await server?.dispose();
  });

  const streamNames = async (nc: NatsConnection) => {
    const names: string[] = [];
    for await (const name of (await jetstreamManager(nc)).streams.names()) names.push(name);
    return names.sort();
  };

  it("topology - three hubs ensuring it at once on an empty server all succeed, round after round, and leave one of each", async () => {
    const managers = await Promise.all(connections.map((nc) => jetstreamManager(nc)));
    let expected: string[] | undefined;
    for (let round = 0; round < 10; round++) {
      for (const name of await streamNames(connections[0]!)) await managers[0]!.streams.delete(name);
      const outcomes = await Promise.allSettled(connections.map((nc, i) => ensureTopology(nc, managers[i]!)));
      const failed = outcomes.flatMap((o) => (o.status === "rejected" ? [String(o.reason)] : []));
      expect(failed, `round ${round}`).toEqual([]);
      const names = await streamNames(connections[0]!);
      expected ??= names;
      expect(names).toEqual(expected);
    }
    expect(expected).toContain(`KV_${OBSERVED_BUCKET}`);
  });

  it("topology - a bucket's create the server refuses (its subjects taken a moment longer) is tried again, and the bucket is made", async () => {
    const [nc, other] = connections as [NatsConnection, NatsConnection];
    const jsm = await jetstreamManager(nc);
    for (const name of await streamNames(nc)) await jsm.streams.delete(name);
    // Another stream holds the bucket's subjects until the hub's first create of it was refused.
    const squatter = await jetstreamManager(other);
    await squatter.streams.add({ name: "squatter", subjects: [`$KV.${OBSERVED_BUCKET}.>`] });
    let creates = 0;
    const watch = other.subscribe(`$JS.API.STREAM.CREATE.KV_${OBSERVED_BUCKET}`, {
      callback: () => {
        if (++creates === 1) setTimeout(() => void squatter.streams.delete("squatter"), 20);
      },
    });
    await other.flush();
    await ensureTopology(nc, jsm);
    watch.unsubscribe();
    expect(creates).toBeGreaterThanOrEqual(2);
    const info = await jsm.streams.info(`KV_${OBSERVED_BUCKET}`);
    expect(info.config.subjects).toEqual([`$KV.${OBSERVED_BUCKET}.>`]);
    expect(await streamNames(nc)).not.toContain("squatter");
  });
});
