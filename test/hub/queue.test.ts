/**
 * The reconciler's work queue: a key at most once, timers for a later look, and the earlier of two
 * timers for a key wins.
 */
import { describe, expect, it } from "vitest";
import { WorkQueue } from "../../src/hub/queue.js";
import { FakeClock } from "./helpers/clock.js";

describe("work queue", () => {
  it("queue - a key is queued once; an earlier timer replaces a later one and fires once", () => {
    const clock = new FakeClock();
    const queue = new WorkQueue(clock, () => undefined);
    queue.addAll(["a", "b", "a"]);
    expect(queue.take(10)).toEqual(["a", "b"]);
    queue.addAt("c", clock.now().getTime() + 1_000);
    queue.addAt("c", clock.now().getTime() + 500);
    queue.addAt("c", clock.now().getTime() + 2_000);
    expect(clock.pending()).toEqual([500]);
    clock.advance(499);
    expect(queue.take(10)).toEqual([]);
    clock.advance(1);
    expect(queue.take(10)).toEqual(["c"]);
    clock.advance(5_000);
    expect(queue.take(10)).toEqual([]);
  });

  it("queue - many keys wait on one clock timer and come due in time order, each once", () => {
    const clock = new FakeClock();
    const ready: string[][] = [];
    const queue = new WorkQueue(clock, () => ready.push(queue.take(1_000)));
    const start = clock.now().getTime();
    // 1,000 keys in a shuffled order of times, then half of them moved earlier.
    for (let i = 0; i < 1_000; i++) queue.addAt(`k${i}`, start + 1 + ((i * 7_919) % 1_000) * 10);
    for (let i = 0; i < 1_000; i += 2) queue.addAt(`k${i}`, start + 1 + ((i * 7_919) % 1_000) * 5);
    expect(clock.pending()).toEqual([1]);
    expect(queue.delayed).toBe(1_000);
    const seen = new Map<string, number>();
    for (let t = 0; t <= 10_000; t += 250) {
      clock.advance(t === 0 ? 0 : 250);
      for (const key of ready.flat()) {
        expect(seen.has(key)).toBe(false);
        seen.set(key, clock.now().getTime() - start);
      }
      ready.length = 0;
    }
    expect(seen.size).toBe(1_000);
    expect(queue.delayed).toBe(0);
    expect(clock.pending()).toEqual([]);
    for (let i = 0; i < 1_000; i++) {
      const due = 1 + ((i * 7_919) % 1_000) * (i % 2 === 0 ? 5 : 10);
      // Seen at the first look (every 250 ms) at or after its time, never before it.
      expect(seen.get(`k${i}`)).toBe(Math.ceil(due / 250) * 250);
    }
  });

  it("queue - a key taken to be reconciled loses its timer, and the heap lets go of the slots it leaves", () => {
    const clock = new FakeClock();
    const queue = new WorkQueue(clock, () => undefined);
    const start = clock.now().getTime();
    for (let i = 0; i < 2_000; i++) queue.addAt(`k${i}`, start + 10_000 + i);
    queue.addAt("kept", start + 20_000);
    // Every k is reconciled now (a report came in for each): their timers are the reconcile's to set.
    queue.addAll(Array.from({ length: 2_000 }, (_, i) => `k${i}`));
    expect(queue.take(5_000)).toHaveLength(2_000);
    expect(queue.delayed).toBe(1);
    // The stale slots were dropped: the clock timer is the one for the key still waiting.
    expect(clock.pending()).toEqual([20_000]);
    clock.advance(15_000);
    expect(queue.take(10)).toEqual([]);
    clock.advance(5_000);
    expect(queue.take(10)).toEqual(["kept"]);
    // A timer set again after the take fires as asked.
    queue.addAt("k1", clock.now().getTime() + 100);
    clock.advance(100);
    expect(queue.take(10)).toEqual(["k1"]);
  });

  it("queue - clear drops every timer", () => {
    const clock = new FakeClock();
    const queue = new WorkQueue(clock, () => undefined);
    queue.addAt("a", clock.now().getTime() + 100);
    queue.addAt("b", clock.now().getTime() + 50);
    queue.clear();
    expect(clock.pending()).toEqual([]);
    clock.advance(1_000);
    expect(queue.take(10)).toEqual([]);
    queue.addAt("c", clock.now().getTime() + 10);
    clock.advance(10);
    expect(queue.take(10)).toEqual(["c"]);
  });
});
