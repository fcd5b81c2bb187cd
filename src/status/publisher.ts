/**
 * The StatusPublisher: takes the latest desired statuses from the hub as often as it likes and
 * posts only what changed, in few writes, without ever making reconciliation wait.
 *
 * - `publish` only updates an in-memory map (latest per commit and context wins) and arms a timer:
 *   a burst of updates in one debounce window becomes one write per context.
 * - At flush time each status is compared with what the destination last acknowledged (SQLite,
 *   table `commit_statuses`): equal ones are dropped, also across restarts; the rest are recorded as
 *   desired first, so a restart finishes the job.
 * - Each destination (writer) has its own lane: GitHub being down never delays git notes. Writes
 *   in a lane are sequential (forges rate-limit concurrent writers).
 * - Rate limits pause the lane for the time the forge asked (`Retry-After`, rate-limit reset). An
 *   outage (5xx, network) keeps the latest state, backs off exponentially and posts it when the
 *   forge returns. A refused status (404, 422) is held for the slowest cadence while the others go
 *   on; a refused token (401, 403) pauses the whole lane for it. Failing and recovering are
 *   reported through `onHealth`, which the hub turns into `StatusWriteFailing`.
 * - `publish` records nothing durable: until the next flush (one debounce) the latest state lives
 *   in memory only, which is fine because the hub, being level-based, publishes again after a restart.
 */

import {
  type CommitStatus,
  fitDescription,
  type StatusHealth,
  type StatusSink,
  StatusWriteError,
  type StatusWriter,
  sameStatus,
} from "../hub/status.js";
import type { Store } from "../hub/store/store.js";
import { StewardError } from "../model/errors.js";

