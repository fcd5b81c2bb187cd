/**
 * The reconciler's work queue (controller-runtime style): instance keys, each at most once in the
 * queue, plus per-key timers for "look again at T" (leases, backoff, soak). A key added while it is
 * queued is not queued twice; an earlier timer replaces a later one.
 *
 * The timers are deadlines on one clock timer (see deadlines.ts): a rollout of 100,000 instances
 * leaves a lease timer on each.
 */
import type { Clock } from "./clock.js";
import { Deadlines } from "./deadlines.js";

export class WorkQueue {
  private readonly ready = new Set<string>();
  /** The time each waiting key is due (the earliest asked for). */
  private readonly due: Deadlines<string>;

  constructor(
    private readonly clock: Clock,
    /** Called whenever a key becomes ready. */
    private readonly onReady: () => void,
  ) {
    this.due = new Deadlines(clock, (keys) => this.addAll(keys));
  }

  get size(): number {
    return this.ready.size;
  }

  /** Keys waiting on a timer. */
  get delayed(): number {
    return this.due.size;
  }

  add(key: string): void {
    this.ready.add(key);
    this.onReady();
  }

  addAll(keys: Iterable<string>): void {
    let any = false;
    for (const key of keys) {
      this.ready.add(key);
      any = true;
    }
    if (any) this.onReady();
  }

  /** Queues `key` at time `at` (ms since the epoch, on this queue's clock). */
  addAt(key: string, at: number): void {
    if (at - this.clock.now().getTime() <= 0) {
      this.add(key);
      return;
    }
    const existing = this.due.get(key);
    if (existing !== undefined && existing <= at) return;
    this.due.set(key, at);
  }

  /**
   * Takes up to `max` ready keys, oldest first. A key taken loses its timer: it is taken to be
   * reconciled, and the reconcile says when to look again (or the error that stops it does). A
   * converged fleet holds no timer per instance until its leases would have passed.
   */
  take(max: number): string[] {
    const keys: string[] = [];
    for (const key of this.ready) {
      if (keys.length >= max) break;
      keys.push(key);
    }
    for (const key of keys) {
      this.ready.delete(key);
      this.due.delete(key);
    }
    return keys;
  }

  clear(): void {
    this.due.clear();
    this.ready.clear();
  }
}
