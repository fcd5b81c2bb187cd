/**
 * A manual clock for the publisher's `Timers`: time moves only when a test calls `advance`, which
 * fires the timers that fall due, in order.
 */
import type { Timers } from "../../src/status/publisher.js";

interface Timer {
  at: number;
  run: () => void;
  id: number;
}

export class ManualClock implements Timers {
  #now: number;
  #timers: Timer[] = [];
  #next = 1;

  constructor(start = Date.parse("2026-01-01T00:00:00Z")) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(run: () => void, ms: number): unknown {
    const timer = { at: this.#now + Math.max(0, ms), run, id: this.#next++ };
    this.#timers.push(timer);
    return timer.id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers = this.#timers.filter((t) => t.id !== handle);
  }

  /** When the next timer fires, or undefined when none is armed. */
  get nextAt(): number | undefined {
    return this.#timers.length === 0 ? undefined : Math.min(...this.#timers.map((t) => t.at));
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = Math.max(this.#now, due.at);
      due.run();
    }
    this.#now = end;
  }
}
