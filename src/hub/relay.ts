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
import { FencedError, type Store, type StoreReads, type Transactional } from "./store/store.js";
import { DispatchError, type Transport } from "./transport.js";
import { WarningDigest } from "./warning-digest.js";

/** Report requests a hub has out at once, at most. */
const REPORT_REQUESTS_AT_ONCE = 256;

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
  /** Hand-overs in progress (and relays marking theirs dispatched). */
  relaying = 0;
  /** Report requests and other transport work in progress. */
  handling = 0;
  /** Attempts their transports accepted whose outbox rows wait for the inbox (see `accepted`). */
  private acceptedWaiting: AttemptRecord[] = [];
  private acceptedDelivery: Promise<void> | undefined;
  /** Report requests running, and those waiting for one of them to end (see askForReport). */
  private requesting = 0;
  private readonly requestSlots: (() => void)[] = [];
  /** Nodes whose last hand-over failed (transient): their retries go when they are heard again. */
  private readonly unreachable = new Set<string>();

  /** Report requests that failed: a bus that times out fails one per node, so they are summarised. */
  private readonly reportFailures: WarningDigest;

  constructor(private readonly options: RelayOptions) {
    this.reportFailures = new WarningDigest(
      options.log,
      "could not ask node %s for a report",
      "could not ask %d more nodes for a report in the last %s",
    );
  }

  /** Ends the relay's summaries (their last lines are written). */
  stop(): void {
    this.reportFailures.flush();
  }

  /**
   * Outbox rows left by the last run: an attempt still queued never left the hub and is handed over
   * now, with the same id; one already marked dispatched may have reached its node, so it is not sent
   * again (its lease runs out and a fresh report settles it, as for any ambiguous attempt).
   */
  async recover(attemptIds: readonly string[]): Promise<void> {
    const { store, log } = this.options;
    const queued: string[] = [];
    const inFlight: AttemptRecord[] = [];
    await store.transaction(async (tx) => {
      // Run again from the start if the store retries the unit.
      queued.length = 0;
      inFlight.length = 0;
      // A takeover recovers thousands of rows: their attempts in one query, the rows gone in another.
      await tx.readAheadEvents({ attempts: attemptIds, reported: [], waiting: [] });
      const settled: string[] = [];
      for (const id of attemptIds) {
        const attempt = await tx.attempts.get(id);
        if (attempt?.status === "queued") queued.push(id);
        else {
          settled.push(id);
          if (attempt?.status === "dispatched") inFlight.push(attempt);
        }
      }
      await tx.attempts.deleteOutbox(settled);
    });
    if (inFlight.length > 0)
      log.warn(
        {
          attempts: inFlight.length,
          examples: inFlight.slice(0, 5).map((a) => ({ attemptId: a.id, instance: a.instanceKey })),
        },
        "%d attempts were being handed over when their hub stopped: not sent again; a report after each lease settles it",
        inFlight.length,
      );
    await this.relay(queued);
  }

  /**
   * Hands outbox rows to their nodes' transports. Each attempt is marked dispatched (its lease
   * starting) in one unit of work *before* its hand-over begins: after a crash, an attempt still
   * queued was certainly never sent and is sent again; one marked dispatched may have reached its
   * node, so it is never sent again — its lease runs out and a fresh report settles it. Resolves
   * once the hand-overs have begun (not when they end).
   */
  async relay(attemptIds: readonly string[]): Promise<void> {
    if (attemptIds.length === 0) return;
    const { store, clock, transports } = this.options;
    const handedAt = clock.now();
    const lease = new Date(handedAt.getTime() + this.options.leaseMs).toISOString();
    const jobs: { attempt: AttemptRecord; node: NodeRecord; transport: Transport; bundle: Bundle }[] = [];
    const orphans: string[] = [];
    this.relaying++;
    try {
      await store.transaction(async (tx) => {
        // Run again from the start if the store retries the unit: nothing is handed over twice.
        jobs.length = 0;
        orphans.length = 0;
        const pending = (await tx.attempts.outboxRows(attemptIds)).filter(
          ({ attempt }) => attempt.status === "queued",
        );
        // Only the replica holding the nodes' leases hands their attempts over.
        await tx.fence(pending.map(({ row }) => row.node));
        const nodes = await tx.nodes.named(pending.map(({ row }) => row.node));
        const handed: (AttemptRecord & { leaseExpiresAt: string })[] = [];
        for (const { row, attempt } of pending) {
          const attemptId = attempt.id;
          const node = nodes.get(row.node);
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
          handed.push(dispatched);
          jobs.push({ attempt: dispatched, node, transport, bundle: JSON.parse(row.bundle) as Bundle });
        }
        await tx.attempts.saveDispatched(handed);
      });
      // The node left this hub's reach after the attempt was written: it never left the hub.
      for (const attemptId of orphans)
        await this.settleDispatch(
          attemptId,
          new DispatchError("no transport for the node", "transient", "NoTransport"),
        );
    } catch (error) {
      if (!(error instanceof FencedError)) throw error;
      // Left in the outbox: the replica that holds the nodes now hands them over.
      this.options.log.warn({ attempts: attemptIds.length }, "attempts not handed over: %s", error.message);
      return;
    } finally {
      this.relaying--;
    }
    // A node's attempts back to back: on NATS they then reach its agent together, which applies
    // them together and answers with one report.
    jobs.sort((a, b) => (a.node.name < b.node.name ? -1 : a.node.name > b.node.name ? 1 : 0));
    for (const job of jobs) this.handOver(job.attempt, job.node, job.transport, job.bundle);
    this.options.settled();
  }

  private handOver(attempt: AttemptRecord, node: NodeRecord, transport: Transport, bundle: Bundle): void {
    const { metrics } = this.options;
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
          this.accepted(attempt, transport.name);
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
          return this.settleDispatch(attempt.id, failure);
        },
      )
      .catch((error: unknown) => log.error({ err: error }, "recording a failed hand-over failed"))
      .finally(() => {
        this.relaying--;
        this.options.settled();
      });
  }

  /**
   * A transport accepted `attempt`: its outbox row goes, with those of every attempt accepted until
   * the inbox records them, in one statement — a rollout's hand-overs were a unit of work's step and
   * a round trip each. Not recorded (a stopping hub): the rows stay, and the next start settles them.
   */
  private accepted(attempt: AttemptRecord, transport: string): void {
    this.acceptedWaiting.push(attempt);
    if (this.acceptedDelivery) return;
    let taken: AttemptRecord[] | undefined;
    this.acceptedDelivery = this.options.inbox
      .deliver({ event: "dispatched", transport }, async (tx) => {
        // Taken once: a unit of work run again deletes the same rows.
        if (!taken) {
          taken = this.acceptedWaiting;
          this.acceptedWaiting = [];
          this.acceptedDelivery = undefined;
        }
        await tx.attempts.deleteOutbox(taken.map((each) => each.id));
        // Look again when the lease ends (the result usually comes first, and is looked at then).
        for (const each of taken) this.options.requeue(each.instanceKey, Date.parse(each.leaseExpiresAt!));
      })
      .catch(() => {
        if (taken) return;
        this.acceptedWaiting = [];
        this.acceptedDelivery = undefined;
      });
  }

  /** A hand-over that did not happen (or may have): the attempt is failed or ambiguous, never left pending. */
  private async settleDispatch(attemptId: string, failure: DispatchError): Promise<void> {
    const now = this.options.clock.now().toISOString();
    const attempt = await this.options.store.transaction(async (tx) => {
      const attempt = await tx.attempts.get(attemptId);
      await tx.attempts.deleteOutbox([attemptId]);
      const failed =
        attempt &&
        nextAttempt(attempt, {
          kind: "dispatch-failed",
          at: now,
          failureClass: failure.failureClass,
          reason: failure.reason,
          message: failure.message,
        });
      if (failed) await tx.attempts.save(failed);
      return attempt;
    });
    if (attempt) this.options.requeue(attempt.instanceKey);
  }

  /**
   * Asks node `name` (whose record may be given) for a fresh full report, if this hub reaches it;
   * counted in `handling` until done. A few hundred requests run at once, the others wait their
   * turn: a hub that starts with 10,000 nodes asks each of them.
   */
  askForReport(name: string, record?: NodeRecord): void {
    this.track(
      this.inRequestSlot(async () => {
        const node = record ?? (await this.options.store.nodes.get(name));
        const transport = node ? this.options.transports.get(node.transport) : undefined;
        if (!node || !transport) return;
        await transport.requestReport(node.spec);
      }).catch((error: unknown) => this.reportFailures.warn(name, error, { node: name })),
    );
  }

  /** Runs `request` once fewer than REPORT_REQUESTS_AT_ONCE run. */
  private async inRequestSlot(request: () => Promise<void>): Promise<void> {
    while (this.requesting >= REPORT_REQUESTS_AT_ONCE)
      await new Promise<void>((free) => this.requestSlots.push(free));
    this.requesting++;
    try {
      await request();
    } finally {
      this.requesting--;
      this.requestSlots.shift()?.();
    }
  }

  private track(work: Promise<unknown>): void {
    this.handling++;
    void work.finally(() => {
      this.handling--;
      this.options.settled();
    });
  }

  /** At start (or a takeover): a node of `names` whose retries wait on the transport is unreachable until it is heard. */
  async rememberUnreachable(names: readonly string[]): Promise<void> {
    const { store } = this.options;
    // Most nodes have no intent backing off: those that do are read once, the others not at all.
    const backingOff = new Set(await store.intents.nodesWith(["backoff", "stuck"]));
    for (const name of names)
      if (backingOff.has(name) && (await this.waitingForNode(store, name)).length > 0)
        this.unreachable.add(name);
  }

  /** Whether dispatches wait for `name` to answer (its next word must be recorded). */
  waitsFor(name: string): boolean {
    return this.unreachable.has(name);
  }

  /** A node that failed dispatches answers again (heard in `tx`): its retries waiting on the transport go now. */
  async nodeAnswered(name: string, tx: Transactional = this.options.store): Promise<void> {
    if (!this.unreachable.delete(name)) return;
    const now = this.options.clock.now().toISOString();
    const keys: string[] = [];
    await tx.transaction(async (tx) => {
      for (const intent of await this.waitingForNode(tx, name)) {
        await tx.intents.save({ ...intent, nextAttemptAt: now, updatedAt: now });
        keys.push(intent.instanceKey);
      }
    });
    if (keys.length > 0)
      this.options.log.info({ node: name, instances: keys.length }, "node %s is reachable again", name);
    this.options.enqueue(keys);
  }

  /** Intents on `name` backing off because their last attempt could not be handed to the node. */
  private async waitingForNode(store: StoreReads, name: string): Promise<IntentRecord[]> {
    const waiting: IntentRecord[] = [];
    for (const key of await store.intents.keysOfNode(name, ["backoff", "stuck"])) {
      const desired = await store.desired.instance(key);
      const intent = desired ? await store.intents.get(key, desired.generation) : undefined;
      const last = intent?.lastAttemptId ? await store.attempts.get(intent.lastAttemptId) : undefined;
      if (intent && last?.settledBy === "dispatch") waiting.push(intent);
    }
    return waiting;
  }
}
