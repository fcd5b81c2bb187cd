/**
 * The hub: reconciles what should be (generations from the syncer) with what is (reports from
 * nodes), durably. This file wires its parts and owns the work queue: revision intake (intake.ts)
 * queues what a sync changed, reconciles run in batches (each batch one transaction, reconcile.ts),
 * the relay (relay.ts) hands the attempts they wrote to the transports, and transport events go
 * through the inbox (inbox.ts) to their handlers (ingest.ts), which queue what they may change.
 * Attempts change state only through attempts.ts. On a bus (bus.ts) it mirrors its open conditions
 * for anyone to watch, publishes its tasks, and records task agents' claims and resolutions.
 *
 * Work grows with the change, not the fleet: a sync queues only the instances whose generation
 * changed, a report only its node's instances, a timer only its own key. A restart queues the
 * instances that are not converged, re-hands the outbox and lets decide() treat expired leases as
 * ambiguous — never replaying an attempt blindly.
 */
import pino, { type Logger } from "pino";
import type { AttemptResult, Report } from "../model/generated.js";
import { nextAttempt } from "./attempts.js";
import { BusFeed, type HubBus, type TaskEvent } from "./bus.js";
import { type Clock, systemClock } from "./clock.js";
import { DEFAULT_TIMING, type Timing } from "./decide.js";
import type { DeclarationChanges } from "./desired.js";
import { observeHostIdentity, reviewHostIdentities } from "./enrolment/identities.js";
import { idFactory } from "./ids.js";
import { type EventReads, HubStoppedError, Inbox } from "./inbox.js";
import { Ingest, REPORT_WAITERS } from "./ingest.js";
import { RevisionIntake } from "./intake.js";
import { Liveness } from "./liveness.js";
import { HubMetrics, type ReplicaState } from "./metrics.js";
import { WorkQueue } from "./queue.js";
import { checkReach } from "./reach.js";
import {
  type ReconcileContext,
  type ReconcileOutcome,
  reconcileInstance,
  reviewRollout,
} from "./reconcile.js";
import type { NodeRecord, RevisionRecord } from "./records.js";
import { Relay } from "./relay.js";
import type { StatusHealth, StatusSink } from "./status.js";
import { StatusFeed } from "./status-feed.js";
import {
  FencedError,
  StepsRerun,
  type Store,
  type StoreReads,
  type Transactional,
  type UnitOfWork,
} from "./store/store.js";
import { NotOwnedError, type Transport, type TransportEvents, type TransportHealth } from "./transport.js";

export { HubStoppedError } from "./inbox.js";

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
  /** One replica of several sharing the store (replicas/replica.ts): which nodes are this hub's. */
  ownership?: Ownership;
}

/**
 * Which nodes a hub replica owns now (replicas/replica.ts), and how work about the others reaches
 * their owner. A hub without one owns every node and is its fleet's only hub.
 */
export interface Ownership {
  owns(node: string): boolean;
  /** Whether this replica syncs the repository and takes revisions in. */
  readonly leader: boolean;
  /** Hands instance keys of nodes another replica owns to it. */
  forward(keys: readonly string[]): void;
  /** A unit of work was fenced: the replica lost leases it counted on. */
  fencedOut(): void;
  /** The shards (model/shards.ts) it holds now. */
  shards(): ReadonlySet<number>;
  /** What it holds, for /healthz and /metrics. */
  state(): ReplicaState;
}

/** The node of an instance key (`assignment@node`). */
const nodeOfKey = (key: string) => key.slice(key.lastIndexOf("@") + 1);

/** What `steward up` and tests see of a hub's progress. */
export interface HubActivity {
  queued: number;
  delayed: number;
  relaying: number;
  handling: number;
}

const SECOND = 1000;
/** How long a heartbeat that only brings a node's last-heard time waits for others to be recorded with. */
const BEAT_GATHERING_MS = SECOND;

