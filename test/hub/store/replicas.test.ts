/**
 * Replicas' leases and fencing, on every store: two replicas over one database divide the shards,
 * a replica that stopped renewing loses them to the other (with greater tokens), and a unit of work
 * it then runs about those nodes is refused whole — nothing of it is written — while the holder's
 * goes through. The division is the same whoever computes it.
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { Clock } from "../../../src/hub/clock.js";
import type { IntentRecord } from "../../../src/hub/records.js";
import { Replica, shardOwner } from "../../../src/hub/replicas/replica.js";
import { FencedError } from "../../../src/hub/store/store.js";
import { SHARDS, shardOf } from "../../../src/model/shards.js";
import { eventually as eventuallyOr } from "../helpers/process.js";
import { intentOf, type StoreKind, storeKinds } from "./stores.js";

/** A clock the test moves; timers never fire on their own (renewals are driven by hand). */
function manualClock(start: number): Clock & { advance(ms: number): void } {
  let now = start;
  return {
    now: () => new Date(now),
    schedule: () => () => undefined,
    advance(ms) {
      now += ms;
    },
  };
}

function intent(node: string): IntentRecord {
  return intentOf(`app@${node}`);
}

/** A node name in each shard `replica` should hold among `replicas`. */
function nodeOf(replica: string, replicas: string[]): string {
  for (let i = 0; ; i++) {
    const name = `node-${i}`;
    if (shardOwner(shardOf(name), replicas) === replica) return name;
  }
}

/** Two replicas, r-a and r-b, each on its own connection to a fresh store, on one manual clock. */
async function twoReplicas(kind: StoreKind) {
  const store = await kind.fresh();
  const other = await store.reopen();
  const log = pino({ level: "silent" });
  const clock = manualClock(Date.parse("2026-12-01T10:00:00.000Z"));
  const a = new Replica({ store, clock, log, leaseMs: 3_000, id: "r-a" });
  const b = new Replica({ store: other, clock, log, leaseMs: 3_000, id: "r-b" });
  store.useFencing(a);
  other.useFencing(b);
  return { store, other, clock, a, b };
}

describe("replicas - dividing shards", () => {
  it("replicas - rendezvous hashing gives every shard one live replica, the same whoever asks, and moves only the leaver's", () => {
    const three = ["r-a", "r-b", "r-c"];
    const owners = Array.from({ length: SHARDS }, (_, s) => shardOwner(s, three));
    expect(new Set(owners)).toEqual(new Set(three));
    expect(Array.from({ length: SHARDS }, (_, s) => shardOwner(s, [...three].reverse()))).toEqual(owners);
    const two = Array.from({ length: SHARDS }, (_, s) => shardOwner(s, ["r-a", "r-b"]));
    for (let s = 0; s < SHARDS; s++) if (owners[s] !== "r-c") expect(two[s]).toBe(owners[s]);
  });
});

