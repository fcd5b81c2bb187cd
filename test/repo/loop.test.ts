import { describe, expect, it } from "vitest";
import { RemoteUnreachableError } from "../../src/repo/errors.js";
import { backoffDelay, type LoopTimers, startSyncLoop } from "../../src/repo/loop.js";
import type { SyncOutcome } from "../../src/repo/syncer.js";

/** Timers the test fires by hand; records each scheduled delay. */
function manualTimers() {
  const pending = new Map<number, () => void>();
  const delays: number[] = [];
  let next = 0;
  const timers: LoopTimers = {
    setTimeout(callback, ms) {
      delays.push(ms);
      pending.set(++next, callback);
      return next;
    },
    clearTimeout(handle) {
      pending.delete(handle as number);
    },
  };
  const fire = async () => {
    const [id, callback] = [...pending.entries()][0] ?? [];
    if (id === undefined) throw new Error("no timer pending");
    pending.delete(id);
    callback!();
    await settle();
  };
  return { timers, delays, fire, pending };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
const upToDate: SyncOutcome = { kind: "up-to-date", branch: "main", head: "h" };

describe("sync loop", () => {
  it("loop - backoff doubles per failure up to the maximum, with bounded jitter", () => {
    const policy = { initialMs: 1000, maxMs: 10_000, jitter: 0 };
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, policy))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
    expect(backoffDelay(1, { initialMs: 1000, jitter: 0.2 }, () => 0)).toBe(800);
    expect(backoffDelay(1, { initialMs: 1000, jitter: 0.2 }, () => 1)).toBe(1200);
  });

  it("loop - failures back off, a success resets to the interval, and stop ends scheduling", async () => {
    const script: (SyncOutcome | Error)[] = [
      new RemoteUnreachableError("u", "ECONNREFUSED"),
      new RemoteUnreachableError("u", "ECONNREFUSED"),
      upToDate,
      new RemoteUnreachableError("u", "ECONNREFUSED"),
    ];
    const errors: number[] = [];
    const { timers, delays, fire, pending } = manualTimers();
    const loop = startSyncLoop({
      syncer: {
        sync: async () => {
          const next = script.shift()!;
          if (next instanceof Error) throw next;
          return next;
        },
      },
      intervalMs: 60_000,
      backoff: { initialMs: 100, jitter: 0 },
      timers,
      onError: (_, failures) => errors.push(failures),
    });
    await settle();
    expect(delays).toEqual([100]);
    await fire();
    expect(delays).toEqual([100, 200]);
    expect(loop.failures).toBe(2);
    await fire();
    expect(delays).toEqual([100, 200, 60_000]);
    expect(loop.failures).toBe(0);
    await fire();
    expect(delays).toEqual([100, 200, 60_000, 100]);
    expect(errors).toEqual([1, 2, 1]);
    await loop.stop();
    expect(pending.size).toBe(0);
  });

  it("loop - a trigger during a sync runs one more sync right after it; a trigger while idle runs at once", async () => {
    let calls = 0;
    let release: (() => void) | undefined;
    const { timers, delays } = manualTimers();
    const loop = startSyncLoop({
      syncer: {
        sync: () => {
          calls++;
          return new Promise<SyncOutcome>((resolve) => {
            release = () => resolve(upToDate);
          });
        },
      },
      intervalMs: 60_000,
      timers,
    });
    expect(calls).toBe(1);
    loop.trigger();
    loop.trigger();
    expect(calls).toBe(1);
    release!();
    await settle();
    expect(calls).toBe(2);
    release!();
    await settle();
    expect(delays).toEqual([60_000]);
    loop.trigger();
    expect(calls).toBe(3);
    release!();
    await loop.stop();
  });

  it("loop - syncNow answers with a sync begun after it asked, with its options; one asking otherwise waits for the next", async () => {
    const asked: (boolean | undefined)[] = [];
    const releases: (() => void)[] = [];
    const heads = ["first", "second", "third"];
    const { timers } = manualTimers();
    const loop = startSyncLoop({
      syncer: {
        sync: (options) => {
          asked.push(options?.acceptRewrite);
          const head = heads.shift()!;
          return new Promise<SyncOutcome>((resolve) => {
            releases.push(() => resolve({ ...upToDate, head }));
          });
        },
      },
      intervalMs: 60_000,
      timers,
    });
    // The first sync runs already: it may have fetched before the push the caller asks about.
    const plain = loop.syncNow();
    const adopting = loop.syncNow({ acceptRewrite: true });
    releases.shift()!();
    await settle();
    expect(asked).toEqual([undefined, undefined]);
    releases.shift()!();
    expect(await plain).toMatchObject({ head: "second" });
    await settle();
    expect(asked).toEqual([undefined, undefined, true]);
    releases.shift()!();
    expect(await adopting).toMatchObject({ head: "third" });
    await loop.stop();
    await expect(loop.syncNow()).rejects.toThrow("the sync loop has stopped");
  });

  it("loop - syncNow rejects with the sync's error, and the loop backs off as for any failure", async () => {
    const errors: number[] = [];
    const { timers, delays } = manualTimers();
    let fail = false;
    const loop = startSyncLoop({
      syncer: {
        sync: async () => {
          if (fail) throw new RemoteUnreachableError("u", "ECONNREFUSED");
          return upToDate;
        },
      },
      intervalMs: 60_000,
      backoff: { initialMs: 100, jitter: 0 },
      timers,
      onError: (_, failures) => errors.push(failures),
    });
    await settle();
    fail = true;
    await expect(loop.syncNow()).rejects.toThrow("cannot reach u: ECONNREFUSED");
    expect(errors).toEqual([1]);
    expect(delays).toEqual([60_000, 100]);
    await loop.stop();
  });
});
