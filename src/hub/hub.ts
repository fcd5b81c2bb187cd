/**
 * The hub: reconciles what should be (generations from the syncer) with what is (reports from
 * nodes), durably. It owns the work queue and its timers, runs reconciles in batches (each batch one
 * transaction), relays outbox rows to the transports, and turns transport events into records:
 * results settle attempts, reports become observations, lost results make attempts ambiguous,
 * silence becomes `NodeSilent`, transport health becomes `TransportDegraded`. A transport's handler
 * resolves only once what it delivered is committed, so a transport that acknowledges messages (NATS)
 * never acknowledges one a crash could lose. On a bus (bus.ts) it mirrors its open conditions for
 * anyone to watch, publishes its tasks, and records task agents' claims and resolutions.
 *
 * Work grows with the change, not the fleet: a sync queues only the instances whose generation
 * changed, a report only its node's instances, a timer only its own key. A restart queues the
 * instances that are not converged, re-hands the outbox and lets decide() treat expired leases as
 * ambiguous — never replaying an attempt blindly.
 */
import pino, { type Logger } from "pino";
import { StewardError } from "../model/errors.js";
import type { AttemptResult, Bundle, Report } from "../model/generated.js";
import { BusFeed, type HubBus, type TaskEvent } from "./bus.js";
import { type Clock, systemClock } from "./clock.js";
import { markOpen, markResolved } from "./conditions.js";
import { DEFAULT_TIMING, type Timing } from "./decide.js";
import { type DeclarationChanges, declaredRevision } from "./desired.js";
import { observeHostIdentity, reviewHostIdentities } from "./enrolment/identities.js";
import { idFactory } from "./ids.js";
import { Liveness } from "./liveness.js";
import { HubMetrics } from "./metrics.js";
import { WorkQueue } from "./queue.js";
import {
  type ReconcileContext,
  type ReconcileOutcome,
  reconcileInstance,
  reviewRollout,
} from "./reconcile.js";
import type { AttemptRecord, IntentRecord, IntentStatus, NodeRecord, RevisionRecord } from "./records.js";
import { redact } from "./redact.js";
import type { StatusHealth, StatusSink } from "./status.js";
import { StatusFeed } from "./status-feed.js";
import type { Store } from "./store/store.js";
import { claimTask, releaseTask, resolveTask, TaskError } from "./tasks.js";
import { DispatchError, type Transport, type TransportEvents, type TransportHealth } from "./transport.js";

export interface HubOptions {
  store: Store;
  /** The transports this hub runs; nodes on any other transport are listed but never dispatched to. */
  transports?: Transport[];
  clock?: Clock;
  logger?: Logger;
  timing?: Partial<Timing>;
  /** Random source for backoff jitter, in [0, 1). */
  random?: () => number;
  /**
   * Reconciles per transaction (default 1024). The attempts a batch creates are handed over
   * together, so a commit touching a few instances on each of many nodes reaches each node as one
   * burst (one apply run and one report per node) rather than one per batch; a batch holds the
   * event loop for a few hundred milliseconds at most. (A commit's instances are queued node by
   * node, so even a commit larger than a batch splits at most one node's attempts. Smaller batches
   * start the first nodes sooner but, with every core busy, finish no sooner: 128 gave bench:nats
   * the same p99 and a worse p50.)
   */
  batchSize?: number;
  /** Safety resync of every unconverged instance, at a slow cadence (0: never). */
  resyncIntervalMs?: number;
  /** Where commit statuses go (the StatusPublisher); the hub publishes each revision whose progress changed. */
  statusSink?: StatusSink;
  /** How often changed revisions' statuses are published, at most. Default 1 s. */
  statusIntervalMs?: number;
  /** A bus to mirror open conditions to and publish tasks on (the NATS transport offers one). */
  bus?: HubBus;
}

/** What `steward up` and tests see of a hub's progress. */
export interface HubActivity {
  queued: number;
  delayed: number;
  relaying: number;
  handling: number;
}

const SECOND = 1000;
const REVISION_CURSOR = "revision_seq";
/** Intents that a fresh report may settle even when no observation changed. */
const REPORT_WAITERS: readonly IntentStatus[] = ["ambiguous", "verifying"];

