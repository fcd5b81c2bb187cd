/**
 * Retry timing for transient failures: exponential backoff with jitter, capped at the slowest
 * cadence. Pure: the caller passes the random source, so tests pin it.
 */

export interface BackoffPolicy {
  /** Delay after the first failure. */
  initialMs: number;
  /** The slowest cadence: the cap, and the interval of retries once the budget is spent. */
  maxMs: number;
  /** Fraction of the delay that is randomised (0.2: ±20%), so a fleet does not retry in lockstep. */
  jitter: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 1_000, maxMs: 5 * 60_000, jitter: 0.2 };

/**
 * The delay before the next attempt after `failures` consecutive failures (1 = the first failure).
 * `random` returns a number in [0, 1). Once `budgetSpent`, retries run at the slowest cadence.
 */
export function backoffDelay(
  failures: number,
  policy: BackoffPolicy,
  random: () => number,
  budgetSpent = false,
): number {
  const base = budgetSpent
    ? policy.maxMs
    : Math.min(policy.maxMs, policy.initialMs * 2 ** Math.max(0, failures - 1));
  const spread = base * policy.jitter;
  return Math.max(0, Math.round(base - spread + random() * 2 * spread));
}

/** True when `failures` counted since `firstFailureAt` have spent the budget (attempts or time). */
export function budgetSpent(
  failures: number,
  firstFailureAtMs: number | undefined,
  nowMs: number,
  budget: { attempts: number; withinMs: number },
): boolean {
  if (failures >= budget.attempts) return true;
  return firstFailureAtMs !== undefined && nowMs - firstFailureAtMs >= budget.withinMs;
}
