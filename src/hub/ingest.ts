/**
 * What the hub hears, turned into records: a report becomes the node's latest observation, a result
 * or a loss moves its attempt (attempts.ts), a heartbeat keeps the node from being silent, a
 * transport's health becomes `TransportDegraded`, a task agent's answer is recorded as `steward
 * tasks` records it. Each handler runs inside the inbox's transaction (inbox.ts) and queues the
 * instances whose next reconcile may decide differently — never more: a report queues only the
 * instances whose observation changed and those waiting for a fresh report.
 */
import type { Logger } from "pino";
import type { AttemptResult, Report } from "../model/generated.js";
import { nextAttempt } from "./attempts.js";
import type { TaskEvent } from "./bus.js";
import type { Clock } from "./clock.js";
import { markOpen, markResolved } from "./conditions.js";
import type { Liveness } from "./liveness.js";
import type { HubMetrics } from "./metrics.js";
import { reachedAgain } from "./reach.js";
import type { IntentStatus } from "./records.js";
import { redact } from "./redact.js";
import type { UnitOfWork } from "./store/store.js";
import { claimTask, releaseTask, resolveTask, TaskError } from "./tasks.js";
import type { TransportHealth } from "./transport.js";

/** Intents that a fresh report may settle even when no observation changed. */
export const REPORT_WAITERS: readonly IntentStatus[] = ["ambiguous", "verifying"];

export interface IngestOptions {
  clock: Clock;
  log: Logger;
  newId: () => string;
  metrics: HubMetrics;
  liveness: Liveness;
  /** When this hub started: conditions last observed before it were observed by an earlier run. */
  startedAt: () => string;
  /** A node was heard (recorded in `tx`): retries that waited for it to be reachable go now. */
  nodeAnswered: (node: string, tx: UnitOfWork) => Promise<void>;
  /** Queues instance keys for a reconcile now. */
  enqueue: (keys: Iterable<string>) => void;
  /** Reconciles a node's instances and its rollouts again (an operator or task agent acted, in `tx`). */
  lookAgainAt: (node: string, tx: UnitOfWork) => Promise<void>;
  /** Looks again at the rollouts of a revision (a paused rollout was answered, in `tx`). */
  lookAgainAtRevision: (sha: string, tx: UnitOfWork) => Promise<void>;
}

/** The handlers of transport events and task agents' answers (see the module comment). */
export class Ingest {
  /** Nodes that reported since this hub started. */
  private readonly seenNodes = new Set<string>();

  constructor(private readonly options: IngestOptions) {}

  private now(): string {
    return this.options.clock.now().toISOString();
  }

  /** A full report (over `transport`): the node's latest observation. It never changes a desired target. */
  async report(tx: UnitOfWork, report: Report, transport?: string): Promise<void> {
    const { liveness, log } = this.options;
    const received = this.now();
    const affected = await (async () => {
      const changed = await tx.observations.saveReport(report, received);
      if (!changed) return undefined;
      await liveness.heardFrom(tx, report.node, this.options.clock.now(), report.takenAt);
      // What a report can change: observations that differ from the last ones, and intents that wait
      // for a fresh report whatever it says (ambiguous attempts, applies waiting for confirmation,
      // observe-only comparisons). Everything else on the node would decide the same as before.
      const keys = new Set(changed);
      for (const key of await tx.intents.keysOfNode(report.node, REPORT_WAITERS)) keys.add(key);
      if (!this.seenNodes.has(report.node)) {
        // The first report since this hub started (registration): look at all of the node's instances.
        this.seenNodes.add(report.node);
        for (const key of await tx.desired.activeKeysOfNode(report.node)) keys.add(key);
        if (transport)
          await reachedAgain(
            tx,
            { name: report.node, transport, takenAt: report.takenAt, startedAt: this.options.startedAt() },
            this.now(),
          );
      }
      return keys;
    })();
    this.options.metrics.reportsTotal.inc();
    if (!affected) {
      log.debug({ node: report.node, takenAt: report.takenAt }, "report older than the stored one ignored");
      return;
    }
    await this.options.nodeAnswered(report.node, tx);
    this.options.enqueue(affected);
  }

