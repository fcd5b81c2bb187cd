/**
 * The reconciler's work queue (controller-runtime style): instance keys, each at most once in the
 * queue, plus per-key timers for "look again at T" (leases, backoff, soak). A key added while it is
 * queued is not queued twice; an earlier timer replaces a later one.
 *
 * The timers are one clock timer for the earliest of them over a binary heap of (time, key): a
 * rollout of 100,000 instances leaves a lease timer on each, and a timer object per key cost some
 * 400 bytes where a heap slot costs 16. A replaced timer's slot stays in the heap until its time
 * and is then passed over, or until such slots are half the heap, which is then made again.
 */
import type { Clock } from "./clock.js";

export class WorkQueue {
  private readonly ready = new Set<string>();
  /** The time each waiting key is due (the earliest asked for). */
  private readonly due = new Map<string, number>();
  /** A min-heap on `heapAt`, with the key of each slot at the same index of `heapKey`. */
  private readonly heapAt: number[] = [];
  private readonly heapKey: string[] = [];
  private armed: { at: number; cancel: () => void } | undefined;

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
    this.push(at, key);
    if (!this.armed || at < this.armed.at) this.arm();
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
    if (this.heapAt.length > 1_024 && this.heapAt.length > 2 * this.due.size) this.compact();
    return keys;
  }

  clear(): void {
    this.armed?.cancel();
    this.armed = undefined;
    this.due.clear();
    this.heapAt.length = 0;
    this.heapKey.length = 0;
    this.ready.clear();
  }

  /** Drops the slots of replaced and taken timers: the heap made again from `due`. */
  private compact(): void {
    this.heapAt.length = 0;
    this.heapKey.length = 0;
    for (const [key, at] of this.due) this.push(at, key);
    if (this.heapAt[0] !== this.armed?.at) this.arm();
  }

  /** One clock timer, for the earliest slot. */
  private arm(): void {
    this.armed?.cancel();
    this.armed = undefined;
    const at = this.heapAt[0];
    if (at === undefined) return;
    const cancel = this.clock.schedule(at - this.clock.now().getTime(), () => {
      this.armed = undefined;
      this.fire();
    });
    this.armed = { at, cancel };
  }

  /** Every slot now due: its key is ready unless an earlier timer replaced it (then it was). */
  private fire(): void {
    const now = this.clock.now().getTime();
    const keys: string[] = [];
    while (this.heapAt.length > 0 && this.heapAt[0]! <= now) {
      const [at, key] = this.pop();
      if (this.due.get(key) !== at) continue;
      this.due.delete(key);
      keys.push(key);
    }
    this.arm();
    this.addAll(keys);
  }

  private push(at: number, key: string): void {
    const { heapAt, heapKey } = this;
    let i = heapAt.length;
    heapAt.push(at);
    heapKey.push(key);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heapAt[parent]! <= at) break;
      heapAt[i] = heapAt[parent]!;
      heapKey[i] = heapKey[parent]!;
      i = parent;
    }
    heapAt[i] = at;
    heapKey[i] = key;
  }

  private pop(): [number, string] {
    const { heapAt, heapKey } = this;
    const top: [number, string] = [heapAt[0]!, heapKey[0]!];
    const lastAt = heapAt.pop()!;
    const lastKey = heapKey.pop()!;
    const n = heapAt.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        let child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && heapAt[child + 1]! < heapAt[child]!) child++;
        if (heapAt[child]! >= lastAt) break;
        heapAt[i] = heapAt[child]!;
        heapKey[i] = heapKey[child]!;
        i = child;
      }
      heapAt[i] = lastAt;
      heapKey[i] = lastKey;
    }
    return top;
  }
}