describe.each(storeKinds())("store ($name) - replica leases and fencing", (kind) => {
  it("store - a replica past its lease loses its shards to the other, and its units of work about them are refused whole", async () => {
    const { store, other, clock, a, b } = await twoReplicas(kind);

    await a.start();
    expect(a.heldShards.size).toBe(SHARDS);
    expect(a.leader).toBe(true);
    await b.start();
    expect(b.heldShards.size).toBe(0); // a holds them all until it renews and gives b its share
    await a.renewNow();
    await b.renewNow();
    expect(a.heldShards.size + b.heldShards.size).toBe(SHARDS);
    expect(b.heldShards.size).toBeGreaterThan(0);
    expect(b.leader).toBe(false);

    const ofB = nodeOf("r-b", ["r-a", "r-b"]);
    const ofA = nodeOf("r-a", ["r-a", "r-b"]);
    expect(b.owns(ofB) && !a.owns(ofB) && a.owns(ofA)).toBe(true);
    // Each writes for its own nodes; a unit about another's node is refused before it writes.
    await store.transaction(async (tx) => {
      await tx.fence([ofA]);
      await tx.intents.save(intent(ofA));
    });
    await expect(
      store.transaction(async (tx) => {
        await tx.intents.save(intent(ofB));
        await tx.fence([ofB]);
      }),
    ).rejects.toBeInstanceOf(FencedError);
    expect(await store.intents.get(`app@${ofB}`, 1)).toBeUndefined();

    // a stops renewing (paused): past its lease b takes every shard, each with a greater token.
    const before = new Map((await store.replicas.leases()).map((l) => [l.name, l.token]));
    clock.advance(3_500);
    expect(a.owns(ofA)).toBe(false); // by its own clock, its leases no longer count
    await b.renewNow();
    expect(b.heldShards.size).toBe(SHARDS);
    expect(b.leader).toBe(true);
    for (const lease of await store.replicas.leases())
      if (lease.holder === "r-b" && lease.name.startsWith("shard:") && before.has(lease.name))
        expect(lease.token).toBeGreaterThanOrEqual(before.get(lease.name)!);
    const moved = (await store.replicas.leases()).find((l) => l.name === `shard:${shardOf(ofA)}`)!;
    expect(moved).toMatchObject({ holder: "r-b" });
    expect(moved.token).toBeGreaterThan(before.get(moved.name)!);

    // Resumed before it renews, a's unit of work about its old node is refused: nothing written.
    await expect(
      store.transaction(async (tx) => {
        await tx.fence([ofA]);
        await tx.intents.save({ ...intent(ofA), failures: 9 });
      }),
    ).rejects.toBeInstanceOf(FencedError);
    expect((await store.intents.get(`app@${ofA}`, 1))?.failures).toBe(0);
    // Even with its old tokens: the store has greater ones.
    expect(
      await store.transaction((tx) =>
        tx.replicas.holds("r-a", [{ name: moved.name, token: before.get(moved.name)! }]),
      ),
    ).toBe(false);
    await other.transaction(async (tx) => {
      await tx.fence([ofA]);
      await tx.intents.save({ ...intent(ofA), failures: 1 });
    });

    // Renewing, a finds its leases gone and gives up the nodes; it rejoins for its share.
    await a.renewNow();
    expect(a.heldShards.size).toBe(0);
    expect(a.owns(ofA)).toBe(false);
    await b.renewNow();
    await a.renewNow();
    expect(a.heldShards.size + b.heldShards.size).toBe(SHARDS);
    expect([...a.heldShards].some((s) => b.heldShards.has(s))).toBe(false);
    expect(a.leader).toBe(false);
    await a.stop();
    await b.stop();
    expect(await store.replicas.live(clock.now().toISOString())).toEqual([]);
  });
});