  /** An attempt's outcome as the agent saw it; the next reconcile decides what it means. */
  async result(tx: UnitOfWork, result: AttemptResult): Promise<void> {
    const store = tx;
    const log = this.options.log.child({
      attemptId: result.attemptId,
      instance: `${result.assignment}@${result.node}`,
    });
    const attempt = await store.attempts.get(result.attemptId);
    if (!attempt) {
      log.warn("result for an attempt this hub does not know; ignored");
      return;
    }
    const updated = nextAttempt(attempt, { kind: "result", at: this.now(), result });
    if (attempt.status === "superseded") {
      if (updated) await store.attempts.save(updated);
      log.info(
        { outcome: result.outcome, supersededBy: attempt.supersededBy },
        "result for an attempt superseded by generation %s: kept as evidence",
        String(attempt.supersededBy ?? "?"),
      );
      return;
    }
    if (!updated) {
      log.debug({ status: attempt.status }, "result for an attempt already settled; ignored");
      return;
    }
    await store.attempts.save(updated);
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
    this.options.enqueue([attempt.instanceKey]);
  }

  /** The result of an attempt is lost (session dropped, agent died): ambiguous, never replayed blindly. */
  async lost(tx: UnitOfWork, attemptId: string, node: string, reason: string): Promise<void> {
    const store = tx;
    const attempt = await store.attempts.get(attemptId);
    const lost = attempt && nextAttempt(attempt, { kind: "lost", at: this.now(), reason });
    if (!attempt || !lost) return;
    await store.attempts.save(lost);
    await store.attempts.deleteOutbox([attemptId]);
    this.options.log.warn(
      { attemptId, instance: attempt.instanceKey, node },
      "attempt result lost: %s",
      redact(reason),
    );
    this.options.enqueue([attempt.instanceKey]);
  }

  /** A node said it is alive. */
  async heartbeat(tx: UnitOfWork, node: string, at: Date): Promise<void> {
    await this.options.liveness.heardFrom(tx, node, at);
    await this.options.nodeAnswered(node, tx);
  }

  /** A transport's word about itself or a node: `TransportDegraded` opens or resolves. */
  async health(tx: UnitOfWork, transport: string, event: TransportHealth): Promise<void> {
    const store = tx;
    const subjectKind = event.node ? "node" : "transport";
    const subject = event.node ?? transport;
    const now = this.now();
    // A node removed from Git (its credentials revoked, its agent cut off) is nothing steward owns now.
    if (event.status === "degraded" && event.node && (await store.nodes.get(event.node))?.removedAt) {
      this.options.log.info(
        { transport, node: event.node, reason: event.reason },
        "%s (node %s is no longer declared)",
        event.message,
        event.node,
      );
      return;
    }
    if (event.status === "degraded") {
      const { change } = await markOpen(
        store,
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
        this.options.newId,
      );
      if (change === "opened")
        this.options.log.warn({ transport, node: event.node, reason: event.reason }, event.message);
    } else
      await markResolved(
        store,
        "TransportDegraded",
        subjectKind,
        subject,
        now,
        `${transport}: ${event.message}`,
        event.reason,
      );
  }

  /**
   * A task agent's claim, resolution or decline from the bus, recorded exactly as `steward tasks
   * claim|resolve` does: the claimant, the resolver and the action taken. An event that does not
   * fit the task (already resolved, claimed by another) is logged and dropped.
   */
  async taskEvent(tx: UnitOfWork, event: TaskEvent): Promise<void> {
    const store = tx;
    const now = this.now();
    const log = this.options.log.child({ taskId: event.taskId, by: event.by, kind: event.kind });
    try {
      if (event.kind === "claimed") await claimTask(store, event.taskId, event.by, now);
      else if (event.kind === "declined")
        await releaseTask(store, event.taskId, event.by, event.note ?? "", now);
      else {
        const { condition } = await resolveTask(
          store,
          event.taskId,
          event.by,
          event.action ?? "",
          now,
          event.outcome,
        );
        // An action on a blocked or stuck instance earns it one more attempt now; a resumed rollout moves.
        if (condition.node) await this.options.lookAgainAt(condition.node, tx);
        if (condition.type === "RolloutPaused" && condition.revision)
          await this.options.lookAgainAtRevision(condition.revision, tx);
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
}
