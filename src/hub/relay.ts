/**
 * The outbox relay: hands the attempts a reconcile wrote to their nodes' transports, asks nodes for
 * reports, and remembers which nodes could not be reached so their retries go as soon as they
 * answer again. An attempt's outbox row is written in the transaction that decided it; the relay
 * marks it dispatched before the hand-over and deletes the row once the transport accepted it.
 */
import type { Logger } from "pino";
import type { Bundle } from "../model/generated.js";
import { nextAttempt } from "./attempts.js";
import type { Clock } from "./clock.js";
import type { Inbox } from "./inbox.js";
import type { HubMetrics } from "./metrics.js";
import type { AttemptRecord, IntentRecord, NodeRecord } from "./records.js";
import { redact } from "./redact.js";
import type { Store } from "./store/store.js";
import { DispatchError, type Transport } from "./transport.js";

export interface RelayOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  metrics: HubMetrics;
  leaseMs: number;
  transports: ReadonlyMap<string, Transport>;
  inbox: Inbox;
  /** Reconciles `key` now, or at `at` (epoch ms). */
  requeue: (key: string, at?: number) => void;
  /** Queues instance keys for a reconcile now. */
  enqueue: (keys: readonly string[]) => void;
  /** Called whenever a hand-over or a report request ends (the hub may have become idle). */
  settled: () => void;
}

/** Hands attempts over and asks for reports (see the module comment). */
export class Relay {
  /** Hand-overs in progress. */
  relaying = 0;
  /** Report requests and other transport work in progress. */
  handling = 0;
  /** Nodes whose last hand-over failed (transient): their retries go when they are heard again. */
  private readonly unreachable = new Set<string>();

  constructor(private readonly options: RelayOptions) {}

  /**
   * Outbox rows left by the last run: an attempt still queued never left the hub and is handed over
   * now, with the same id; one already marked dispatched may have reached its node, so it is not sent
   * again (its lease runs out and a fresh report settles it, as for any ambiguous attempt).
   */
  recover(attemptIds: readonly string[]): void {
    const { store, log } = this.options;
    const queued: string[] = [];
    store.transaction(() => {
      for (const id of attemptIds) {
        const attempt = store.attempt(id);
        if (attempt?.status === "queued") queued.push(id);
        else {
          store.deleteOutbox(id);
          if (attempt?.status === "dispatched")
            log.warn(
              { attemptId: id, instance: attempt.instanceKey, generation: attempt.generation },
              "attempt was being handed over when the hub stopped: not sent again; a report after its lease settles it",
            );
        }
      }
    });
    this.relay(queued);
  }

  /**
   * Hands outbox rows to their nodes' transports. Each attempt is marked dispatched (its lease
   * starting) in one transaction *before* its hand-over begins: after a crash, an attempt still
   * queued was certainly never sent and is sent again; one marked dispatched may have reached its
   * node, so it is never sent again — its lease runs out and a fresh report settles it.
   */
  relay(attemptIds: readonly string[]): void {
    if (attemptIds.length === 0) return;
    const { store, clock, transports } = this.options;
    const handedAt = clock.now();
    const lease = new Date(handedAt.getTime() + this.options.leaseMs).toISOString();
    const jobs: { attempt: AttemptRecord; node: NodeRecord; transport: Transport; bundle: Bundle }[] = [];
    const orphans: string[] = [];
    store.transaction(() => {
      for (const attemptId of attemptIds) {
        const row = store.outboxRow(attemptId);
        const attempt = store.attempt(attemptId);
        if (!row || attempt?.status !== "queued") continue;
        const node = store.node(row.node);
        const transport = node ? transports.get(node.transport) : undefined;
        if (!node || !transport) {
          orphans.push(attemptId);
          continue;
        }
        const dispatched = nextAttempt(attempt, {
          kind: "handed-over",
          at: handedAt.toISOString(),
          leaseExpiresAt: lease,
        }) as AttemptRecord & { leaseExpiresAt: string };
        store.saveDispatched(dispatched);
        jobs.push({ attempt: dispatched, node, transport, bundle: JSON.parse(row.bundle) as Bundle });
      }
    });
    // The node left this hub's reach after the attempt was written: it never left the hub.
    for (const attemptId of orphans)
      this.settleDispatch(
        attemptId,
        new DispatchError("no transport for the node", "transient", "NoTransport"),
      );
    // A node's attempts back to back: on NATS they then reach its agent together, which applies
    // them together and answers with one report.
    jobs.sort((a, b) => (a.node.name < b.node.name ? -1 : a.node.name > b.node.name ? 1 : 0));
    for (const job of jobs) this.handOver(job.attempt, job.node, job.transport, job.bundle);
  }

