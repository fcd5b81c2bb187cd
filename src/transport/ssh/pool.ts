/**
 * Fan-out across hosts: at most `concurrency` jobs at once, one at a time per host (the agent on a
 * host works through its attempts in order, and events for a node stay in order), each job cut off
 * after its timeout. A queued job starts as soon as any slot frees and its host is idle, so a slow or
 * dead host holds one slot for at most its timeout and never the others' turns.
 */

/** A unit of work on one host; `signal` aborts when the job's time is up or the pool stops. */
export type HostJob<T> = (signal: AbortSignal) => Promise<T>;

interface Queued {
  host: string;
  timeoutMs: number;
  start: () => void;
}

/** Counts for progress reports. */
export interface PoolLoad {
  queued: number;
  running: number;
}

export class HostPool {
  private readonly queue: Queued[] = [];
  private readonly busyHosts = new Set<string>();
  private readonly controllers = new Set<AbortController>();
  private running = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly concurrency: number) {
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new RangeError(`concurrency must be a whole number >= 1 (got ${concurrency})`);
  }

  get load(): PoolLoad {
    return { queued: this.queue.length, running: this.running };
  }

  /** Runs `job` for `host` when a slot and the host are free; settles with the job. */
  run<T>(host: string, timeoutMs: number, job: HostJob<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        host,
        timeoutMs,
        start: () => {
          const controller = new AbortController();
          this.controllers.add(controller);
          const timer = setTimeout(() => controller.abort(new Error("timeout")), timeoutMs);
          // The slot is handed on before the caller hears back, so the next job is already running.
          const release = () => {
            clearTimeout(timer);
            this.controllers.delete(controller);
            this.running--;
            this.busyHosts.delete(host);
            this.pump();
          };
          job(controller.signal).then(
            (value) => {
              release();
              resolve(value);
            },
            (error: unknown) => {
              release();
              reject(error);
            },
          );
        },
      });
      this.pump();
    });
  }

  /** Aborts every running job (their promises settle as the jobs notice). */
  abortAll(reason: string): void {
    for (const controller of this.controllers) controller.abort(new Error(reason));
  }

  /** Resolves when nothing runs and nothing waits. */
  idle(): Promise<void> {
    if (this.running === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running < this.concurrency) {
      const index = this.queue.findIndex((queued) => !this.busyHosts.has(queued.host));
      if (index < 0) break;
      const [next] = this.queue.splice(index, 1);
      if (!next) break;
      this.running++;
      this.busyHosts.add(next.host);
      next.start();
    }
    if (this.running === 0 && this.queue.length === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }
}
