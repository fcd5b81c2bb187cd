/**
 * The reconciler's work queue (controller-runtime style): instance keys, each at most once in the
 * queue, plus per-key timers for "look again at T" (leases, backoff, soak). A key added while it is
 * queued is not queued twice; an earlier timer replaces a later one.
 */
import type { Clock } from "./clock.js";

export class WorkQueue {
  private readonly ready = new Set<string>();
  private readonly timers = new Map<string, { at: number; cancel: () => void }>();

  constructor(
    private readonly clock: Clock,
    /** Called whenever a key becomes ready. */
    private readonly onReady: () => void,
  ) {}

  get size(): number {
    return this.ready.size;
  }

  /** Keys waiting on a timer. */
  get delayed(): number {
    return this.timers.size;
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
    const delay = at - this.clock.now().getTime();
    if (delay <= 0) {
      this.add(key);
      return;
    }
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    existing?.cancel();
    const cancel = this.clock.schedule(delay, () => {
      this.timers.delete(key);
      this.add(key);
    });
    this.timers.set(key, { at, cancel });
  }

  /** Takes up to `max` ready keys, oldest first. */
  take(max: number): string[] {
    const keys: string[] = [];
    for (const key of this.ready) {
      if (keys.length >= max) break;
      keys.push(key);
    }
    for (const key of keys) this.ready.delete(key);
    return keys;
  }

  clear(): void {
    for (const timer of this.timers.values()) timer.cancel();
    this.timers.clear();
    this.ready.clear();
  }
}