  private handOver(attempt: AttemptRecord, node: NodeRecord, transport: Transport, bundle: Bundle): void {
    const { metrics, inbox } = this.options;
    const log = this.options.log.child({
      attemptId: attempt.id,
      instance: attempt.instanceKey,
      generation: attempt.generation,
    });
    this.relaying++;
    transport
      .dispatch(bundle, node.spec)
      .then(
        () => {
          metrics.dispatchesTotal.inc({ transport: transport.name, result: "accepted" });
          // Not recorded (a stopping hub): the outbox row stays, and the next start settles it.
          inbox
            .deliver("dispatched", transport.name, () => {
              this.options.store.deleteOutbox(attempt.id);
              // Look again when the lease ends (the result usually comes first, and is looked at then).
              this.options.requeue(attempt.instanceKey, Date.parse(attempt.leaseExpiresAt!));
            })
            .catch(() => undefined);
          log.info(
            { node: node.name, transport: transport.name },
            "attempt handed to transport %s",
            transport.name,
          );
        },
        (error: unknown) => {
          const failure =
            error instanceof DispatchError
              ? error
              : new DispatchError(
                  `dispatch failed unexpectedly: ${(error as Error)?.message ?? error}`,
                  "ambiguous",
                  "DispatchFailed",
                );
          metrics.dispatchesTotal.inc({ transport: transport.name, result: failure.failureClass });
          log.warn(
            { node: node.name, failureClass: failure.failureClass, reason: failure.reason },
            "dispatch failed: %s",
            redact(failure.message),
          );
          if (failure.failureClass === "transient") this.unreachable.add(node.name);
          this.settleDispatch(attempt.id, failure);
        },
      )
      .finally(() => {
        this.relaying--;
        this.options.settled();
      });
  }

  /** A hand-over that did not happen (or may have): the attempt is failed or ambiguous, never left pending. */
  private settleDispatch(attemptId: string, failure: DispatchError): void {
    const { store } = this.options;
    const now = this.options.clock.now().toISOString();
    store.transaction(() => {
      const attempt = store.attempt(attemptId);
      store.deleteOutbox(attemptId);
      const failed =
        attempt &&
        nextAttempt(attempt, {
          kind: "dispatch-failed",
          at: now,
          failureClass: failure.failureClass,
          reason: failure.reason,
          message: failure.message,
        });
      if (failed) store.saveAttempt(failed);
    });
    const attempt = store.attempt(attemptId);
    if (attempt) this.options.requeue(attempt.instanceKey);
  }

  /** Asks node `name` for a fresh full report, if this hub reaches it. */
  askForReport(name: string): void {
    const node = this.options.store.node(name);
    const transport = node ? this.options.transports.get(node.transport) : undefined;
    if (!node || !transport) return;
    this.track(
      transport.requestReport(node.spec).catch((error: unknown) => {
        this.options.log.warn({ node: name, err: error }, "could not ask node %s for a report", name);
      }),
    );
  }

  private track(work: Promise<unknown>): void {
    this.handling++;
    work.finally(() => {
      this.handling--;
      this.options.settled();
    });
  }

  /** At start: a node whose retries wait on the transport is unreachable until it is heard. */
  rememberUnreachable(name: string): void {
    if (this.waitingForNode(name).length > 0) this.unreachable.add(name);
  }

  /** A node that failed dispatches answers again: its retries waiting on the transport go now. */
  nodeAnswered(name: string): void {
    if (!this.unreachable.delete(name)) return;
    const { store } = this.options;
    const now = this.options.clock.now().toISOString();
    const keys: string[] = [];
    store.transaction(() => {
      for (const intent of this.waitingForNode(name)) {
        store.saveIntent({ ...intent, nextAttemptAt: now, updatedAt: now });
        keys.push(intent.instanceKey);
      }
    });
    if (keys.length > 0)
      this.options.log.info({ node: name, instances: keys.length }, "node %s is reachable again", name);
    this.options.enqueue(keys);
  }

  /** Intents on `name` backing off because their last attempt could not be handed to the node. */
  private waitingForNode(name: string): IntentRecord[] {
    const { store } = this.options;
    const waiting: IntentRecord[] = [];
    for (const key of store.intentKeysOfNode(name, ["backoff", "stuck"])) {
      const desired = store.desired(key);
      const intent = desired ? store.intent(key, desired.generation) : undefined;
      const last = intent?.lastAttemptId ? store.attempt(intent.lastAttemptId) : undefined;
      if (intent && last?.settledBy === "dispatch") waiting.push(intent);
    }
    return waiting;
  }
}
