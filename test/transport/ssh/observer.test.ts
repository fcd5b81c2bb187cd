import { describe, expect, it } from "vitest";
import type { Clock } from "../../../src/hub/clock.js";
import type { Node } from "../../../src/model/generated.js";
import { ObservationScheduler } from "../../../src/transport/ssh/observer.js";

/** A clock whose timers fire only when the test advances it. */
class ManualClock implements Clock {
  private time = Date.parse("2026-03-01T10:00:00Z");
  private timers: { at: number; fn: () => void }[] = [];
  now(): Date {
    return new Date(this.time);
  }
  schedule(ms: number, fn: () => void): () => void {
    const timer = { at: this.time + ms, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }
  advance(ms: number): void {
    this.time += ms;
    const due = this.timers.filter((t) => t.at <= this.time);
    this.timers = this.timers.filter((t) => t.at > this.time);
    for (const timer of due) timer.fn();
  }
}

function node(name: string): Node {
  return {
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: { name },
    spec: { transport: "ssh", ssh: { host: `${name}.example.net` }, roots: ["/srv"] },
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("ssh observation scheduler", () => {
  it("ssh observation scheduler - asks every node for a report each interval and records when it answered", async () => {
    const clock = new ManualClock();
    const asked: string[] = [];
    const scheduler = new ObservationScheduler({
      transport: { requestReport: async (n) => void asked.push(n.metadata.name) },
      nodes: () => [node("a"), node("b")],
      intervalMs: 60_000,
      clock,
    });
    scheduler.start();
    await settle();
    expect(asked).toEqual(["a", "b"]);
    expect(scheduler.lastObserved("a")).toEqual(new Date("2026-03-01T10:00:00Z"));
    clock.advance(59_999);
    await settle();
    expect(asked).toEqual(["a", "b"]);
    clock.advance(1);
    await settle();
    expect(asked).toEqual(["a", "b", "a", "b"]);
    expect(scheduler.lastObserved("b")).toEqual(new Date("2026-03-01T10:01:00Z"));
    await scheduler.stop();
    clock.advance(60_000);
    await settle();
    expect(asked).toHaveLength(4);
  });

  it("ssh observation scheduler - skips a node whose last observation still runs, and keeps its old time on failure", async () => {
    const clock = new ManualClock();
    const asked: string[] = [];
    let releaseSlow!: () => void;
    const errors: string[] = [];
    const scheduler = new ObservationScheduler({
      transport: {
        requestReport: (n) => {
          asked.push(n.metadata.name);
          if (n.metadata.name === "slow") return new Promise<void>((resolve) => (releaseSlow = resolve));
          if (n.metadata.name === "down") return Promise.reject(new Error("ConnectionRefused"));
          return Promise.resolve();
        },
      },
      nodes: () => [node("slow"), node("fast"), node("down")],
      intervalMs: 1_000,
      clock,
      onError: (name, error) => errors.push(`${name}: ${(error as Error).message}`),
    });
    scheduler.start();
    await settle();
    clock.advance(1_000);
    await settle();
    // "slow" was still being observed, so the second round did not ask it again.
    expect(asked).toEqual(["slow", "fast", "down", "fast", "down"]);
    expect(errors).toEqual(["down: ConnectionRefused", "down: ConnectionRefused"]);
    expect(scheduler.lastObserved("down")).toBeUndefined();
    expect(scheduler.lastObserved("slow")).toBeUndefined();
    releaseSlow();
    await settle();
    expect(scheduler.lastObserved("slow")).toEqual(new Date("2026-03-01T10:00:01Z"));
    await scheduler.stop();
  });
});
