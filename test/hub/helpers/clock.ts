import type { Clock } from "../../../src/hub/clock.js";

/** A clock that moves only when the test says so; its timers fire in time order as it advances. */
export class FakeClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start = Date.parse("2026-01-01T00:00:00.000Z")) {
    this.time = start;
  }

  now(): Date {
    return new Date(this.time);
  }

  schedule(ms: number, fn: () => void): () => void {
    const id = ++this.seq;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    return () => this.timers.delete(id);
  }

  /** Moves time forward by `ms`, firing each due timer at its own time (later timers see later times). */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers)
        if (entry[1].at <= end && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.timers.delete(next[0]);
      this.time = Math.max(this.time, next[1].at);
      next[1].fn();
    }
    this.time = end;
  }

  /** Pending timers, soonest first (for assertions about what the hub waits for). */
  pending(): number[] {
    return [...this.timers.values()].map((t) => t.at - this.time).sort((a, b) => a - b);
  }
}
