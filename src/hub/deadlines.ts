/**
 * Deadlines by key on one clock timer: each key is due once, at the time last set for it, and
 * `fire` is told of the keys due, in time order. A rollout of 100,000 instances leaves a lease
 * deadline on each (the work queue), a fleet of 10,000 nodes a silence deadline on each (liveness,
 * heartbeats): a timer per key cost some 400 bytes (a Timeout object, its closure and its list
 * entry) where a heap slot costs 16.
 *
 * The times wait in a binary min-heap. Setting a key again pushes its new time and leaves the old
 * slot where it is: a slot whose time is no longer its key's is passed over when it comes up, and
 * the heap is made again from the keys' times once such slots outnumber the keys.
 */
import type { Clock } from "./clock.js";

export class Deadlines<K> {
  /** Each key's time, ms since the epoch: the only entry of the heap that counts for it. */
  private readonly due = new Map<K, number>();
  /** The heap, as two arrays (times stay unboxed doubles): entry i has children 2i+1 and 2i+2. */
  private times: number[] = [];
  private keys: K[] = [];
  /** The time the timer is armed for (Infinity: none), and how to cancel it. */
  private armedAt = Number.POSITIVE_INFINITY;
  private cancel: (() => void) | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly fire: (keys: K[]) => void,
  ) {}

  get size(): number {
    return this.due.size;
  }

  has(key: K): boolean {
    return this.due.has(key);
  }

  /** When `key` is due (ms since the epoch), if it is. */
  get(key: K): number | undefined {
    return this.due.get(key);
  }

  /** Makes `key` due at `at` (ms since the epoch), whatever it was due at before. */
  set(key: K, at: number): void {
    this.due.set(key, at);
    this.push(at, key);
    if (this.times.length >= 2 * this.due.size) this.rebuild();
    else this.arm();
  }

  delete(key: K): void {
    if (this.due.delete(key) && this.times.length >= 2 * this.due.size) this.rebuild();
  }

  /** Forgets every key; nothing fires until a key is set again. */
  clear(): void {
    this.due.clear();
    this.times = [];
    this.keys = [];
    this.disarm();
  }

  /** Fires the keys due by now, then arms the timer for the next one. */
  private expire(): void {
    this.armedAt = Number.POSITIVE_INFINITY;
    this.cancel = undefined;
    const now = this.clock.now().getTime();
    const keys: K[] = [];
    while (this.times.length > 0 && this.times[0]! <= now) {
      const at = this.times[0]!;
      const key = this.keys[0]!;
      this.pop();
      if (this.due.get(key) !== at) continue;
      this.due.delete(key);
      keys.push(key);
    }
    this.arm();
    if (keys.length > 0) this.fire(keys);
  }

  /** Arms the timer for the heap's first time when it is earlier than the one armed. */
  private arm(): void {
    const first = this.times[0];
    if (first === undefined || first >= this.armedAt) return;
    this.disarm();
    this.armedAt = first;
    this.cancel = this.clock.schedule(Math.max(0, first - this.clock.now().getTime()), () => this.expire());
  }

  private disarm(): void {
    this.cancel?.();
    this.cancel = undefined;
    this.armedAt = Number.POSITIVE_INFINITY;
  }

  /** The heap made again from each key's time (the passed-over slots dropped), and its timer. */
  private rebuild(): void {
    this.times = [];
    this.keys = [];
    for (const [key, at] of this.due) this.push(at, key);
    if (this.times[0] !== this.armedAt) this.disarm();
    this.arm();
  }

  private push(at: number, key: K): void {
    const { times, keys } = this;
    let i = times.length;
    times.push(at);
    keys.push(key);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (times[parent]! <= at) break;
      times[i] = times[parent]!;
      keys[i] = keys[parent]!;
      i = parent;
    }
    times[i] = at;
    keys[i] = key;
  }

  private pop(): void {
    const { times, keys } = this;
    const at = times.pop()!;
    const key = keys.pop()!;
    const n = times.length;
    if (n === 0) return;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && times[child + 1]! < times[child]!) child++;
      if (times[child]! >= at) break;
      times[i] = times[child]!;
      keys[i] = keys[child]!;
      i = child;
    }
    times[i] = at;
    keys[i] = key;
  }
}