export class Hub {
  readonly store: Store;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: HubMetrics;
  readonly timing: Timing;
  private readonly transports = new Map<string, Transport>();
  private readonly queue: WorkQueue;
  private readonly newId: () => string;
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
  private readonly idleWaiters: (() => void)[] = [];
  private cancelResync: (() => void) | undefined;
  /** Heartbeats whose recording waits for the others of its second (beatsSoon). */
  private readonly beatRecordings: (() => Promise<void>)[] = [];
  private cancelBeats: (() => void) | undefined;
  private readonly listeners = new Set<(outcome: ReconcileOutcome) => void>();
  private readonly liveness: Liveness;
  private readonly statuses: StatusFeed;
  private readonly bus: BusFeed | undefined;
  private readonly inbox: Inbox;
  private readonly ingest: Ingest;
  private readonly intake: RevisionIntake;
  private readonly relay: Relay;
  private readonly ownership: Ownership | undefined;

  constructor(options: HubOptions) {
    this.store = options.store;
    this.ownership = options.ownership;
    this.clock = options.clock ?? systemClock;
    this.log = options.logger ?? pino({ level: "silent" });
    this.timing = {
      ...DEFAULT_TIMING,
      ...options.timing,
      backoff: { ...DEFAULT_TIMING.backoff, ...options.timing?.backoff },
    };
    this.batchSize = options.batchSize ?? 1024;
    this.resyncIntervalMs = options.resyncIntervalMs ?? 10 * 60 * SECOND;
    this.newId = idFactory(this.clock);
    this.metrics = new HubMetrics(this.store);
    if (options.ownership) {
      const ownership = options.ownership;
      this.metrics.watchReplica(() => ownership.state());
    }
    for (const transport of options.transports ?? []) this.transports.set(transport.name, transport);
    this.queue = new WorkQueue(this.clock, () => this.schedule());
    const wakeIdle = () => this.wakeIdle();
    const enqueue = (keys: Iterable<string>) => this.enqueue(keys);
    this.inbox = new Inbox({
      store: this.store,
      log: this.log,
      flushed: wakeIdle,
      fencedOut: () => this.ownership?.fencedOut(),
      readAhead: (tx, reads) => tx.readAheadEvents({ ...reads, waiting: REPORT_WAITERS }),
    });
    this.relay = new Relay({
      store: this.store,
      clock: this.clock,
      log: this.log,
      metrics: this.metrics,
      leaseMs: this.timing.leaseMs,
      transports: this.transports,
      inbox: this.inbox,
      requeue: (key, at) => (at === undefined ? this.queue.add(key) : this.queue.addAt(key, at)),
      enqueue,
      settled: wakeIdle,
    });
    this.liveness = new Liveness({
      store: this.store,
      clock: this.clock,
      log: this.log,
      newId: this.newId,
      reaches: (node) => this.reaches(node) && this.owns(node.name),
      askForReport: (node) => this.relay.askForReport(node),
      silenceChanged: (node, tx) => this.reviewRolloutsOf(node, tx),
      beforeCheck: async () => {
        if (this.inbox.busy) await this.inbox.flush();
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
    this.ingest = new Ingest({
      clock: this.clock,
      log: this.log,
      newId: this.newId,
      metrics: this.metrics,
      liveness: this.liveness,
      startedAt: () => this.startedAt,
      nodeAnswered: (node, tx) => this.relay.nodeAnswered(node, tx),
      enqueue: (keys) => this.queue.addAll(keys),
      lookAgainAt: (node, tx) => this.lookAgainAt(node, tx),
      lookAgainAtRevision: (sha, tx) => this.lookAgainAtRevision(sha, tx),
    });
    this.intake = new RevisionIntake({
      store: this.store,
      log: this.log,
      now: () => this.nowIso(),
      newId: this.newId,
      statusesChanged: (shas) => this.statuses.changed(shas),
      enqueue,
    });
    this.context = {
      clock: this.clock,
      newId: this.newId,
      timing: this.timing,
      random: options.random ?? Math.random,
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

  /** Whether node `name` is this hub's to reconcile and dispatch to (always, without replicas). */
  owns(name: string): boolean {
    return this.ownership?.owns(name) ?? true;
  }

  /** What this replica holds (undefined: not one of several). */
  get replica(): ReplicaState | undefined {
    return this.ownership?.state();
  }

  /** Whether this hub takes revisions in (without replicas, always; else the sync lease's holder). */
  get leader(): boolean {
    return this.ownership?.leader ?? true;
  }

  /** The replica's shards changed (and at start): each transport hands this hub its own shards' events. */
  async shardsChanged(): Promise<void> {
    if (!this.ownership) return;
    const shards = this.ownership.shards();
    for (const transport of this.transports.values()) await transport.consumeShards?.(shards);
  }

  /** Recovers durable work and starts the transports. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.startedAt = this.nowIso();
    await this.liveness.load();
    await this.takeInRevisions();
    const recovered = await this.store.intents.recoveryKeys();
    const outbox = (await this.store.attempts.outbox()).filter((row) => this.owns(row.node));
    this.log.info(
      { instances: recovered.length, outbox: outbox.length, transports: this.transportNames },
      "hub starting: recovering %d instances and %d outbox rows",
      recovered.length,
      outbox.length,
    );
    await this.shardsChanged();
    for (const [name, transport] of this.transports) await transport.start(this.eventsFor(name));
    this.bus?.start();
    await this.relay.recover(outbox.map((row) => row.attemptId));
    // Registration: every node this hub reaches reports once at start, so observe-only compares,
    // ambiguous attempts settle and silent nodes are noticed without waiting for a change.
    const nodes = await this.store.nodes.list();
    await this.checkReachOf(nodes);
    await this.register(nodes.filter((node) => this.owns(node.name)));
    this.queue.addAll(recovered);
    this.scheduleResync();
  }

  /** Nodes this hub reaches report once, so ambiguous attempts settle and silent ones are noticed. */
  private async register(nodes: readonly NodeRecord[]): Promise<void> {
    const reached = nodes.filter((node) => this.reaches(node) && !node.removedAt);
    await this.relay.rememberUnreachable(reached.map((node) => node.name));
    this.liveness.watchNodes(reached);
    for (const node of reached) this.relay.askForReport(node.name, node);
  }

  /**
   * This replica took over `names` (replicas/replica.ts). From another replica (`takeover`), what
   * that one had in flight is ambiguous at once — it may or may not have reached the node — and is
   * settled by the fresh report asked for now, never replayed; attempts it queued and never handed
   * over go now. Then the nodes are registered and their unconverged instances reconciled.
   */
  async nodesGained(names: readonly string[], takeover: { from?: string } = {}): Promise<void> {
    if (!this.started || this.stopping || names.length === 0) return;
    const wanted = new Set(names);
    for (const name of names) this.store.forgetNode(name);
    if (takeover.from) {
      const at = this.nowIso();
      const from = takeover.from;
      await this.store.transaction(async (tx) => {
        await tx.fence(names);
        for (const attempt of await tx.attempts.openOfNodes(names)) {
          if (attempt.status !== "dispatched") continue;
          const lost = nextAttempt(attempt, { kind: "owner-lost", at, replica: from });
          if (lost) await tx.attempts.save(lost);
        }
      });
    }
    const outbox = (await this.store.attempts.outbox()).filter((row) => wanted.has(row.node));
    await this.relay.recover(outbox.map((row) => row.attemptId));
    const nodes = (await this.store.nodes.list()).filter((node) => wanted.has(node.name));
    await this.register(nodes);
    const keys = await this.store.desired.activeKeysOfNodes(names);
    this.log.info(
      { nodes: names.length, instances: keys.length, from: takeover.from },
      "took over %d nodes",
      names.length,
    );
    this.enqueue(keys);
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
    // Beats gathered for the store are dropped: the next start hears the nodes again.
    this.cancelBeats?.();
    this.beatRecordings.length = 0;
    await this.statuses.stop();
    this.liveness.stop();
    for (const transport of this.transports.values()) await transport.stop();
    await this.inbox.close();
    // A batch of reconciles still running ends (its unit of work commits or rolls back) first.
    while (this.processing) await new Promise((resolve) => setImmediate(resolve));
    this.stopped = true;
    this.relay.stop();
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

  /** Takes in what the syncer recorded since the last call (intake.ts); resolves with the revisions taken in. */
  takeInRevisions(): Promise<RevisionRecord[]> {
    // Among replicas, the sync lease's holder takes revisions in, once for all.
    if (!this.leader) return Promise.resolve([]);
    return this.intake.takeIn();
  }

  /**
   * Re-reads operator changes after a CLI wrote them: new revisions; a node drained or undrained
   * (`node`); a rollout paused or resumed (`revision`: its rollouts are looked at again).
   */
  async nudge(scope: { node?: string; revision?: string } = {}): Promise<void> {
    await this.takeInRevisions();
    // The CLI may have closed a condition (a human procedure done): the bus shows what is open now.
    this.bus?.resync();
    if (scope.node) await this.lookAgainAt(scope.node);
    if (scope.revision) await this.lookAgainAtRevision(scope.revision);
  }

  /**
   * Reconciles a node's instances now, sends its retries that wait on the transport, and looks
   * again at the rollouts it has members in (a drained node's members no longer hold them up).
   * Inside unit of work `tx` when one is given.
   */
  private async lookAgainAt(name: string, tx: Transactional & StoreReads = this.store): Promise<void> {
    this.enqueue(await tx.desired.activeKeysOfNode(name));
    const node = await tx.nodes.get(name);
    if (node && !node.draining) await this.relay.nodeAnswered(name, tx);
    await this.reviewRolloutsOf(name, tx);
  }

  /** Looks again at every rollout of `revision` (an operator paused or resumed it). */
  private async lookAgainAtRevision(sha: string, tx: Transactional & StoreReads = this.store): Promise<void> {
    const assignments = new Set((await tx.desired.generationsOf(sha)).map((g) => g.assignment));
    await this.reviewRollouts(
      [...assignments].map((assignment) => ({ assignment, revision: sha })),
      tx,
    );
  }

  /**
   * Whether the rollouts wait for `name` changed (it drained or came back, went silent or was heard,
   * its transport stopped or started being run here): look again at each rollout it has unconverged
   * members in, so slots and failures it held are counted anew. Costs what the node has in flight.
   */
  private async reviewRolloutsOf(name: string, tx: Transactional & StoreReads = this.store): Promise<void> {
    await this.reviewRollouts(await tx.rollouts.ofNode(name), tx);
  }

  private async reviewRollouts(
    rollouts: readonly { assignment: string; revision: string }[],
    within: Transactional = this.store,
  ): Promise<void> {
    if (rollouts.length === 0 || this.stopping) return;
    const follow: string[] = [];
    await within.transaction(async (tx) => {
      for (const rollout of rollouts) follow.push(...(await reviewRollout(this.context, tx, rollout)).follow);
    });
    this.statuses.changed([...new Set(rollouts.map((r) => r.revision))]);
    this.enqueue(follow);
  }

  /** Declarations that changed without a new generation (nodes, policies): reconcile what they touch. */
  async declarationsChanged(changes: DeclarationChanges): Promise<void> {
    // What a host presented is compared with what its node declares now.
    await reviewHostIdentities(this.store, changes.nodes, this.nowIso(), this.newId);
    if (changes.nodes.length > 0 || changes.assignments.length > 0) await this.liveness.settingsChanged();
    for (const assignment of changes.assignments)
      this.enqueue(await this.store.desired.activeKeysOfAssignment(assignment));
    if (changes.nodes.length === 0) return;
    // A first sync declares a whole fleet: each step is a query for all its nodes, not one each.
    this.enqueue(await this.store.desired.activeKeysOfNodes(changes.nodes));
    const nodes = [...(await this.store.nodes.named(changes.nodes)).values()];
    await this.checkReachOf(nodes);
    if (!this.started) return;
    const reached = nodes.filter((node) => this.reaches(node) && !node.removedAt);
    this.liveness.watchNodes(reached);
    for (const node of reached) if (!node.lastReportAt) this.relay.askForReport(node.name, node);
  }

  /**
   * Checks whether this hub reaches each of `nodes` (reach.ts): only a node it does not reach, or
   * one with an open TransportDegraded, has anything to check — the rest cost one query for all.
   * The rollouts that wait for a node look again when its reach changed.
   */
  private async checkReachOf(nodes: readonly NodeRecord[]): Promise<void> {
    const degraded = new Set(
      (
        await this.store.conditions.list({ status: "open", type: "TransportDegraded", subjectKind: "node" })
      ).map((condition) => condition.subject),
    );
    const context = {
      newId: this.newId,
      reaches: (n: NodeRecord) => this.reaches(n),
      transportNames: this.transportNames,
    };
    const now = this.nowIso();
    for (const node of nodes) {
      if (!degraded.has(node.name) && (node.removedAt || this.reaches(node))) continue;
      const changed = await this.store.transaction((tx) => checkReach(context, tx, node, now));
      if (changed) await this.reviewRolloutsOf(node.name);
    }
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
      relaying: this.relay.relaying,
      handling: this.relay.handling,
    };
  }

  private isIdle(): boolean {
    return (
      this.stopped ||
      (this.queue.size === 0 &&
        !this.scheduled &&
        !this.processing &&
        this.relay.relaying === 0 &&
        this.relay.handling === 0 &&
        !this.inbox.busy)
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
      void this.process();
    });
  }

  /** Reconciles one batch of ready keys in one unit of work (a step each), then acts on the outcomes. */
  private async process(): Promise<void> {
    if (this.stopping || this.processing) return;
    this.processing = true;
    try {
      const taken = this.queue.take(this.batchSize);
      // One pass, so a key is either reconciled here or handed to the replica that owns its node
      // (a sync or a timer here queued it), even when this replica's leases lapse meanwhile.
      let keys = taken;
      if (this.ownership) {
        keys = [];
        const others: string[] = [];
        for (const key of taken) (this.owns(nodeOfKey(key)) ? keys : others).push(key);
        if (others.length > 0) this.ownership.forward(others);
      }
      if (keys.length === 0) return;
      const outcomes: ReconcileOutcome[] = [];
      try {
        await this.store.transaction(async (tx) => {
          // Run again from the start if the store retries the unit (PostgreSQL, another replica).
          outcomes.length = 0;
          await tx.fence(keys.map(nodeOfKey));
          await tx.readAhead(keys);
          for (const key of keys) {
            const started = performance.now();
            try {
              const outcome = await tx.transaction((step) => reconcileInstance(this.context, step, key));
              outcomes.push(outcome);
              this.metrics.reconcileSeconds.observe(
                { outcome: outcome.outcome.split(":")[0]! },
                (performance.now() - started) / 1000,
              );
            } catch (error) {
              // The unit runs again with a savepoint per key, where this one fails alone.
              if (error instanceof StepsRerun) throw error;
              // A failed reconcile rolls back alone and is retried later; it never stops the others.
              this.metrics.reconcileSeconds.observe(
                { outcome: "error" },
                (performance.now() - started) / 1000,
              );
              this.log.error({ instance: key, err: error }, "reconcile failed; retrying in 5s");
              this.queue.addAt(key, this.clock.now().getTime() + 5 * SECOND);
            }
          }
        });
      } catch (error) {
        if (error instanceof FencedError) {
          // Its nodes' leases changed hands: whoever holds them now reconciles them.
          this.log.warn({ nodes: error.nodes.length }, "%s", error.message);
          this.ownership?.fencedOut();
          for (const key of keys) this.queue.addAt(key, this.clock.now().getTime() + SECOND);
          return;
        }
        // Nothing of the batch is committed: every key of it is looked at again.
        this.log.error(
          { err: error, instances: keys.length },
          "a batch of reconciles failed; retrying in 5s",
        );
        for (const key of keys) this.queue.addAt(key, this.clock.now().getTime() + 5 * SECOND);
        return;
      }
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
      await this.relay.relay(dispatched);
      for (const node of reportsWanted) this.relay.askForReport(node);
    } catch (error) {
      this.log.error({ err: error }, "acting on a batch of reconciles failed");
    } finally {
      this.processing = false;
      if (this.queue.size > 0) this.schedule();
      else this.wakeIdle();
    }
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
        // A stopped hub, or a node whose shard moved meanwhile: the next beat says the same to its owner.
        if (!(error instanceof HubStoppedError) && !(error instanceof NotOwnedError))
          this.log.warn({ err: error, transport, event }, "a %s event was not recorded", event);
      });
    // Among replicas, a node's reports, results and losses are its owner's to record: a transport
    // hands each replica its own shards' (consumeShards), and one that comes to another replica
    // (a shard changing hands) is refused, for the transport to hand to the owner. A heartbeat,
    // which every replica hears, is the owner's to record too.
    const foreign = (node: string) => this.ownership !== undefined && !this.owns(node);
    const owned = (node: string, event: string, reads: EventReads, run: (tx: UnitOfWork) => Promise<void>) =>
      foreign(node)
        ? Promise.reject(new NotOwnedError(node))
        : this.inbox.deliver({ event, transport, node, reads }, run);
    return {
      report: (report: Report) =>
        owned(report.node, "report", { reported: report.node }, (tx) =>
          this.ingest.report(tx, report, transport),
        ),
      result: (result: AttemptResult) =>
        owned(result.node, "result", { attempt: result.attemptId }, (tx) => this.ingest.result(tx, result)),
      // A beat is heard at once; the store hears of it by one recording per node at a time, of its
      // latest beat: at once when something changes with it, else with the others of the second
      // (see Liveness.heartbeat): 10,000 nodes at rest write their times in one unit a second.
      heartbeat: (node: string, at: Date) => {
        if (foreign(node)) return Promise.resolve();
        const record = () =>
          bestEffort(
            "heartbeat",
            this.inbox
              .deliver({ event: "heartbeat", transport, node }, (tx) =>
                this.ingest.heartbeat(tx, node, this.liveness.lastHeard(node) ?? at),
              )
              .finally(() => this.liveness.recorded(node)),
          );
        const when = this.liveness.heartbeat(node, at, this.relay.waitsFor(node));
        if (when === "now") return record();
        if (when === "soon") this.beatsSoon(record);
        return Promise.resolve();
      },
      lost: (attemptId: string, node: string, reason: string) =>
        owned(node, "lost", { attempt: attemptId }, (tx) => this.ingest.lost(tx, attemptId, node, reason)),
      health: (event: TransportHealth) =>
        bestEffort(
          "health",
          this.inbox.deliver({ event: "health", transport }, (tx) =>
            this.ingest.health(tx, transport, event),
          ),
        ),
      identity: (node: string, identity: { nkey: string; age: string }) =>
        this.inbox.deliver({ event: "identity", transport }, (tx) =>
          observeHostIdentity(tx, { node, identity, transport }, this.nowIso(), this.newId),
        ),
    };
  }

  /** Records `record`ed beats of the next second together (see eventsFor's heartbeat). */
  private beatsSoon(record: () => Promise<void>): void {
    this.beatRecordings.push(record);
    this.cancelBeats ??= this.clock.schedule(BEAT_GATHERING_MS, () => {
      this.cancelBeats = undefined;
      for (const each of this.beatRecordings.splice(0)) void each();
    });
  }

  /**
   * Records a task agent's claim, resolution or decline from the bus, exactly as `steward tasks
   * claim|resolve` does: the claimant, the resolver and the action taken. Resolves once committed; an
   * event that does not fit the task (already resolved, claimed by another) is logged and dropped.
   */
  recordTaskEvent(event: TaskEvent): Promise<void> {
    return this.inbox.deliver({ event: "task", transport: "bus" }, (tx) => this.ingest.taskEvent(tx, event));
  }

  /** Hands the current statuses of every changed revision to the status sink now. */
  publishStatuses(): Promise<void> {
    return this.statuses.publish();
  }

  /** A status destination started or stopped failing: `StatusWriteFailing` on it. */
  statusHealth(health: StatusHealth): Promise<void> {
    return this.statuses.health(health);
  }

  private scheduleResync(): void {
    if (this.resyncIntervalMs <= 0 || this.stopping) return;
    this.cancelResync = this.clock.schedule(this.resyncIntervalMs, () => {
      void (async () => {
        await this.takeInRevisions();
        this.enqueue(await this.store.intents.recoveryKeys());
      })()
        .catch((error: unknown) => this.log.error({ err: error }, "the safety resync failed"))
        .finally(() => this.scheduleResync());
    });
  }
}