/** Orders instance keys (`assignment@node`) by node, then assignment. */
function byNode(a: string, b: string): number {
  const nodeA = a.slice(a.lastIndexOf("@") + 1);
  const nodeB = b.slice(b.lastIndexOf("@") + 1);
  if (nodeA !== nodeB) return nodeA < nodeB ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** An event handed to a stopped hub: not recorded, so a transport must not acknowledge it. */
export class HubStoppedError extends StewardError {
  override readonly name = "HubStoppedError";
  constructor(event: string) {
    super(
      "E_HUB_STOPPED",
      `the hub has stopped: ${event} not recorded (not acknowledged, so it comes again)`,
      {
        data: { event },
      },
    );
  }
}

/** A transport event waiting for the inbox's next transaction, with its handler's promise. */
interface InboxEvent {
  event: string;
  transport: string;
  run: () => void;
  recorded: () => void;
  failed: (error: unknown) => void;
}

export class Hub {
  readonly store: Store;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: HubMetrics;
  readonly timing: Timing;
  private readonly transports = new Map<string, Transport>();
  private readonly queue: WorkQueue;
  private readonly newId: () => string;
  private readonly random: () => number;
  private readonly batchSize: number;
  private readonly resyncIntervalMs: number;
  private readonly context: ReconcileContext;
  private scheduled = false;
  private processing = false;
  private started = false;
  /** When this hub started: conditions last observed before it were observed by an earlier run. */
  private startedAt = "";
  /** No new work once stopping; transport events are still recorded until `stopped`. */
  private stopping = false;
  private stopped = false;
  private relaying = 0;
  private handling = 0;
  private readonly idleWaiters: (() => void)[] = [];
  private readonly inbox: InboxEvent[] = [];
  private inboxScheduled = false;
  private readonly unreachable = new Set<string>();
  /** Nodes that reported since this hub started. */
  private readonly seenNodes = new Set<string>();
  private cancelResync: (() => void) | undefined;
  private readonly listeners = new Set<(outcome: ReconcileOutcome) => void>();
  private readonly liveness: Liveness;
  private readonly statuses: StatusFeed;
  private readonly bus: BusFeed | undefined;

  constructor(options: HubOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.log = options.logger ?? pino({ level: "silent" });
    this.timing = {
      ...DEFAULT_TIMING,
      ...options.timing,
      backoff: { ...DEFAULT_TIMING.backoff, ...options.timing?.backoff },
    };
    this.random = options.random ?? Math.random;
    this.batchSize = options.batchSize ?? 1024;
    this.resyncIntervalMs = options.resyncIntervalMs ?? 10 * 60 * SECOND;
    this.newId = idFactory(this.clock);
    this.metrics = new HubMetrics(this.store);
    for (const transport of options.transports ?? []) this.transports.set(transport.name, transport);
    this.queue = new WorkQueue(this.clock, () => this.schedule());
    this.liveness = new Liveness({
      store: this.store,
      clock: this.clock,
      log: this.log,
      newId: this.newId,
      reaches: (node) => this.reaches(node),
      askForReport: (node) => this.askForReport(node),
      silenceChanged: (node) => this.reviewRolloutsOf(node),
      beforeCheck: () => {
        if (this.inbox.length > 0) this.flushInbox();
      },
    });
    this.statuses = new StatusFeed({
      store: this.store,
      clock: this.clock,
      log: this.log,
      newId: this.newId,
      intervalMs: options.statusIntervalMs ?? SECOND,
      ...(options.statusSink ? { sink: options.statusSink } : {}),
    });
    if (options.bus)
      this.bus = new BusFeed({ store: this.store, bus: options.bus, clock: this.clock, log: this.log });
    this.context = {
      store: this.store,
      clock: this.clock,
      newId: this.newId,
      timing: this.timing,
      random: this.random,
      transportEnabled: (node) => this.transports.has(node.transport),
      log: this.log,
    };
  }

  /** Names of the transports this hub runs. */
  get transportNames(): string[] {
    return [...this.transports.keys()];
  }

  /** Whether this hub can reach `node` at all. */
  reaches(node: NodeRecord): boolean {
    return this.transports.has(node.transport);
  }

  /** Recovers durable work and starts the transports. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.startedAt = this.nowIso();
    this.takeInRevisions();
    const recovered = this.store.recoveryKeys();
    const outbox = this.store.outbox();
    this.log.info(
      { instances: recovered.length, outbox: outbox.length, transports: this.transportNames },
      "hub starting: recovering %d instances and %d outbox rows",
      recovered.length,
      outbox.length,
    );
    for (const [name, transport] of this.transports) await transport.start(this.eventsFor(name));
    this.bus?.start();
    this.recoverOutbox(outbox.map((row) => row.attemptId));
    // Registration: every node this hub reaches reports once at start, so observe-only compares,
    // ambiguous attempts settle and silent nodes are noticed without waiting for a change.
    for (const node of this.store.nodes()) {
      this.checkReach(node);
      if (!this.reaches(node) || node.removedAt) continue;
      if (this.waitingForNode(node.name).length > 0) this.unreachable.add(node.name);
      this.liveness.watch(node.name);
      this.askForReport(node.name);
    }
    this.queue.addAll(recovered);
    this.scheduleResync();
  }

  /**
   * Outbox rows left by the last run: an attempt still queued never left the hub and is handed over
   * now, with the same id; one already marked dispatched may have reached its node, so it is not sent
   * again (its lease runs out and a fresh report settles it, as for any ambiguous attempt).
   */
  private recoverOutbox(attemptIds: readonly string[]): void {
    const queued: string[] = [];
    this.store.transaction(() => {
      for (const id of attemptIds) {
        const attempt = this.store.attempt(id);
        if (attempt?.status === "queued") queued.push(id);
        else {
          this.store.deleteOutbox(id);
          if (attempt?.status === "dispatched")
            this.log.warn(
              { attemptId: id, instance: attempt.instanceKey, generation: attempt.generation },
              "attempt was being handed over when the hub stopped: not sent again; a report after its lease settles it",
            );
        }
      }
    });
    this.relay(queued);
  }

  /**
   * Stops every timer and the transports; durable state stays as it is. What the transports deliver
   * while they stop is still recorded (and so acknowledged); anything later is refused.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.queue.clear();
    this.cancelResync?.();
    this.statuses.stop();
    this.liveness.stop();
    for (const transport of this.transports.values()) await transport.stop();
    this.flushInbox();
    this.stopped = true;
    await this.bus?.stop();
    this.wakeIdle();
  }

  /** Calls `listener` after every reconcile (for progress displays). Returns an unsubscribe function. */
  onReconcile(listener: (outcome: ReconcileOutcome) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Queues instances for a reconcile now. */
  enqueue(keys: Iterable<string>): void {
    if (!this.stopping) this.queue.addAll(keys);
  }

  /**
   * Takes in what the syncer recorded since the last call: invalid revisions and changed instances.
   * An applied revision waits until its declarations (or a later revision's) are recorded
   * (desired.ts): its generations must go out with the Node documents it declares — a revision
   * synced by another process is not dispatched with the host keys of the revision before.
   */
  takeInRevisions(): RevisionRecord[] {
    this.takeInSyncEvents();
    const cursor = Number(this.store.meta(REVISION_CURSOR) ?? "0");
    const declared = declaredRevision(this.store);
    const declaredSeq = (declared ? this.store.revision(declared)?.seq : undefined) ?? 0;
    const after = this.store.revisionsAfter(cursor);
    const waiting = after.findIndex((r) => r.outcome === "applied" && r.seq > declaredSeq);
    const revisions = waiting < 0 ? after : after.slice(0, waiting);
    if (waiting >= 0)
      this.log.debug(
        { revision: after[waiting]!.sha, declared },
        "revision %s waits for its declarations",
        after[waiting]!.sha.slice(0, 12),
      );
    if (revisions.length === 0) return [];
    const now = this.nowIso();
    const changed = new Set<string>();
    this.store.transaction(() => {
      for (const revision of revisions) {
        if (revision.outcome === "invalid") this.openInvalidRevision(revision, now);
        else if (revision.outcome === "applied") {
          // A refused rewrite is the syncer's to resolve (takeInSyncEvents), not a valid commit's.
          for (const condition of this.store.conditions({ status: "open", type: "InvalidRevision" }))
            if (condition.reason !== "HistoryRewritten")
              markResolved(
                this.store,
                "InvalidRevision",
                condition.subjectKind,
                condition.subject,
                now,
                `revision ${revision.sha.slice(0, 12)} on ${revision.branch} is valid and applied`,
              );
          for (const key of this.store.instanceKeysChangedBy(revision.sha)) changed.add(key);
        }
      }
      this.store.setMeta(REVISION_CURSOR, String(revisions.at(-1)!.seq));
    });
    // The revision that was newest until now is carried forward: its pending statuses end.
    const carried = revisions.some((r) => r.outcome === "applied")
      ? this.store.previousAppliedRevision(revisions[0]!.seq)
      : undefined;
    this.statuses.changed([...revisions.map((r) => r.sha), ...(carried ? [carried.sha] : [])]);
    this.log.info(
      { revisions: revisions.map((r) => r.sha.slice(0, 12)), instances: changed.size },
      "took in %d revisions; %d instances changed",
      revisions.length,
      changed.size,
    );
    // Node by node: a node's instances are reconciled, and their attempts sent, together.
    this.enqueue([...changed].sort(byNode));
    return revisions;
  }

  /**
   * The syncer's own troubles as conditions, level-based: a refused force-push is `InvalidRevision`
   * on the refused head (the last good revision is still served), a failing fetch is
   * `TransportDegraded` on the repository. Each resolves once the syncer resolved its event.
   */
  private takeInSyncEvents(): void {
    const now = this.nowIso();
    const open = new Set<string>();
    this.store.transaction(() => {
      for (const event of this.store.openSyncEvents()) {
        const refused = event.kind === "force-push";
        const subject = refused ? (event.head ?? event.branch) : `git:${event.branch}`;
        open.add(`${refused ? "InvalidRevision" : "TransportDegraded"}|${subject}`);
        markOpen(
          this.store,
          {
            type: refused ? "InvalidRevision" : "TransportDegraded",
            subjectKind: refused ? "revision" : "transport",
            subject,
            reason: refused ? "HistoryRewritten" : "FetchFailed",
            message: event.message,
            evidence: { branch: event.branch, since: event.openedAt, lastGood: event.lastGood },
            resolver: "operator",
            ...(refused && event.head ? { revision: event.head } : {}),
          },
          now,
          this.newId,
        );
      }
      for (const condition of this.store.conditions({ status: "open" })) {
        if (condition.reason !== "HistoryRewritten" && condition.reason !== "FetchFailed") continue;
        if (open.has(`${condition.type}|${condition.subject}`)) continue;
        markResolved(
          this.store,
          condition.type,
          condition.subjectKind,
          condition.subject,
          now,
          "the syncer reports it resolved",
          condition.reason,
        );
      }
    });
  }

  private openInvalidRevision(revision: RevisionRecord, now: string): void {
    const diagnostics = revision.diagnostics ?? [];
    const where = diagnostics
      .slice(0, 3)
      .map((d) => `${d.file}:${d.line}:${d.column}: ${d.message}`)
      .join("; ");
    markOpen(
      this.store,
      {
        type: "InvalidRevision",
        subjectKind: "revision",
        subject: revision.sha,
        reason: "ValidationFailed",
        message: `revision ${revision.sha.slice(0, 12)} is invalid (${diagnostics.length} problems), nothing changed: ${where}`,
        evidence: {
          diagnostics: diagnostics.slice(0, 20),
          author: revision.authorName,
          message: revision.message,
        },
        resolver: "operator",
        revision: revision.sha,
      },
      now,
      this.newId,
    );
  }

  /**
   * Re-reads operator changes after a CLI wrote them: new revisions; a node drained or undrained
   * (`node`); a rollout paused or resumed (`revision`: its rollouts are looked at again).
   */
  nudge(scope: { node?: string; revision?: string } = {}): void {
    this.takeInRevisions();
    // The CLI may have closed a condition (a human procedure done): the bus shows what is open now.
    this.bus?.resync();
    if (scope.node) this.lookAgainAt(scope.node);
    if (scope.revision) this.lookAgainAtRevision(scope.revision);
  }

  /**
   * Reconciles a node's instances now, sends its retries that wait on the transport, and looks
   * again at the rollouts it has members in (a drained node's members no longer hold them up).
   */
  private lookAgainAt(name: string): void {
    this.enqueue(this.store.activeInstanceKeysOfNode(name));
    const node = this.store.node(name);
    if (node && !node.draining) this.nodeReturned(name);
    this.reviewRolloutsOf(name);
  }

  /** Looks again at every rollout of `revision` (an operator paused or resumed it). */
  private lookAgainAtRevision(sha: string): void {
    const assignments = new Set(this.store.generationsOfRevision(sha).map((g) => g.assignment));
    this.reviewRollouts([...assignments].map((assignment) => ({ assignment, revision: sha })));
  }

  /**
   * Whether the rollouts wait for `name` changed (it drained or came back, went silent or was heard,
   * its transport stopped or started being run here): look again at each rollout it has unconverged
   * members in, so slots and failures it held are counted anew. Costs what the node has in flight.
   */
  private reviewRolloutsOf(name: string): void {
    this.reviewRollouts(this.store.rolloutsOfNode(name));
  }

  private reviewRollouts(rollouts: readonly { assignment: string; revision: string }[]): void {
    if (rollouts.length === 0 || this.stopping) return;
    const follow: string[] = [];
    this.store.transaction(() => {
      for (const rollout of rollouts) follow.push(...reviewRollout(this.context, rollout).follow);
    });
    this.statuses.changed([...new Set(rollouts.map((r) => r.revision))]);
    this.enqueue(follow);
  }

  /** Declarations that changed without a new generation (nodes, policies): reconcile what they touch. */
  declarationsChanged(changes: DeclarationChanges): void {
    // What a host presented is compared with what its node declares now.
    reviewHostIdentities(this.store, changes.nodes, this.nowIso(), this.newId);
    for (const assignment of changes.assignments)
      this.enqueue(this.store.activeInstanceKeysOfAssignment(assignment));
    for (const name of changes.nodes) {
      this.enqueue(this.store.activeInstanceKeysOfNode(name));
      const node = this.store.node(name);
      if (node) this.checkReach(node);
      if (!this.started || !node || !this.reaches(node) || node.removedAt) continue;
      this.liveness.watch(name);
      if (!node.lastReportAt) this.askForReport(name);
    }
  }

  /**
   * A declared node on a transport this hub does not run is not right either: its instances are
   * never dispatched. `TransportDegraded` (TransportNotEnabled) on the node says so until a hub that
   * runs the transport starts, or the node moves to one that runs here or is removed. Every other
   * reason a transport observed holds only while that transport is how this hub reaches the node:
   * one observed over a transport the hub does not run (an earlier hub's, or the node's before it
   * moved) no longer holds and resolves, so a node never shows an old run's `NoCredentials` beside
   * this run's `TransportNotEnabled`. Run at start and whenever the node's declaration changes.
   */
  private checkReach(node: NodeRecord): void {
    const now = this.nowIso();
    const reached = !node.removedAt && this.reaches(node);
    let changed = false;
    const resolve = (reason: string, resolution: string) => {
      if (markResolved(this.store, "TransportDegraded", "node", node.name, now, resolution, reason))
        changed = true;
    };
    for (const condition of this.store.conditions({
      status: "open",
      type: "TransportDegraded",
      subjectKind: "node",
      subject: node.name,
    })) {
      const via = typeof condition.evidence.transport === "string" ? condition.evidence.transport : undefined;
      if (node.removedAt) resolve(condition.reason, `node ${node.name} is no longer declared`);
      else if (condition.reason === "TransportNotEnabled") {
        if (reached) resolve(condition.reason, `this hub runs transport ${node.transport}`);
      } else if (!reached)
        resolve(
          condition.reason,
          `this hub does not run transport ${node.transport}: ${via ?? "that transport"} does not reach node ${node.name} now (TransportNotEnabled says why nothing does)`,
        );
      else if (via !== undefined && via !== node.transport)
        resolve(
          condition.reason,
          `node ${node.name} now uses transport ${node.transport}: ${via} no longer reaches it`,
        );
    }
    if (!reached && !node.removedAt) {
      const instances = this.store.activeInstanceKeysOfNode(node.name);
      const { change } = markOpen(
        this.store,
        {
          type: "TransportDegraded",
          subjectKind: "node",
          subject: node.name,
          reason: "TransportNotEnabled",
          message: `node ${node.name} uses transport ${node.transport}, which this hub does not run (it runs ${this.transportNames.join(", ") || "none"}): its ${instances.length} instances are not dispatched`,
          evidence: { transport: node.transport, instances: instances.slice(0, 20) },
          resolver: "operator",
          node: node.name,
        },
        now,
        this.newId,
      );
      if (change === "opened") changed = true;
    }
    // The rollouts go on around a node this hub does not reach, and wait for it again once it does.
    if (changed) this.reviewRolloutsOf(node.name);
  }

  /**
   * A node's first report since this hub started, over `transport`, taken at `takenAt`: that
   * transport reaches it. Its `TransportDegraded` conditions that an earlier hub run observed over
   * that transport (and nothing in this run has observed since), before the report was taken, no
   * longer hold: the transport that would say they ended kept them in memory and is gone. Within
   * one run the transport itself says when a problem ends.
   */
  private reachedAgain(name: string, transport: string, takenAt: string): void {
    const now = this.nowIso();
    for (const condition of this.store.conditions({
      status: "open",
      type: "TransportDegraded",
      subjectKind: "node",
      subject: name,
    }))
      if (
        condition.evidence.transport === transport &&
        condition.lastObserved < this.startedAt &&
        condition.since < takenAt
      )
        markResolved(
          this.store,
          "TransportDegraded",
          "node",
          name,
          now,
          `node ${name} reported over ${transport} at ${takenAt}, after this was observed`,
          condition.reason,
        );
  }

  /** Resolves when nothing is queued, being reconciled, relayed or handled (timers may be pending). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  get activity(): HubActivity {
    return {
      queued: this.queue.size,
      delayed: this.queue.delayed,
      relaying: this.relaying,
      handling: this.handling,
    };
  }

  private isIdle(): boolean {
    return (
      this.stopped ||
      (this.queue.size === 0 &&
        !this.scheduled &&
        !this.processing &&
        this.relaying === 0 &&
        this.handling === 0 &&
        this.inbox.length === 0 &&
        !this.inboxScheduled)
    );
  }

  private wakeIdle(): void {
    if (!this.isIdle()) return;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private nowIso(): string {
    return this.clock.now().toISOString();
  }

  private schedule(): void {
    if (this.scheduled || this.stopping) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.process();
    });
  }

  /** Reconciles one batch of ready keys in one transaction, then acts on the outcomes. */
  private process(): void {
    if (this.stopping || this.processing) return;
    this.processing = true;
    try {
      const keys = this.queue.take(this.batchSize);
      if (keys.length === 0) return;
      const outcomes: ReconcileOutcome[] = [];
      this.store.transaction(() => {
        for (const key of keys) {
          const started = performance.now();
          try {
            outcomes.push(this.store.transaction(() => reconcileInstance(this.context, key)));
            this.metrics.reconcileSeconds.observe(
              { outcome: outcomes.at(-1)!.outcome.split(":")[0]! },
              (performance.now() - started) / 1000,
            );
          } catch (error) {
            // A failed reconcile rolls back alone and is retried later; it never stops the others.
            this.metrics.reconcileSeconds.observe({ outcome: "error" }, (performance.now() - started) / 1000);
            this.log.error({ instance: key, err: error }, "reconcile failed; retrying in 5s");
            this.queue.addAt(key, this.clock.now().getTime() + 5 * SECOND);
          }
        }
      });
      const reportsWanted = new Set<string>();
      const dispatched: string[] = [];
      for (const outcome of outcomes) {
        this.statuses.changed(outcome.revisions);
        if (outcome.requeueAt !== undefined) this.queue.addAt(outcome.key, outcome.requeueAt);
        if (outcome.requestReport) reportsWanted.add(outcome.requestReport);
        dispatched.push(...outcome.dispatched);
        if (outcome.follow.length > 0) this.queue.addAll(outcome.follow);
        for (const listener of this.listeners) listener(outcome);
      }
      this.relay(dispatched);
      for (const node of reportsWanted) this.askForReport(node);
    } finally {
      this.processing = false;
      if (this.queue.size > 0) this.schedule();
      else this.wakeIdle();
    }
  }

  /**
   * Hands outbox rows to their nodes' transports. Each attempt is marked dispatched (its lease
   * starting) in one transaction *before* its hand-over begins: after a crash, an attempt still
   * queued was certainly never sent and is sent again; one marked dispatched may have reached its
   * node, so it is never sent again — its lease runs out and a fresh report settles it.
   */
  private relay(attemptIds: readonly string[]): void {
    if (attemptIds.length === 0) return;
    const handedAt = this.clock.now();
    const lease = new Date(handedAt.getTime() + this.timing.leaseMs).toISOString();
    const jobs: { attempt: AttemptRecord; node: NodeRecord; transport: Transport; bundle: Bundle }[] = [];
    const orphans: string[] = [];
    this.store.transaction(() => {
      for (const attemptId of attemptIds) {
        const row = this.store.outboxRow(attemptId);
        const attempt = this.store.attempt(attemptId);
        if (!row || attempt?.status !== "queued") continue;
        const node = this.store.node(row.node);
        const transport = node ? this.transports.get(node.transport) : undefined;
        if (!node || !transport) {
          orphans.push(attemptId);
          continue;
        }
        const dispatched = {
          ...attempt,
          status: "dispatched" as const,
          dispatchedAt: handedAt.toISOString(),
          leaseExpiresAt: lease,
        };
        this.store.saveDispatched(dispatched);
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
    const log = this.log.child({
      attemptId: attempt.id,
      instance: attempt.instanceKey,
      generation: attempt.generation,
    });
    this.relaying++;
    transport
      .dispatch(bundle, node.spec)
      .then(
        () => {
          this.metrics.dispatchesTotal.inc({ transport: transport.name, result: "accepted" });
          // Not recorded (a stopping hub): the outbox row stays, and the next start settles it.
          this.deliver("dispatched", transport.name, () => {
            this.store.deleteOutbox(attempt.id);
            // Look again when the lease ends (the result usually comes first, and is looked at then).
            this.queue.addAt(attempt.instanceKey, Date.parse(attempt.leaseExpiresAt!));
          }).catch(() => undefined);
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
          this.metrics.dispatchesTotal.inc({ transport: transport.name, result: failure.failureClass });
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
        this.wakeIdle();
      });
  }

  /** A hand-over that did not happen (or may have): the attempt is failed or ambiguous, never left pending. */
  private settleDispatch(attemptId: string, failure: DispatchError): void {
    const now = this.nowIso();
    this.store.transaction(() => {
      const attempt = this.store.attempt(attemptId);
      this.store.deleteOutbox(attemptId);
      // A result may already have settled it (a fast agent): never undo that.
      if (attempt?.status !== "queued" && attempt?.status !== "dispatched") return;
      if (failure.failureClass === "ambiguous")
        this.store.saveAttempt({
          ...attempt,
          status: "ambiguous",
          reason: failure.reason,
          message: redact(failure.message),
          dispatchedAt: attempt.dispatchedAt ?? now,
          settleAfter: now,
        });
      else
        this.store.saveAttempt({
          ...attempt,
          status: "failed",
          failureClass: failure.failureClass,
          reason: failure.reason,
          message: redact(failure.message),
          finishedAt: now,
          settledBy: "dispatch",
        });
    });
    const attempt = this.store.attempt(attemptId);
    if (attempt) this.queue.add(attempt.instanceKey);
  }

  private askForReport(name: string): void {
    const node = this.store.node(name);
    const transport = node ? this.transports.get(node.transport) : undefined;
    if (!node || !transport) return;
    this.track(
      transport.requestReport(node.spec).catch((error: unknown) => {
        this.log.warn({ node: name, err: error }, "could not ask node %s for a report", name);
      }),
    );
  }

  private track(work: Promise<unknown>): void {
    this.handling++;
    work.finally(() => {
      this.handling--;
      this.wakeIdle();
    });
  }

  /**
   * The handlers a transport calls; `transport` names it in conditions. Each resolves once what it
   * delivered is committed. A report, result or loss that could not be recorded rejects, so a
   * transport that acknowledges (NATS) lets it come again; a heartbeat or health event never rejects
   * (the next one says the same).
   */
  eventsFor(transport: string): TransportEvents {
    const bestEffort = (event: string, promise: Promise<void>) =>
      promise.catch((error: unknown) => {
        if (!(error instanceof HubStoppedError))
          this.log.warn({ err: error, transport, event }, "a %s event was not recorded", event);
      });
    return {
      report: (report: Report) =>
        this.deliver("report", transport, () => this.ingestReport(report, transport)),
      result: (result: AttemptResult) => this.deliver("result", transport, () => this.ingestResult(result)),
      heartbeat: (node: string, at: Date) =>
        bestEffort(
          "heartbeat",
          this.deliver("heartbeat", transport, () => this.ingestHeartbeat(node, at)),
        ),
      lost: (attemptId: string, node: string, reason: string) =>
        this.deliver("lost", transport, () => this.ingestLost(attemptId, node, reason)),
      health: (event: TransportHealth) =>
        bestEffort(
          "health",
          this.deliver("health", transport, () => this.ingestHealth(transport, event)),
        ),
      identity: (node: string, identity: { nkey: string; age: string }) =>
        this.deliver("identity", transport, () =>
          observeHostIdentity(this.store, { node, identity, transport }, this.nowIso(), this.newId),
        ),
    };
  }

  /**
   * Records a task agent's claim, resolution or decline from the bus, exactly as `steward tasks
   * claim|resolve` does: the claimant, the resolver and the action taken. Resolves once committed; an
   * event that does not fit the task (already resolved, claimed by another) is logged and dropped.
   */
  recordTaskEvent(event: TaskEvent): Promise<void> {
    return this.deliver("task", "bus", () => this.ingestTaskEvent(event));
  }

  private ingestTaskEvent(event: TaskEvent): void {
    const now = this.nowIso();
    const log = this.log.child({ taskId: event.taskId, by: event.by, kind: event.kind });
    try {
      if (event.kind === "claimed") claimTask(this.store, event.taskId, event.by, now);
      else if (event.kind === "declined")
        releaseTask(this.store, event.taskId, event.by, event.note ?? "", now);
      else {
        const { condition } = resolveTask(
          this.store,
          event.taskId,
          event.by,
          event.action ?? "",
          now,
          event.outcome,
        );
        // An action on a blocked or stuck instance earns it one more attempt now; a resumed rollout moves.
        if (condition.node) this.lookAgainAt(condition.node);
        if (condition.type === "RolloutPaused" && condition.revision)
          this.lookAgainAtRevision(condition.revision);
      }
      log.info(
        { action: event.action, note: event.note },
        "task %s %s by %s",
        event.taskId,
        event.kind,
        event.by,
      );
    } catch (error) {
      if (!(error instanceof TaskError)) throw error;
      log.warn({ err: error }, "task event not recorded: %s", error.message);
    }
  }

  /**
   * Events from transports go through an inbox that is written in one transaction per turn of the
   * event loop: a burst of results and reports costs one commit, not one each. Each event's promise
   * settles after that commit: resolved when recorded, rejected when not.
   */
  private deliver(event: string, transport: string, run: () => void): Promise<void> {
    if (this.stopped) return Promise.reject(new HubStoppedError(event));
    return new Promise<void>((recorded, failed) => {
      this.inbox.push({ event, transport, run, recorded, failed });
      if (this.inboxScheduled) return;
      this.inboxScheduled = true;
      setImmediate(() => this.flushInbox());
    });
  }

  private flushInbox(): void {
    this.inboxScheduled = false;
    const batch = this.inbox.splice(0);
    if (batch.length === 0) {
      this.wakeIdle();
      return;
    }
    const failures = new Map<InboxEvent, unknown>();
    try {
      this.store.transaction(() => {
        for (const entry of batch) {
          try {
            // Each event in its own savepoint: one that fails rolls back alone.
            this.store.transaction(entry.run);
          } catch (error) {
            failures.set(entry, error);
            this.log.error(
              { err: error, transport: entry.transport, event: entry.event },
              "handling a %s event failed",
              entry.event,
            );
          }
        }
      });
    } catch (error) {
      // Nothing of the batch is committed.
      this.log.error(
        { err: error, events: batch.length },
        "recording %d transport events failed",
        batch.length,
      );
      for (const entry of batch) entry.failed(error);
      return;
    } finally {
      this.wakeIdle();
    }
    for (const entry of batch) {
      if (failures.has(entry)) entry.failed(failures.get(entry));
      else entry.recorded();
    }
  }

  /** A full report (over `transport`): the node's latest observation. It never changes a desired target. */
  ingestReport(report: Report, transport?: string): void {
    const received = this.nowIso();
    const affected = this.store.transaction(() => {
      const changed = this.store.saveReport(report, received);
      if (!changed) return undefined;
      this.liveness.heardFrom(report.node, this.clock.now(), report.takenAt);
      // What a report can change: observations that differ from the last ones, and intents that wait
      // for a fresh report whatever it says (ambiguous attempts, applies waiting for confirmation,
      // observe-only comparisons). Everything else on the node would decide the same as before.
      const keys = new Set(changed);
      for (const key of this.store.intentKeysOfNode(report.node, REPORT_WAITERS)) keys.add(key);
      if (!this.seenNodes.has(report.node)) {
        // The first report since this hub started (registration): look at all of the node's instances.
        this.seenNodes.add(report.node);
        for (const key of this.store.activeInstanceKeysOfNode(report.node)) keys.add(key);
        if (transport) this.reachedAgain(report.node, transport, report.takenAt);
      }
      return keys;
    });
    this.metrics.reportsTotal.inc();
    if (!affected) {
      this.log.debug(
        { node: report.node, takenAt: report.takenAt },
        "report older than the stored one ignored",
      );
      return;
    }
    this.nodeReturned(report.node);
    this.queue.addAll(affected);
  }

  /** An attempt's outcome as the agent saw it; the next reconcile decides what it means. */
  ingestResult(result: AttemptResult): void {
    const log = this.log.child({
      attemptId: result.attemptId,
      instance: `${result.assignment}@${result.node}`,
    });
    const attempt = this.store.attempt(result.attemptId);
    if (!attempt) {
      log.warn("result for an attempt this hub does not know; ignored");
      return;
    }
    if (attempt.status === "superseded") {
      // Its generation is no longer desired: what it did is evidence, and nothing to act on.
      if (!attempt.lateResult) {
        const late: NonNullable<AttemptRecord["lateResult"]> = {
          outcome: result.outcome,
          at: result.finishedAt,
        };
        if (result.reason) late.reason = result.reason;
        this.store.saveAttempt({ ...attempt, lateResult: late });
      }
      log.info(
        { outcome: result.outcome, supersededBy: attempt.supersededBy },
        "result for an attempt superseded by generation %s: kept as evidence",
        String(attempt.supersededBy ?? "?"),
      );
      return;
    }
    if (!["queued", "dispatched", "ambiguous", "lost"].includes(attempt.status)) {
      log.debug({ status: attempt.status }, "result for an attempt already settled; ignored");
      return;
    }
    const failed = result.resources.filter((r) => r.action === "failed" || r.action === "blocked");
    const updated = {
      ...attempt,
      status: result.outcome,
      finishedAt: result.finishedAt,
      settledBy: "result" as const,
    };
    if (result.failureClass) updated.failureClass = result.failureClass;
    if (result.reason) updated.reason = result.reason;
    if (result.message) updated.message = redact(result.message);
    if (failed.length > 0)
      updated.evidence = failed.slice(0, 20).map((r) => ({
        name: r.name,
        kind: r.kind,
        action: r.action,
        failureClass: r.failureClass,
        reason: r.reason,
        message: r.message && redact(r.message),
        blockedBy: r.blockedBy,
        evidence: r.evidence && redact(r.evidence),
      }));
    updated.dispatchedAt ??= attempt.createdAt;
    this.store.saveAttempt(updated);
    log.info(
      {
        outcome: result.outcome,
        failureClass: result.failureClass,
        reason: result.reason,
        duplicate: result.duplicate,
      },
      "attempt result: %s",
      result.outcome,
    );
    this.queue.add(attempt.instanceKey);
  }

  /** The result of an attempt is lost (session dropped, agent died): ambiguous, never replayed blindly. */
  ingestLost(attemptId: string, node: string, reason: string): void {
    const attempt = this.store.attempt(attemptId);
    if (!attempt || (attempt.status !== "queued" && attempt.status !== "dispatched")) return;
    this.store.saveAttempt({
      ...attempt,
      status: "ambiguous",
      reason: "ResultLost",
      message: redact(reason),
      dispatchedAt: attempt.dispatchedAt ?? attempt.createdAt,
      settleAfter: this.nowIso(),
    });
    this.store.deleteOutbox(attemptId);
    this.log.warn(
      { attemptId, instance: attempt.instanceKey, node },
      "attempt result lost: %s",
      redact(reason),
    );
    this.queue.add(attempt.instanceKey);
  }

  ingestHeartbeat(node: string, at: Date): void {
    this.liveness.heardFrom(node, at);
    this.nodeReturned(node);
  }

  ingestHealth(transport: string, event: TransportHealth): void {
    const subjectKind = event.node ? "node" : "transport";
    const subject = event.node ?? transport;
    const now = this.nowIso();
    // A node removed from Git (its credentials revoked, its agent cut off) is nothing steward owns now.
    if (event.status === "degraded" && event.node && this.store.node(event.node)?.removedAt) {
      this.log.info(
        { transport, node: event.node, reason: event.reason },
        "%s (node %s is no longer declared)",
        event.message,
        event.node,
      );
      return;
    }
    if (event.status === "degraded") {
      const { change } = markOpen(
        this.store,
        {
          type: "TransportDegraded",
          subjectKind,
          subject,
          reason: event.reason,
          message: `${transport}: ${event.message}`,
          evidence: { transport },
          resolver: "steward",
          ...(event.node ? { node: event.node } : {}),
        },
        now,
        this.newId,
      );
      if (change === "opened")
        this.log.warn({ transport, node: event.node, reason: event.reason }, event.message);
    } else
      markResolved(
        this.store,
        "TransportDegraded",
        subjectKind,
        subject,
        now,
        `${transport}: ${event.message}`,
        event.reason,
      );
  }

  /** A node that failed dispatches answers again: its retries waiting on the transport go now. */
  private nodeReturned(name: string): void {
    if (!this.unreachable.delete(name)) return;
    const now = this.nowIso();
    const keys: string[] = [];
    this.store.transaction(() => {
      for (const intent of this.waitingForNode(name)) {
        this.store.saveIntent({ ...intent, nextAttemptAt: now, updatedAt: now });
        keys.push(intent.instanceKey);
      }
    });
    if (keys.length > 0)
      this.log.info({ node: name, instances: keys.length }, "node %s is reachable again", name);
    this.enqueue(keys);
  }

  /** Intents on `name` backing off because their last attempt could not be handed to the node. */
  private waitingForNode(name: string): IntentRecord[] {
    const waiting: IntentRecord[] = [];
    for (const key of this.store.intentKeysOfNode(name, ["backoff", "stuck"])) {
      const desired = this.store.desired(key);
      const intent = desired ? this.store.intent(key, desired.generation) : undefined;
      const last = intent?.lastAttemptId ? this.store.attempt(intent.lastAttemptId) : undefined;
      if (intent && last?.settledBy === "dispatch") waiting.push(intent);
    }
    return waiting;
  }

  /** Hands the current statuses of every changed revision to the status sink now. */
  publishStatuses(): void {
    this.statuses.publish();
  }

  /** A status destination started or stopped failing: `StatusWriteFailing` on it. */
  statusHealth(health: StatusHealth): void {
    this.statuses.health(health);
  }

  private scheduleResync(): void {
    if (this.resyncIntervalMs <= 0 || this.stopping) return;
    this.cancelResync = this.clock.schedule(this.resyncIntervalMs, () => {
      this.takeInRevisions();
      this.enqueue(this.store.recoveryKeys());
      this.scheduleResync();
    });
  }
}
