/**
 * Reading a key-value bucket to its end while agents keep writing to it (a real nats-server): the
 * read ends, with the value of every key nobody wrote meanwhile, and without the keys deleted or
 * purged.
 */
import { type JsMsg, jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bucketEntries } from "../../../src/transport/nats/bucket.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";

describe("nats bucket - what a bucket holds, read to its end", { timeout: 60_000 }, () => {
  let server: TestNatsServer;
  let nc: NatsConnection;
  let writer: NatsConnection;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    writer = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await writer?.close();
    await nc?.close();
    await server?.dispose();
  });

  const decoded = (entries: Map<string, JsMsg>) =>
    new Map([...entries].map(([key, entry]) => [key, entry.string()]));

  it("bucket - an empty bucket reads as empty; deleted and purged keys are left out", async () => {
    const kv = await new Kvm(jetstream(nc)).create("plain", { history: 1 });
    expect((await bucketEntries(nc, "plain")).size).toBe(0);
    for (let i = 0; i < 20; i++) await kv.put(`k${i}`, `v${i}`);
    await kv.delete("k3");
    await kv.purge("k4");
    await kv.put("k5", "newer");
    const entries = decoded(await bucketEntries(nc, "plain"));
    expect(entries.size).toBe(18);
    expect(entries.has("k3")).toBe(false);
    expect(entries.has("k4")).toBe(false);
    expect(entries.get("k5")).toBe("newer");
    expect(entries.get("k19")).toBe("v19");
    // The keys alone: the same keys, without their values.
    const keys = await bucketEntries(nc, "plain", { keysOnly: true });
    expect([...keys.keys()].sort()).toEqual([...entries.keys()].sort());
    expect(keys.get("k5")?.data.length).toBe(0);
  });

  it("bucket - a read while another connection writes without pause ends, with every key left alone meanwhile", async () => {
    const kv = await new Kvm(jetstream(writer)).create("busy", { history: 1 });
    const keys = Array.from({ length: 300 }, (_, i) => `node-${i}`);
    for (const key of keys) await kv.put(key, "first");
    // The writer rewrites the first half over and over; the second half stays as it was.
    const busy = keys.slice(0, 150);
    const still = keys.slice(150);
    let writing = true;
    let writes = 0;
    const writer$ = (async () => {
      while (writing) {
        await kv.put(busy[writes % busy.length]!, `write-${writes}`);
        writes++;
      }
    })();
    try {
      for (let round = 0; round < 10; round++) {
        const began = Date.now();
        const entries = decoded(await bucketEntries(nc, "busy"));
        expect(Date.now() - began).toBeLessThan(5_000);
        for (const key of still) expect(entries.get(key), `round ${round}`).toBe("first");
        for (const key of entries.keys()) expect(keys).toContain(key);
      }
    } finally {
      writing = false;
      await writer$;
    }
    expect(writes).toBeGreaterThan(10);
  });
});
