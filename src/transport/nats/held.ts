/**
 * Messages a consumer holds while the hub records them, kept from being redelivered meanwhile.
 *
 * A shard's consumer hands the server's messages to the hub as they arrive and acknowledges each
 * once recorded. When the hub falls behind (100,000 results at once, a store that is slow for a
 * moment), a message can wait in the inbox longer than its ack deadline; the server then delivers
 * it again, the hub records it twice, falls further behind, and after `max_deliver` the message is
 * given up. So a message held past half its deadline is marked in progress (`+WPI`), which restarts
 * its deadline: a live replica keeps what it holds, and a dead one stops marking, so its messages
 * come back within one deadline as before. One timer for all of them, and only the old ones cost a
 * publish, so a hub that keeps up sends none.
 */
export interface Workable {
  working(): void;
}

export class HeldMessages {
  private readonly held = new Map<Workable, number>();
  private timer: NodeJS.Timeout | undefined;

  /** `deadlineMs`: the consumer's ack wait; `now`: the clock (tests). */
  constructor(
    private readonly deadlineMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.held.size;
  }

  /** Holds `msg` until `release`. */
  hold(msg: Workable): void {
    this.held.set(msg, this.now());
    if (this.timer) return;
    this.timer = setInterval(() => this.renew(), Math.max(1, Math.floor(this.deadlineMs / 4)));
    this.timer.unref();
  }

  /** Done with `msg` (acknowledged, refused or terminated). */
  release(msg: Workable): void {
    this.held.delete(msg);
    if (this.held.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Marks in progress every message held for half its deadline or more since it was last marked. */
  renew(): void {
    const now = this.now();
    const due = now - this.deadlineMs / 2;
    for (const [msg, since] of this.held) {
      // A Map iterates in insertion order and a renewal moves the message to the end, so the
      // oldest come first and the loop stops at the first one not due.
      if (since > due) break;
      msg.working();
      this.held.delete(msg);
      this.held.set(msg, now);
    }
  }

  /** Stops the timer; the messages are left to their deadlines. */
  clear(): void {
    this.held.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
