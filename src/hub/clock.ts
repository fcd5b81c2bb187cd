/**
 * Time as the hub sees it. Everything that waits (backoff, leases, soak, silence) asks this clock,
 * so a test drives minutes of retries by advancing a clock instead of sleeping.
 */
export interface Clock {
  now(): Date;
  /** Calls `fn` once after `ms` milliseconds of this clock's time; returns a function that cancels it. */
  schedule(ms: number, fn: () => void): () => void;
}

/** The wall clock and real timers. Timers never keep the process alive on their own. */
export const systemClock: Clock = {
  now: () => new Date(),
  schedule(ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms));
    timer.unref?.();
    return () => clearTimeout(timer);
  },
};