/** The clock and timers the publisher runs on; tests pass a manual clock. */
export interface Timers {
  now(): number;
  setTimeout(run: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemTimers: Timers = {
  now: () => Date.now(),
  setTimeout: (run, ms) => {
    const handle = setTimeout(run, ms);
    // A pending status write never keeps the process alive on its own.
    handle.unref?.();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface StatusPublisherOptions {
  /** The hub's store: its `statuses` port keeps what is desired and what was posted. */
  store: Store;
  writers: readonly StatusWriter[];
  onHealth?: (health: StatusHealth) => void;
  /** Called with what should never happen (a database error); the publisher keeps going. */
  onError?: (error: unknown) => void;
  timers?: Timers;
  /** Updates within this window are coalesced into one write per context. Default 2 s. */
  debounceMs?: number;
  /** First wait after a failed write; doubles per consecutive failure up to `maxBackoffMs`. Default 1 s. */
  initialBackoffMs?: number;
  /** The slowest cadence: longest backoff, and how long a refused status waits. Default 5 min. */
  maxBackoffMs?: number;
  /** A rate limit asking for a longer wait is reported as failing (`RateLimited`). Default 60 s. */
  rateLimitFailingAfterMs?: number;
}

function keyOf(status: Pick<CommitStatus, "sha" | "context">): string {
  return `${status.sha} ${status.context}`;
}

const SHA = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/** Refusals that concern the credentials, not the status: no other status would fare better. */
const REFUSES_EVERYTHING = new Set(["Unauthorized", "Forbidden"]);

/** A status the hub built wrongly: a bug, not a forge problem. */
export class InvalidStatusError extends StewardError {
  override readonly name = "InvalidStatusError";
  constructor(message: string) {
    super("E_STATUS_INVALID", message);
  }
}

function asWriteError(provider: string, error: unknown): StatusWriteError {
  if (error instanceof StatusWriteError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new StatusWriteError(`${provider}: ${message}`, {
    provider,
    failureClass: "transient",
    reason: "WriteFailed",
    cause: error,
  });
}

/** One destination's queue, pause and health. */
class Lane {
  /** Latest desired status per (sha, context) not yet handed to the writer. */
  readonly pending = new Map<string, CommitStatus>();
  /** Statuses the destination refused, and when to offer them again. */
  readonly held = new Map<string, { status: CommitStatus; until: number }>();
  timer: unknown;
  timerAt = Number.POSITIVE_INFINITY;
  running: Promise<void> | undefined;
  pausedUntil = 0;
  consecutiveFailures = 0;
  failing: { reason: string; message: string; since: number } | undefined;

  constructor(readonly writer: StatusWriter) {}
}

/** Posts commit statuses for the hub; see the module comment. */
export class StatusPublisher implements StatusSink {
  readonly #lanes: Lane[];
  readonly #store: Store;
  /** Settles once what was owed before a restart is queued again. */
  readonly #ready: Promise<void>;
  readonly #timers: Timers;
  readonly #debounceMs: number;
  readonly #initialBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #rateLimitFailingAfterMs: number;
  readonly #onHealth: (health: StatusHealth) => void;
  readonly #onError: (error: unknown) => void;
  #closed = false;

  constructor(options: StatusPublisherOptions) {
    const names = options.writers.map((w) => w.name);
    const twice = names.find((name, i) => names.indexOf(name) !== i);
    if (twice) throw new InvalidStatusError(`status destination ${twice} is configured twice`);
    this.#store = options.store;
    this.#timers = options.timers ?? systemTimers;
    this.#debounceMs = options.debounceMs ?? 2_000;
    this.#initialBackoffMs = options.initialBackoffMs ?? 1_000;
    this.#maxBackoffMs = options.maxBackoffMs ?? 5 * 60_000;
    this.#rateLimitFailingAfterMs = options.rateLimitFailingAfterMs ?? 60_000;
    this.#onHealth = options.onHealth ?? (() => {});
    this.#onError = options.onError ?? (() => {});
    this.#lanes = options.writers.map((writer) => new Lane(writer));
    this.#ready = this.#recover(this.#timers.now() + this.#debounceMs);
  }

  /** Whatever was desired but not acknowledged before a restart is still owed (posted from `due` on). */
  async #recover(due: number): Promise<void> {
    for (const lane of this.#lanes) {
      try {
        for (const status of await this.#store.statuses.unposted(lane.writer.name)) {
          // A newer status published meanwhile wins.
          if (!lane.pending.has(keyOf(status))) lane.pending.set(keyOf(status), status);
        }
      } catch (error) {
        this.#onError(error);
      }
      if (lane.pending.size > 0) this.#schedule(lane, due);
    }
  }

  /**
   * Takes the latest desired statuses. Returns at once; writes happen later, coalesced. Throws only
   * for a malformed status (a bug in the caller), before anything is queued.
   */
  publish(statuses: readonly CommitStatus[]): void {
    if (this.#closed) return;
    for (const status of statuses) {
      if (!SHA.test(status.sha))
        throw new InvalidStatusError(`commit status for "${status.sha}": sha must be a full hex object id`);
      if (!status.context)
        throw new InvalidStatusError(`commit status for ${status.sha}: context must not be empty`);
    }
    const due = this.#timers.now() + this.#debounceMs;
    for (const lane of this.#lanes) {
      for (const status of statuses) {
        const fitted: CommitStatus = {
          sha: status.sha,
          context: status.context,
          state: status.state,
          description: fitDescription(status.description, lane.writer.descriptionLimit),
        };
        if (status.targetUrl) fitted.targetUrl = status.targetUrl;
        const key = keyOf(fitted);
        // A different status where one was refused deserves a new try; the same one waits.
        if (!sameStatus(lane.held.get(key)?.status, fitted)) lane.held.delete(key);
        lane.pending.set(key, fitted);
      }
      if (lane.pending.size > 0) this.#schedule(lane, due);
    }
  }

  /** Writes everything pending now (rate-limit pauses and backoff still apply); resolves when done. */
  async flushNow(): Promise<void> {
    for (const lane of this.#lanes) {
      this.#cancelTimer(lane);
      this.#kick(lane);
    }
    await this.whenIdle();
  }

  /** Resolves when no lane is writing (timers may still be armed). */
  async whenIdle(): Promise<void> {
    await this.#ready;
    for (;;) {
      const running = this.#lanes.map((lane) => lane.running).filter((r) => r !== undefined);
      if (running.length === 0) return;
      await Promise.all(running);
    }
  }

  /** Stops the timers; pending statuses stay recorded as desired and are posted after a restart. */
  close(): void {
    this.#closed = true;
    for (const lane of this.#lanes) this.#cancelTimer(lane);
  }

  #schedule(lane: Lane, at: number): void {
    if (this.#closed) return;
    const when = Math.max(at, lane.pausedUntil);
    // An armed timer that fires sooner already covers this: bursts coalesce into it.
    if (lane.timer !== undefined && lane.timerAt <= when) return;
    this.#cancelTimer(lane);
    lane.timerAt = when;
    lane.timer = this.#timers.setTimeout(
      () => {
        lane.timer = undefined;
        lane.timerAt = Number.POSITIVE_INFINITY;
        this.#kick(lane);
      },
      Math.max(0, when - this.#timers.now()),
    );
  }

  #cancelTimer(lane: Lane): void {
    if (lane.timer !== undefined) this.#timers.clearTimeout(lane.timer);
    lane.timer = undefined;
    lane.timerAt = Number.POSITIVE_INFINITY;
  }

  #kick(lane: Lane): void {
    if (lane.running) return;
    lane.running = this.#run(lane)
      .catch((error) => this.#onError(error))
      .finally(() => {
        lane.running = undefined;
        this.#rearm(lane);
      });
  }

  /** After a run: come back for what is left, at the earliest moment it may be written. */
  #rearm(lane: Lane): void {
    if (lane.pending.size === 0) return;
    const now = this.#timers.now();
    let earliest = Number.POSITIVE_INFINITY;
    for (const key of lane.pending.keys()) earliest = Math.min(earliest, lane.held.get(key)?.until ?? now);
    this.#schedule(lane, Math.max(earliest, now + this.#debounceMs));
  }

  async #run(lane: Lane): Promise<void> {
    const now = this.#timers.now();
    if (now < lane.pausedUntil) return;
    const provider = lane.writer.name;
    const batch: CommitStatus[] = [];
    for (const [key, status] of lane.pending) {
      if ((lane.held.get(key)?.until ?? 0) > now) continue;
      batch.push(status);
      lane.pending.delete(key);
    }
    if (batch.length === 0) return;
    let toWrite: CommitStatus[];
    try {
      toWrite = await this.#store.transaction((tx) => tx.statuses.desire(provider, batch, new Date(now)));
    } catch (error) {
      for (const status of batch) this.#requeue(lane, status);
      throw error;
    }
    const written: CommitStatus[] = [];
    let problem: StatusWriteError | undefined;
    for (const [index, status] of toWrite.entries()) {
      // A newer state arrived while this batch was being written: that one goes next.
      if (lane.pending.has(keyOf(status))) continue;
      try {
        await lane.writer.write(status);
        written.push(status);
        lane.held.delete(keyOf(status));
      } catch (error) {
        problem = asWriteError(provider, error);
        const failure = problem.message;
        await this.#store.transaction((tx) => tx.statuses.failed(provider, status, failure));
        this.#requeue(lane, status);
        if (problem.failureClass === "permanent" && !REFUSES_EVERYTHING.has(problem.reason)) {
          lane.held.set(keyOf(status), { status, until: this.#timers.now() + this.#maxBackoffMs });
          continue;
        }
        for (const rest of toWrite.slice(index + 1)) this.#requeue(lane, rest);
        break;
      }
    }
    if (written.length > 0 && lane.writer.flush) {
      try {
        await lane.writer.flush();
      } catch (error) {
        problem = asWriteError(provider, error);
        for (const status of written) this.#requeue(lane, status);
        written.length = 0;
      }
    }
    if (written.length > 0)
      await this.#store.transaction((tx) =>
        tx.statuses.posted(provider, written, new Date(this.#timers.now())),
      );
    this.#settle(lane, problem, written.length > 0);
  }

  /** Puts a status back unless a newer one for its context is already waiting. */
  #requeue(lane: Lane, status: CommitStatus): void {
    const key = keyOf(status);
    if (!lane.pending.has(key)) lane.pending.set(key, status);
  }

  /** Pause, backoff and health after a run. */
  #settle(lane: Lane, problem: StatusWriteError | undefined, wrote: boolean): void {
    const now = this.#timers.now();
    if (!problem) {
      // Only a write that went through shows the destination is back.
      if (wrote) lane.consecutiveFailures = 0;
      if (wrote && lane.held.size === 0) this.#recovered(lane, now);
      return;
    }
    if (problem.failureClass === "rate-limited") {
      const wait = problem.retryAfterMs ?? this.#maxBackoffMs;
      lane.pausedUntil = now + wait;
      if (wait >= this.#rateLimitFailingAfterMs) this.#failing(lane, problem, now);
      return;
    }
    // A refused token refuses every status: try again at the slowest cadence, not once per status.
    if (REFUSES_EVERYTHING.has(problem.reason)) lane.pausedUntil = now + this.#maxBackoffMs;
    if (problem.failureClass === "transient") {
      lane.consecutiveFailures += 1;
      const backoff = Math.min(
        this.#maxBackoffMs,
        this.#initialBackoffMs * 2 ** (lane.consecutiveFailures - 1),
      );
      lane.pausedUntil = now + Math.max(backoff, problem.retryAfterMs ?? 0);
    }
    this.#failing(lane, problem, now);
  }

  #failing(lane: Lane, problem: StatusWriteError, now: number): void {
    const since = lane.failing?.since ?? now;
    const changed = lane.failing?.reason !== problem.reason;
    lane.failing = { reason: problem.reason, message: problem.message, since };
    if (changed)
      this.#onHealth({
        provider: lane.writer.name,
        failing: true,
        reason: problem.reason,
        message: problem.message,
        since: new Date(since),
      });
  }

  #recovered(lane: Lane, now: number): void {
    if (!lane.failing) return;
    const since = lane.failing.since;
    lane.failing = undefined;
    this.#onHealth({
      provider: lane.writer.name,
      failing: false,
      since: new Date(since),
      recoveredAt: new Date(now),
    });
  }
}
