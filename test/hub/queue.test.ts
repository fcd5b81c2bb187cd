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
});
