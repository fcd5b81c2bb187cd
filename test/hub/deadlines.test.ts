/**
 * Deadlines on one clock timer: each key fires once, at the time last set for it, in time order,
 * whatever was set and deleted before; the heap's passed-over slots do not pile up.
 */
import { describe, expect, it } from "vitest";
import { Deadlines } from "../../src/hub/deadlines.js";
import { FakeClock } from "./helpers/clock.js";

function watched() {
  const clock = new FakeClock();
  const fired: string[] = [];
  const deadlines = new Deadlines<string>(clock, (keys) => fired.push(...keys));
  const at = (ms: number) => clock.now().getTime() + ms;
  return { clock, fired, deadlines, at };
}

describe("deadlines", () => {
  it("deadlines - a key set again fires once, at its last time, earlier or later than before", () => {
    const { clock, fired, deadlines, at } = watched();
    deadlines.set("late", at(1_000));
    deadlines.set("late", at(3_000));
    deadlines.set("early", at(2_000));
    deadlines.set("early", at(500));
    expect(clock.pending()).toEqual([500]);
    clock.advance(499);
    expect(fired).toEqual([]);
    clock.advance(1);
    expect(fired).toEqual(["early"]);
    clock.advance(2_000);
    expect(fired).toEqual(["early"]);
    clock.advance(500);
    expect(fired).toEqual(["early", "late"]);
    clock.advance(10_000);
    expect(fired).toEqual(["early", "late"]);
    expect(deadlines.size).toBe(0);
    expect(clock.pending()).toEqual([]);
  });

  it("deadlines - keys due together fire in time order in one call; a deleted key never fires", () => {
    const clock = new FakeClock();
    const calls: string[][] = [];
    const deadlines = new Deadlines<string>(clock, (keys) => calls.push(keys));
    const now = clock.now().getTime();
    for (const [key, ms] of [
      ["c", 300],
      ["b", 100],
      ["gone", 100],
      ["a", 50],
    ] as const)
      deadlines.set(key, now + ms);
    deadlines.delete("gone");
    expect(deadlines.has("gone")).toBe(false);
    expect(deadlines.get("b")).toBe(now + 100);
    // The one timer fires at 50, then at 100 and 300; a clock that wakes late finds "a" and "b" due.
    clock.advance(1_000);
    expect(calls).toEqual([["a"], ["b"], ["c"]]);
  });

  it("deadlines - a timer that wakes late fires every key due by then in one call, in time order", () => {
    let time = 0;
    let wake: (() => void) | undefined;
    const lateClock = {
      now: () => new Date(time),
      schedule: (_ms: number, fn: () => void) => {
        wake = fn;
        return () => {
          wake = undefined;
        };
      },
    };
    const calls: string[][] = [];
    const deadlines = new Deadlines<string>(lateClock, (keys) => calls.push(keys));
    for (const [key, at] of [
      ["z", 300],
      ["y", 200],
      ["x", 100],
    ] as const)
      deadlines.set(key, at);
    time = 250;
    wake?.();
    expect(calls).toEqual([["x", "y"]]);
    time = 300;
    wake?.();
    expect(calls).toEqual([["x", "y"], ["z"]]);
  });

  it("deadlines - a key set from its own firing fires again; clear forgets everything", () => {
    const clock = new FakeClock();
    let count = 0;
    const deadlines: Deadlines<string> = new Deadlines<string>(clock, () => {
      count++;
      if (count < 3) deadlines.set("again", clock.now().getTime() + 100);
    });
    deadlines.set("again", clock.now().getTime() + 100);
    clock.advance(1_000);
    expect(count).toBe(3);
    deadlines.set("x", clock.now().getTime() + 100);
    deadlines.clear();
    clock.advance(1_000);
    expect(count).toBe(3);
    expect(clock.pending()).toEqual([]);
  });

  it("deadlines - 10,000 keys moved on 100 times each keep the heap near their number and fire once each", () => {
    const { clock, fired, deadlines } = watched();
    const start = clock.now().getTime();
    const keys = Array.from({ length: 10_000 }, (_, i) => `node-${i}`);
    for (let round = 1; round <= 100; round++)
      for (const [i, key] of keys.entries()) deadlines.set(key, start + round * 1_000 + i);
    const slots = (deadlines as unknown as { times: number[] }).times.length;
    expect(slots).toBeLessThanOrEqual(2 * keys.length + 64);
    clock.advance(100 * 1_000 + keys.length);
    expect(fired).toHaveLength(keys.length);
    expect(new Set(fired).size).toBe(keys.length);
    expect(fired).toEqual(keys);
  });
});
