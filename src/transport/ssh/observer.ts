/**
 * Observation without change for SSH nodes: they run no daemon and send no heartbeat, so the hub asks
 * each of them for a fresh report (`steward agent observe`) on an interval. A node whose previous
 * observation is still running is skipped for that round, so a dead host never piles up work; the
 * transport's own bounded fan-out keeps the rest moving. Staleness is the hub's call: it reads
 * `lastObserved` (here or on the transport) and raises a condition when a node falls behind.
 */
import { type Clock, systemClock } from "../../hub/clock.js";
import type { Node } from "../../model/generated.js";

export interface ObservationSchedulerOptions {
  /** Anything that can ask a node for a report; normally the SshTransport. */
  transport: { requestReport(node: Node): Promise<void> };
  /** The SSH nodes to observe now (read every round, so nodes added or removed in Git follow). */
  nodes: () => Iterable<Node>;
  intervalMs: number;
  clock?: Clock;
  /** Told about each failed observation (the transport has already raised degraded health). */
  onError?: (node: string, error: unknown) => void;
}

/** Runs `requestReport` for every SSH node every `intervalMs`. */
export class ObservationScheduler {
  private readonly inFlight = new Set<string>();
  private readonly observed = new Map<string, Date>();
  private readonly running = new Set<Promise<void>>();
  private cancel: (() => void) | undefined;
  private active = false;
  private readonly clock: Clock;

  constructor(private readonly options: ObservationSchedulerOptions) {
    if (!(options.intervalMs > 0))
      throw new RangeError(`intervalMs must be positive (got ${options.intervalMs})`);
    this.clock = options.clock ?? systemClock;
  }

  /** Starts observing: a round now, then one every interval. */
  start(): void {
    if (this.active) return;
    this.active = true;
    this.tick();
  }

  /** Stops scheduling rounds and waits for observations in flight. */
  async stop(): Promise<void> {
    this.active = false;
    this.cancel?.();
    this.cancel = undefined;
    await Promise.allSettled([...this.running]);
  }

  /**
   * One round: asks every node not already being observed for a report. Resolves when this round's
   * observations have settled (failures go to `onError`, never reject).
   */
  round(): Promise<void> {
    const started: Promise<void>[] = [];
    for (const node of this.options.nodes()) {
      const name = node.metadata.name;
      if (this.inFlight.has(name)) continue;
      this.inFlight.add(name);
      const observation = this.options.transport
        .requestReport(node)
        .then(
          () => {
            this.observed.set(name, this.clock.now());
          },
          (error: unknown) => this.options.onError?.(name, error),
        )
        .finally(() => {
          this.inFlight.delete(name);
          this.running.delete(observation);
        });
      this.running.add(observation);
      started.push(observation);
    }
    return Promise.all(started).then(() => undefined);
  }

  /** When this scheduler last got a report from the node, if ever. */
  lastObserved(node: string): Date | undefined {
    return this.observed.get(node);
  }

  /** Every node's last observation by this scheduler. */
  lastObservedTimes(): ReadonlyMap<string, Date> {
    return this.observed;
  }

  private tick(): void {
    if (!this.active) return;
    void this.round();
    this.cancel = this.clock.schedule(this.options.intervalMs, () => this.tick());
  }
}
