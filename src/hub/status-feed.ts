/**
 * The hub's side of commit statuses: revisions whose progress changed are marked, and at most once
 * per interval their statuses (built from the hub's records, status.ts) go to the StatusSink, which
 * coalesces and posts them. A destination that fails is `StatusWriteFailing` until it recovers.
 */
import type { Logger } from "pino";
import type { Clock } from "./clock.js";
import { markOpen, markResolved } from "./conditions.js";
import { statusInputs } from "./progress.js";
import { type CommitStatus, revisionStatuses, type StatusHealth, type StatusSink } from "./status.js";
import type { Store } from "./store/store.js";

export class StatusFeed {
  /** Revisions whose progress changed since their statuses were last published. */
  private readonly dirty = new Set<string>();
  private cancelTimer: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly options: {
      store: Store;
      clock: Clock;
      log: Logger;
      newId: () => string;
      sink?: StatusSink;
      intervalMs: number;
    },
  ) {}

  /** Marks revisions whose progress may have changed; their statuses are published shortly. */
  changed(shas: readonly string[]): void {
    if (!this.options.sink || shas.length === 0) return;
    for (const sha of shas) this.dirty.add(sha);
    if (this.cancelTimer || this.stopped) return;
    this.cancelTimer = this.options.clock.schedule(this.options.intervalMs, () => {
      this.cancelTimer = undefined;
      this.publish().catch((error: unknown) =>
        this.options.log.error({ err: error }, "building commit statuses failed"),
      );
    });
  }

  /** Hands the current statuses of every changed revision to the sink now. */
  async publish(): Promise<void> {
    const { sink, store } = this.options;
    if (!sink || this.dirty.size === 0) return;
    const shas = [...this.dirty];
    this.dirty.clear();
    const publicUrl = (await store.desired.fleetSettings())?.status.publicUrl;
    const statuses: CommitStatus[] = [];
    for (const sha of shas) {
      const inputs = await statusInputs(store, sha);
      if (!inputs) continue;
      statuses.push(
        ...revisionStatuses(inputs.revision, {
          instances: inputs.instances,
          failures: inputs.failures,
          paused: inputs.paused,
          ...(publicUrl ? { publicUrl } : {}),
        }),
      );
    }
    if (statuses.length > 0) sink.publish(statuses);
  }

  /** Publishes what is pending and stops the timer. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    await this.publish();
  }

  /** A status destination started or stopped failing: `StatusWriteFailing` on it. */
  async health(health: StatusHealth): Promise<void> {
    const { store, log } = this.options;
    const now = this.options.clock.now().toISOString();
    if (!health.failing) {
      await store.transaction((tx) =>
        markResolved(
          tx,
          "StatusWriteFailing",
          "status",
          health.provider,
          now,
          `statuses to ${health.provider} are posted again since ${health.recoveredAt.toISOString()}`,
        ),
      );
      return;
    }
    const { change } = await store.transaction((tx) =>
      markOpen(
        tx,
        {
          type: "StatusWriteFailing",
          subjectKind: "status",
          subject: health.provider,
          reason: health.reason,
          message: `commit statuses to ${health.provider} fail since ${health.since.toISOString()}: ${health.message}; reconciliation goes on and the latest statuses are posted when it recovers`,
          evidence: { since: health.since.toISOString() },
          resolver: "operator",
        },
        now,
        this.options.newId,
      ),
    );
    if (change === "opened") log.warn({ provider: health.provider, reason: health.reason }, health.message);
  }
}