describe.each(storeKinds())("store ($name) - a replica whose process died", (kind) => {
  it("store - a replica goes on renewing while a change of its leases is still being acted on", async () => {
    const { a, b } = await twoReplicas(kind);
    await a.start();
    await b.start();
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => {
      release = resolve;
    });
    const seen: number[] = [];
    // Taking over thousands of nodes takes longer than a lease: here, until the test says.
    a.onChange(async (change) => {
      seen.push(change.lost.length);
      await blocked;
    });
    const within = (promise: Promise<unknown>) =>
      Promise.race([
        promise.then(() => "renewed"),
        new Promise((resolve) => setTimeout(() => resolve("waited"), 2_000)),
      ]);
    // This renewal gives b its share: a change, whose listener does not return.
    expect(await within(a.renewNow())).toBe("renewed");
    await b.renewNow();
    expect(await within(a.renewNow())).toBe("renewed");
    expect(a.heldShards.size + b.heldShards.size).toBe(SHARDS);
    expect(seen.length).toBe(1);
    expect(seen[0]).toBeGreaterThan(0);
    release();
    await a.stop();
    await b.stop();
  });

  it("store - a replica whose session ended is gone at once, its lease run out or not, and the other takes its shards (PostgreSQL; SQLite has no sessions)", async () => {
    const { store, clock, b } = await twoReplicas(kind);
    const dying = await store.reopen();
    const a = new Replica({ store: dying, clock, log: pino({ level: "silent" }), leaseMs: 3_000, id: "r-a" });
    await a.start();
    await b.start();
    await a.renewNow();
    await b.renewNow();
    expect(a.heldShards.size).toBeGreaterThan(0);
    expect(a.leader).toBe(true);
    const at = () => clock.now().toISOString();
    expect(await store.replicas.gone(at(), "r-b")).toEqual([]);
    const row = (await store.replicas.list()).find((r) => r.id === "r-a");
    if (kind.name !== "postgres") {
      // Without sessions only the lease says a replica lives: b waits it out.
      expect(row?.session).toBeUndefined();
      await dying.close();
      await b.renewNow();
      expect(b.heldShards.size).toBeLessThan(SHARDS);
      return;
    }
    expect(row?.session).toBe("steward r-a");
    // The process is gone: its connections end, and with them its session.
    await dying.close();
    const gone = await eventuallyOr(
      async () => {
        const ids = await store.replicas.gone(at(), "r-b");
        return ids.length > 0 ? ids : undefined;
      },
      5_000,
      "the server to drop r-a's session",
    );
    expect(gone).toEqual(["r-a"]);
    // Not a millisecond of the lease has passed: b takes every shard and the sync lease now.
    const before = new Map((await store.replicas.leases()).map((l) => [l.name, l]));
    await b.renewNow();
    expect(b.heldShards.size).toBe(SHARDS);
    expect(b.leader).toBe(true);
    for (const lease of await store.replicas.leases()) {
      expect(lease.holder).toBe("r-b");
      const earlier = before.get(lease.name)!;
      if (earlier.holder === "r-a") expect(lease.token).toBeGreaterThan(earlier.token);
    }
    expect((await store.replicas.live(at())).map((r) => r.id)).toEqual(["r-b"]);
    await b.stop();
  });
});

describe.each(storeKinds().filter((kind) => kind.name === "postgres"))(
  "store ($name) - a fence against renewals and takeovers",
  (kind) => {
    it("store - while a unit of work holds its fence, its replica renews at once, and a takeover waits for the unit to end", async () => {
      const { store, clock, a, b } = await twoReplicas(kind);
      await a.start();
      const node = "web-1";

      // a's unit of work fences the node and stays open.
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let fenced!: () => void;
      const isFenced = new Promise<void>((resolve) => {
        fenced = resolve;
      });
      const unit = store.transaction(async (tx) => {
        await tx.fence([node]);
        fenced();
        await held;
        await tx.intents.save(intent(node));
      });
      await isFenced;
      // Its own renewal does not wait for it (a renewal queued behind long units let leases lapse).
      const renewed = await Promise.race([
        a.renewNow().then(() => "renewed"),
        new Promise((resolve) => setTimeout(() => resolve("waited"), 2_000)),
      ]);
      expect(renewed).toBe("renewed");

      // a stops renewing; past its lease b takes every shard, but not while a's unit holds the fence.
      clock.advance(3_500);
      const takeover = b.start().then(() => "taken");
      const first = await Promise.race([
        takeover,
        new Promise((resolve) => setTimeout(() => resolve("waiting"), 1_000)),
      ]);
      expect(first).toBe("waiting");
      expect(b.owns(node)).toBe(false);
      release();
      await unit;
      expect(await takeover).toBe("taken");
      expect(b.owns(node)).toBe(true);
      // What a wrote under its lease is there; what it tries now is refused.
      expect(await store.intents.get(`app@${node}`, 1)).toBeDefined();
      await expect(store.transaction((tx) => tx.fence([node]))).rejects.toBeInstanceOf(FencedError);
      await a.stop();
      await b.stop();
    });
  },
);
