/**
 * The sync loop the hub runs: sync now, then every `intervalMs`; sync at once when triggered (a
 * webhook); after a failure (remote unreachable, credentials refused, corrupt cache) retry with
 * exponential backoff and jitter up to `maxMs`, and keep retrying at that cadence so a late fix
 * heals without a restart. The last good revision stays in the store meanwhile: a failed sync
 * changes no generation. One function owns the outcome switch.
 */
import type { SyncOptions, SyncOutcome } from "./syncer.js";

/** Timers, injectable so tests can drive the loop. */
export interface LoopTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** How retries after failed syncs are spaced. */
export interface BackoffPolicy {
  /** First retry delay. Default 1 s. */
  initialMs?: number;
  /** Longest delay. Default 5 min. */
  maxMs?: number;
  /** Growth per consecutive failure. Default 2. */
  factor?: number;
  /** Fraction of the delay randomised (±). Default 0.2. */
  jitter?: number;
}

/** What the loop runs, how often, and whom it tells. */
export interface SyncLoopOptions {
  syncer: { sync(options?: SyncOptions): Promise<SyncOutcome> };
  /** Delay between successful syncs. */
  intervalMs: number;
  backoff?: BackoffPolicy;
  timers?: LoopTimers;
  random?: () => number;
  onOutcome?(outcome: SyncOutcome): void;
  /** After a failed sync, with the consecutive failure count and the delay before the retry. */
  onError?(error: unknown, failures: number, retryInMs: number): void;
}

/** A running loop. */
export interface SyncLoop {
  /** Syncs as soon as possible (now if idle, right after the running sync otherwise). */
  trigger(): void;
  /**
   * Syncs as `trigger` does and resolves with that sync's outcome (rejects with its error), after
   * `onOutcome` or `onError` saw it: the answer to someone who asked for a sync and waits for it.
   * A sync that was already running when asked does not count: it may have fetched before the
   * push the caller is asking about.
   */
  syncNow(options?: SyncOptions): Promise<SyncOutcome>;
  /** Stops scheduling and waits for a running sync to finish. */
  stop(): Promise<void>;
  /** Consecutive failures so far (0 after a success). */
  readonly failures: number;
}

/** The delay before retry number `failures` (1-based), with jitter. */
export function backoffDelay(
  failures: number,
  policy: BackoffPolicy = {},
  random: () => number = Math.random,
): number {
  const initial = policy.initialMs ?? 1000;
  const max = policy.maxMs ?? 5 * 60_000;
  const factor = policy.factor ?? 2;
  const jitter = policy.jitter ?? 0.2;
  const base = Math.min(max, initial * factor ** Math.max(0, failures - 1));
  return Math.max(0, Math.round(base * (1 + jitter * (2 * random() - 1))));
}

/** Starts the loop; the first sync runs immediately. */
export function startSyncLoop(options: SyncLoopOptions): SyncLoop {
  const timers: LoopTimers = options.timers ?? {
    setTimeout: (callback, ms) => setTimeout(callback, ms),
    clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  };
  const random = options.random ?? Math.random;
  let failures = 0;
  let timer: unknown;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  /** Callers of `syncNow` waiting for the next sync. */
  let waiting: { options: SyncOptions; resolve(outcome: SyncOutcome): void; reject(error: unknown): void }[] =
    [];

  const schedule = (ms: number) => {
    if (stopped) return;
    timer = timers.setTimeout(() => {
      timer = undefined;
      run();
    }, ms);
  };

  const run = () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    if (timer !== undefined) {
      timers.clearTimeout(timer);
      timer = undefined;
    }
    // One sync answers every waiter that asked the same; one that asked otherwise waits for the next.
    const acceptRewrite = waiting[0]?.options.acceptRewrite === true;
    const answered = waiting.filter((w) => (w.options.acceptRewrite === true) === acceptRewrite);
    waiting = waiting.filter((w) => !answered.includes(w));
    if (waiting.length > 0) again = true;
    running = (async () => {
      let delay: number;
      try {
        const outcome = await options.syncer.sync(acceptRewrite ? { acceptRewrite } : {});
        failures = 0;
        delay = options.intervalMs;
        options.onOutcome?.(outcome);
        for (const w of answered) w.resolve(outcome);
      } catch (error) {
        failures++;
        delay = backoffDelay(failures, options.backoff, random);
        options.onError?.(error, failures, delay);
        for (const w of answered) w.reject(error);
      }
      running = undefined;
      if (again) {
        again = false;
        run();
      } else schedule(delay);
    })();
  };

  run();
  return {
    trigger: run,
    syncNow(syncOptions = {}) {
      if (stopped) return Promise.reject(new Error("the sync loop has stopped"));
      return new Promise((resolve, reject) => {
        waiting.push({ options: syncOptions, resolve, reject });
        run();
      });
    },
    async stop() {
      stopped = true;
      if (timer !== undefined) timers.clearTimeout(timer);
      timer = undefined;
      await running;
      for (const w of waiting.splice(0)) w.reject(new Error("the sync loop has stopped"));
    },
    get failures() {
      return failures;
    },
  };
}
