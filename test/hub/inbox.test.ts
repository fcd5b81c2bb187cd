import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { HubStoppedError, Inbox } from "../../src/hub/inbox.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";

describe("hub - inbox", () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  function open(): { store: SqliteStore; inbox: Inbox; units: () => number } {
    const dir = mkdtempSync(join(tmpdir(), "steward-inbox-"));
    const store = new SqliteStore(join(dir, "hub.db"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    cleanups.push(() => store.close());
    let units = 0;
    const counted: SqliteStore = Object.create(store);
    counted.transaction = (work) => {
      units++;
      return store.transaction(work);
    };
    const inbox = new Inbox({ store: counted, log: pino({ level: "silent" }), flushed: () => undefined });
    return { store, inbox, units: () => units };
  }

  it("hub - a backlog of events is recorded in the order it came, in units of at most 1,024, whatever comes while it is recorded", async () => {
    const { store, inbox, units } = open();
    // The store is busy: what the transports deliver meanwhile waits.
    let release!: () => void;
    let busy!: Promise<void>;
    await new Promise<void>((holding) => {
      busy = store.transaction(
        () =>
          new Promise<void>((resolve) => {
            release = resolve;
            holding();
          }),
      );
    });
    const recorded: number[] = [];
    const deliveries: Promise<void>[] = [];
    const deliver = (n: number) =>
      deliveries.push(
        inbox.deliver({ event: "report", transport: "test" }, async (tx) => {
          await tx.meta.set("last", String(n));
          recorded.push(n);
          // Events that come while a batch is recorded go after everything that waited before them.
          if (n <= 5_000 && n % 1_000 === 0) for (let m = 0; m < 3; m++) deliver(100_000 + n + m);
        }),
      );
    for (let n = 1; n <= 5_000; n++) deliver(n);
    release();
    await busy;
    while (inbox.busy) await inbox.flush();
    await Promise.all(deliveries);
    const late = [1_000, 2_000, 3_000, 4_000, 5_000].flatMap((n) => [0, 1, 2].map((m) => 100_000 + n + m));
    expect(recorded).toEqual([...Array.from({ length: 5_000 }, (_, i) => i + 1), ...late]);
    expect(await store.meta.get("last")).toBe(String(late.at(-1)));
    // 5,015 events, never a unit each: 5,000 and the twelve late ones that came before the last
    // unit began fill five; the three delivered while the fifth was recorded are a sixth.
    expect(units()).toBe(6);
  });

  it("hub - an event that fails is refused alone; a closed inbox refuses what comes after", async () => {
    const { store, inbox } = open();
    const first = inbox.deliver({ event: "result", transport: "test" }, (tx) => tx.meta.set("first", "yes"));
    const failing = inbox.deliver({ event: "result", transport: "test" }, async (tx) => {
      await tx.meta.set("failing", "yes");
      throw new Error("cannot record this one");
    });
    const third = inbox.deliver({ event: "result", transport: "test" }, (tx) => tx.meta.set("third", "yes"));
    await expect(first).resolves.toBeUndefined();
    await expect(failing).rejects.toThrow("cannot record this one");
    await expect(third).resolves.toBeUndefined();
    expect([
      await store.meta.get("first"),
      await store.meta.get("failing"),
      await store.meta.get("third"),
    ]).toEqual(["yes", undefined, "yes"]);
    await inbox.close();
    await expect(
      inbox.deliver({ event: "result", transport: "test" }, async () => undefined),
    ).rejects.toBeInstanceOf(HubStoppedError);
  });
});
