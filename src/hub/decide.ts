/**
 * The outcome switch of a reconcile, as a pure function: given what should be (the instance's
 * current generation), what is (the node's latest observation) and the hub's durable records (the
 * intent and its last attempt), it returns what the intent becomes, whether to dispatch an attempt,
 * which conditions hold, and when to look again. Nothing here does I/O or reads a clock; the
 * reconciler gathers the input and writes the output in one transaction, and tests call it directly.
 *
 * The order of the checks is the policy:
 *  0. whatever else holds, a one-shot the node reports lost (started, gone, no exit status) is a
 *     question for a person, one per generation, until answered (OneShotInterrupted);
 *  1. retired → stop managing; 2. observed converged → done (observation wins over any record),
 *     with one attempt to carry answers the node has not had yet;
 *  3. an attempt in flight → wait for its result until its lease ends, then it is ambiguous;
 *  4. an ambiguous attempt → wait for a report taken after its dispatch, then compare again;
 *  5. count the finished attempt once: permanent → blocked, transient → backoff (then stuck),
 *     success without convergence → wait for probes, then count it as a failure; a generation
 *     blocked by an interrupted one-shot is blocked no longer once every such run is answered;
 *  6. gates for a new attempt: node known, transport enabled, observe-only, drain, dependsOn
 *     (waiting spends no budget), backoff, rollout (only for a first attempt); else dispatch.
 */
import type { FailureClass, ProbeReport, ResourceReport } from "../model/generated.js";
import { type AttemptEvent, nextAttempt } from "./attempts.js";
import { type BackoffPolicy, backoffDelay, budgetSpent } from "./backoff.js";
import type {
  AttemptRecord,
  ConditionType,
  DesiredInstance,
  HoldReason,
  IntentRecord,
  IntentStatus,
  NodeRecord,
  Observation,
} from "./records.js";
import type { RolloutGate } from "./rollout.js";

export interface Timing {
  /** How long an attempt may run before its result is presumed lost. */
  leaseMs: number;
  /** After a successful attempt, how long to wait for a report showing convergence (probes settling). */
  probeGraceMs: number;
  /** How long an ambiguous attempt waits for a fresh report before `Ambiguous` is raised (and asked again). */
  ambiguousTimeoutMs: number;
  backoff: BackoffPolicy;
}

export const DEFAULT_TIMING: Timing = {
  leaseMs: 10 * 60_000,
  probeGraceMs: 60_000,
  ambiguousTimeoutMs: 2 * 60_000,
  backoff: { initialMs: 1_000, maxMs: 5 * 60_000, jitter: 0.2 },
};

/** Another instance on the same node that this one `dependsOn`. */
export interface DependencyState {
  assignment: string;
  /** False when the assignment is not placed on this node at all. */
  placed: boolean;
  converged: boolean;
}

export interface DecideInput {
  now: number;
  desired: DesiredInstance;
  /** The intent for the current generation (a fresh `pending` one if it did not exist). */
  intent: IntentRecord;
  /** The intent's last attempt. */
  attempt?: AttemptRecord;
  observed?: Observation;
  /** When the node's latest full report was taken. */
  reportTakenAt?: number;
  node?: NodeRecord;
  transportEnabled: boolean;
  dependencies: DependencyState[];
  /** The one-shots the node reports lost (interruptedOneShots), when the caller read them already. */
  interrupted?: readonly InterruptedOneShot[];
  /** Runs of interrupted one-shots a person has answered (the decision goes with the next attempt). */
  answeredRuns?: ReadonlySet<string>;
  /**
   * The rollout's gate, for a first attempt. Reading it costs the rollout's counts, so the reconciler
   * reads it only when a decision without it says `needsRolloutGate`, and decides again.
   */
  rolloutGate?: RolloutGate;
  random: () => number;
  timing: Timing;
}

/** A condition that holds on the instance, as the reconciler should record it. */
export interface InstanceCondition {
  type: ConditionType;
  /** The generation it is about, when not the desired one (an earlier generation's lost one-shot). */
  generation?: number;
  reason: string;
  message: string;
  evidence?: Record<string, unknown>;
  attemptId?: string;
  procedure?: string;
}

export interface Decision {
  /** What the intent becomes (a copy; equal to the input when nothing changed). */
  intent: IntentRecord;
  /** The last attempt, when this decision changed it (lease expired, settled by a report). */
  attempt?: AttemptRecord;
  /** Create an attempt (with its outbox row) now. */
  dispatch: boolean;
  /** Ask the node for a fresh full report. */
  requestReport: boolean;
  /** Reconcile again at this time. */
  requeueAt?: number;
  /** Every instance condition that holds now; the others resolve with `resolution`. */
  conditions: InstanceCondition[];
  resolution: string;
  /** The branch taken, for logs and the reconcile metric. */
  outcome: string;
  /** A first attempt is otherwise ready: decide again with `rolloutGate` (nothing else of this decision holds). */
  needsRolloutGate?: boolean;
}

/** How an observation compares with the desired generation. */
export interface Comparison {
  converged: boolean;
  /** The node applied this generation (generation and hash match). */
  atGeneration: boolean;
  resourcesNotOk: ResourceReport[];
  probesFailing: ProbeReport[];
  /** What differs, in words. */
  summary: string;
}

/** Compares an instance's observation with its desired generation: converged only when all of it holds. */
export function compare(
  desired: DesiredInstance,
  observed: Observation | undefined,
  nodeReported = false,
): Comparison {
  if (!observed)
    return {
      converged: false,
      atGeneration: false,
      resourcesNotOk: [],
      probesFailing: [],
      summary: nodeReported ? `not applied on ${desired.node} yet` : `no report from ${desired.node} yet`,
    };
  const report = observed.report;
  const atGeneration =
    observed.generation === desired.generation &&
    observed.hash === desired.hash &&
    (report.observedGeneration === undefined || report.observedGeneration === desired.generation);
  const resourcesNotOk = report.resources.filter((r) => r.status !== "ok");
  const probesFailing = report.probes.filter((p) => !p.ok);
  const differences: string[] = [];
  if (!atGeneration)
    differences.push(`observed generation ${observed.generation}, desired ${desired.generation}`);
  if (observed.state !== desired.spec.state)
    differences.push(`state ${observed.state}, desired ${desired.spec.state}`);
  if (desired.spec.version !== undefined && observed.version !== desired.spec.version)
    differences.push(`version ${observed.version ?? "unknown"}, declared ${desired.spec.version}`);
  for (const r of resourcesNotOk.slice(0, 3))
    differences.push(`${r.kind} ${r.name} ${r.status}${r.reason ? ` (${r.reason})` : ""}`);
  if (resourcesNotOk.length > 3) differences.push(`${resourcesNotOk.length - 3} more resources not ok`);
  for (const p of probesFailing.slice(0, 3))
    differences.push(`probe ${p.name} failing${p.message ? `: ${p.message}` : ""}`);
  if (!observed.converged && differences.length === 0)
    differences.push("the node does not report it converged");
  const converged = differences.length === 0 && observed.converged;
  return {
    converged,
    atGeneration,
    resourcesNotOk,
    probesFailing,
    summary: converged ? `converged at generation ${desired.generation}` : differences.join("; "),
  };
}

const iso = (ms: number) => new Date(ms).toISOString();
const ms = (text: string | undefined) => (text === undefined ? undefined : Date.parse(text));

/** Reasons an agent gives for a failure that only a person can resolve. */
const JUDGEMENT_REASONS: Partial<Record<string, ConditionType>> = {
  DestructiveRepairNeeded: "DestructiveRepairNeeded",
  HumanProcedureRequired: "HumanProcedureRequired",
  // Something else is where a resource belongs (a directory where a file is declared): the only
  // repair would destroy it, and steward never picks that on its own.
  TypeConflict: "DestructiveRepairNeeded",
  OneShotInterrupted: "OneShotInterrupted",
};

/** One interrupted one-shot as a report shows it: what a person is asked about. */
export interface InterruptedOneShot {
  resource: string;
  /** The generation whose run it was. */
  generation: number;
  /** The attempt that started the run (a decision names it). */
  run?: string;
  startedAt?: string;
  message?: string;
  evidence?: string;
}

/**
 * The one-shot runs whose outcome the node reports lost: a resource `interrupted` at the desired
 * generation, and the runs of earlier generations a newer one replaced before anyone answered.
 */
export function interruptedOneShots(
  desired: DesiredInstance,
  observed: Observation | undefined,
): InterruptedOneShot[] {
  const report = observed?.report;
  if (!report) return [];
  const found: InterruptedOneShot[] = [];
  for (const lost of report.lostRuns ?? []) {
    const earlier: InterruptedOneShot = {
      resource: lost.resource,
      generation: lost.generation,
      run: lost.run,
    };
    if (lost.startedAt) earlier.startedAt = lost.startedAt;
    if (lost.evidence) earlier.evidence = lost.evidence;
    found.push(earlier);
  }
  if ((report.observedGeneration ?? report.generation) !== desired.generation) return found;
  for (const r of report.resources) {
    if (r.status !== "interrupted") continue;
    const run = (r.observed as { run?: { attemptId?: string; startedAt?: string } } | undefined)?.run;
    const current: InterruptedOneShot = { resource: r.name, generation: desired.generation };
    if (run?.attemptId) current.run = run.attemptId;
    if (run?.startedAt) current.startedAt = run.startedAt;
    if (r.message) current.message = r.message;
    if (r.evidence) current.evidence = r.evidence;
    found.push(current);
  }
  return found;
}

/** What a person is asked to do about interrupted one-shots. */
function oneShotProcedure(desired: DesiredInstance, names: readonly string[]): string {
  const what = names.map((name) => `\`${name}\``).join(", ");
  return `Find out whether ${what} of ${desired.assignment} took effect on ${desired.node} (the evidence has when it started and its output so far). Then answer the task (\`steward tasks\` lists it): \`steward tasks resolve TASK --outcome ran --action "what you checked"\` records it as done and nothing runs again; \`--outcome rerun\` runs it once more, by the ordinary path.`;
}

export function decide(input: DecideInput): Decision {
  const { desired, now, timing } = input;
  const intent: IntentRecord = { ...input.intent };
  let attempt = input.attempt;
  let attemptChanged = false;
  /** Moves the last attempt to its next state (attempts.ts), when the event applies to it. */
  const attemptEvent = (event: AttemptEvent) => {
    const next = attempt && nextAttempt(attempt, event);
    if (!next) return;
    attempt = next;
    attemptChanged = true;
  };
  const comparison = compare(desired, input.observed, input.reportTakenAt !== undefined);
  const conditions: InstanceCondition[] = [];
  let requestReport = false;

  const finish = (
    outcome: string,
    extra: { dispatch?: boolean; requeueAt?: number; resolution?: string } = {},
  ): Decision => {
    const decision: Decision = {
      intent,
      dispatch: extra.dispatch ?? false,
      requestReport,
      conditions,
      resolution: extra.resolution ?? comparison.summary,
      outcome,
    };
    if (attemptChanged && attempt) decision.attempt = attempt;
    if (extra.requeueAt !== undefined) decision.requeueAt = extra.requeueAt;
    return decision;
  };
  const setStatus = (status: IntentStatus, holdReason?: HoldReason) => {
    intent.status = status;
    if (holdReason) intent.holdReason = holdReason;
    else delete intent.holdReason;
  };
  const setMessage = (message: string | undefined) => {
    if (message) intent.message = message;
    else delete intent.message;
  };

  // 1. Retired: no longer managed; nothing is deleted.
  if (desired.retiredAt) {
    setStatus("retired");
    delete intent.deadlineAt;
    delete intent.nextAttemptAt;
    attemptEvent({ kind: "retired" });
    return finish("retired", {
      resolution: "the instance was removed from the fleet repo; no longer managed",
    });
  }

  // What only a person can answer holds whatever else happens: a one-shot whose outcome is lost,
  // one question per generation, until a person answers it.
  const reported = input.interrupted ?? interruptedOneShots(desired, input.observed);
  const answered = (oneShot: InterruptedOneShot) =>
    oneShot.run !== undefined && (input.answeredRuns?.has(oneShot.run) ?? false);
  const generations = new Map<number, InterruptedOneShot[]>();
  for (const oneShot of reported)
    if (!answered(oneShot))
      generations.set(oneShot.generation, [...(generations.get(oneShot.generation) ?? []), oneShot]);
  for (const [generation, oneShots] of generations) conditions.push(oneShotCondition(generation, oneShots));
  const interruptedNow = reported.filter((oneShot) => oneShot.generation === desired.generation);

  // 2. Observation wins: converged is converged, whatever the records say.
  if (comparison.converged) {
    if (attempt?.status === "ambiguous" && input.reportTakenAt !== undefined) settleByReport();
    if (intent.status !== "converged") intent.convergedAt = iso(now);
    setStatus("converged");
    intent.outcome = "converged";
    intent.everConverged = true;
    intent.failures = 0;
    for (const field of ["firstFailureAt", "nextAttemptAt", "deadlineAt", "failureClass", "reason"] as const)
      delete intent[field];
    setMessage(undefined);
    const inFlight = attempt?.status === "dispatched" || attempt?.status === "queued";
    if (attempt && !inFlight) intent.accountedAttemptId = attempt.id;
    // Converged, but the node still asks about an earlier generation's run someone has answered:
    // only an attempt carries the answer to it (and nothing else is changed by it).
    if (!inFlight && reported.some(answered)) return finish("deliver-answers", { dispatch: true });
    return finish("converged");
  }

  const budget = desired.budget;
  const spent = () => budgetSpent(intent.failures, ms(intent.firstFailureAt), now, budget);

  // 3. An attempt in flight: its result is due before its lease ends.
  if (attempt && (attempt.status === "queued" || attempt.status === "dispatched")) {
    if (attempt.status === "queued") {
      setStatus("dispatched");
      addStuck(spent());
      return finish("queued");
    }
    const lease = ms(attempt.leaseExpiresAt) ?? now;
    if (now < lease) {
      setStatus("dispatched");
      intent.deadlineAt = iso(lease);
      addStuck(spent());
      return finish("in-flight", { requeueAt: lease });
    }
    attemptEvent({ kind: "lease-expired", at: iso(now), leaseEndedAt: iso(lease), leaseMs: timing.leaseMs });
    intent.deadlineAt = iso(now + timing.ambiguousTimeoutMs);
  }

  // 4. An ambiguous attempt: never replayed blindly; only a report taken after its dispatch settles it.
  if (attempt?.status === "ambiguous") {
    const settleAfter = ms(attempt.settleAfter ?? attempt.dispatchedAt ?? attempt.createdAt)!;
    if (input.reportTakenAt !== undefined && input.reportTakenAt > settleAfter) settleByReport();
    else {
      setStatus("ambiguous");
      intent.outcome = "ambiguous";
      setMessage(
        `result of attempt ${attempt.id} lost (${attempt.reason ?? "lost"}); waiting for a fresh report`,
      );
      // Entering ambiguity starts its own wait (the lease's deadline is over).
      const entering = input.intent.status !== "ambiguous";
      const deadline = entering ? now + timing.ambiguousTimeoutMs : (ms(intent.deadlineAt) ?? now);
      intent.deadlineAt = iso(deadline);
      requestReport = entering || now >= deadline;
      if (now >= deadline) {
        conditions.push({
          type: "Ambiguous",
          reason: attempt.reason ?? "ResultLost",
          message: `attempt ${attempt.id} to generation ${desired.generation}: result lost and no report taken after its dispatch has arrived`,
          attemptId: attempt.id,
          evidence: {
            dispatchedAt: attempt.dispatchedAt,
            lastReportTakenAt: input.reportTakenAt && iso(input.reportTakenAt),
          },
        });
        intent.deadlineAt = iso(now + timing.ambiguousTimeoutMs);
      }
      addStuck(spent());
      return finish("ambiguous", { requeueAt: ms(intent.deadlineAt)! });
    }
  }

  // 5. Count the finished attempt, once.
  if (attempt && attempt.id !== intent.accountedAttemptId) {
    if (attempt.status === "failed") {
      intent.accountedAttemptId = attempt.id;
      const failureClass: FailureClass = attempt.failureClass ?? "transient";
      intent.failureClass = failureClass === "permanent" ? "permanent" : "transient";
      intent.reason = attempt.reason ?? "AttemptFailed";
      setMessage(attempt.message ?? `attempt ${attempt.id} failed`);
      if (failureClass === "permanent") {
        setStatus("blocked");
        intent.outcome = "blocked";
        delete intent.nextAttemptAt;
        delete intent.deadlineAt;
      } else countFailure();
    } else if (attempt.status === "lost") {
      intent.accountedAttemptId = attempt.id;
      intent.failureClass = "transient";
      intent.reason = "ResultLost";
      setMessage(`attempt ${attempt.id}: result lost; a fresh report shows ${comparison.summary}`);
      countFailure(true);
    } else if (attempt.status === "succeeded") {
      const finished = ms(attempt.finishedAt) ?? now;
      // The wait runs on the hub's clock from when it read the result (the report is right behind
      // it): neither a backlog before the result was read nor the agent's clock shortens it.
      const graceEnds = Math.max(finished, ms(attempt.recordedAt) ?? finished) + timing.probeGraceMs;
      // The report's time and the finish are both the agent's clock.
      const reportSinceFinish = input.reportTakenAt !== undefined && input.reportTakenAt >= finished;
      const probesOnly = comparison.atGeneration && comparison.resourcesNotOk.length === 0;
      if (now < graceEnds && (!reportSinceFinish || probesOnly)) {
        setStatus("verifying");
        intent.deadlineAt = iso(graceEnds);
        setMessage(`applied; waiting for convergence: ${comparison.summary}`);
        addStuck(spent());
        return finish("verifying", { requeueAt: graceEnds });
      }
      intent.accountedAttemptId = attempt.id;
      intent.failureClass = "transient";
      intent.reason =
        probesOnly && comparison.probesFailing.length > 0 ? "ProbeFailing" : "NotConvergedAfterApply";
      setMessage(`attempt ${attempt.id} succeeded but the node reports: ${comparison.summary}`);
      countFailure();
    }
  }

  // A permanent failure holds for the whole generation; only a new generation (or observation) ends it.
  if (intent.status === "blocked" && intent.reason !== "DependencyNotPlaced") {
    const type = JUDGEMENT_REASONS[intent.reason ?? ""] ?? "Blocked";
    if (type === "OneShotInterrupted" && interruptedNow.length > 0 && interruptedNow.every(answered)) {
      // Answered (the decision goes with the next attempt): blocked no longer.
      setStatus("pending");
      delete intent.failureClass;
    } else if (type === "OneShotInterrupted") {
      // The report names the runs a person is asked about; until one comes, the attempt's word is
      // all there is (and a report is asked for).
      if (interruptedNow.length === 0) {
        const failed = (attempt?.evidence ?? []) as {
          name: string;
          reason?: string;
          message?: string;
          evidence?: string;
        }[];
        const fromAttempt = failed
          .filter((r) => r.reason === "OneShotInterrupted")
          .map((r) => ({
            resource: r.name,
            generation: desired.generation,
            ...(r.message ? { message: r.message } : {}),
            ...(r.evidence ? { evidence: r.evidence } : {}),
          }));
        conditions.push(
          oneShotCondition(
            desired.generation,
            fromAttempt.length > 0 ? fromAttempt : [{ resource: "?", generation: desired.generation }],
          ),
        );
        requestReport = true;
      }
      return finish("blocked");
    } else {
      const failed: InstanceCondition = {
        type,
        reason: intent.reason ?? "PermanentFailure",
        message: `generation ${desired.generation}: ${intent.message ?? "permanent failure"}`,
        evidence: {
          failureClass: "permanent",
          ...(attempt?.evidence ? { resources: attempt.evidence } : {}),
        },
      };
      if (intent.lastAttemptId) failed.attemptId = intent.lastAttemptId;
      conditions.push(failed);
      return finish("blocked");
    }
  }

  addProbeFailing();
  const stuck = spent();
  addStuck(stuck);

  // 6. Gates for a new attempt.
  const hold = (reason: HoldReason, message: string, requeueAt?: number) => {
    setStatus("held", reason);
    setMessage(message);
    return finish(`held:${reason}`, requeueAt === undefined ? {} : { requeueAt });
  };
  const node = input.node;
  if (!node || node.removedAt) return hold("node-unknown", `node ${desired.node} is not declared`);
  if (!input.transportEnabled)
    return hold("transport-disabled", `transport ${node.transport} is not enabled in this hub`);
  if (desired.rollout.stage === "observe") return hold("observe", `observe-only: ${comparison.summary}`);
  if (node.draining) return hold("draining", `node ${node.name} is draining`);
  const unplaced = input.dependencies.filter((d) => !d.placed).map((d) => d.assignment);
  if (unplaced.length > 0) {
    setStatus("blocked");
    intent.outcome = "blocked";
    intent.failureClass = "permanent";
    intent.reason = "DependencyNotPlaced";
    setMessage(`dependsOn ${unplaced.join(", ")}, which is not placed on node ${desired.node}`);
    conditions.length = 0;
    conditions.push({
      type: "Blocked",
      reason: "DependencyNotPlaced",
      message: `generation ${desired.generation}: ${intent.message}`,
      evidence: { dependsOn: unplaced },
    });
    return finish("blocked");
  }
  const pending = input.dependencies.filter((d) => !d.converged).map((d) => d.assignment);
  if (pending.length > 0) {
    setStatus("waiting");
    setMessage(`waiting for ${pending.join(", ")} on ${desired.node} to converge`);
    return finish("waiting");
  }
  const due = ms(intent.nextAttemptAt);
  if (due !== undefined && now < due) {
    setStatus(stuck ? "stuck" : "backoff");
    return finish(stuck ? "stuck" : "backoff", { requeueAt: due });
  }
  if (!intent.lastAttemptId) {
    const gate = input.rolloutGate;
    if (!gate) return { ...finish("rollout-gate"), needsRolloutGate: true };
    if (!gate.go) return hold(gate.hold, gate.message, gate.requeueAt);
  }
  setStatus("dispatched");
  delete intent.nextAttemptAt;
  return finish("dispatch", { dispatch: true });

  function settleByReport() {
    const lastAttempt = input.observed?.report.lastAttempt;
    attemptEvent({ kind: "report", at: iso(now), ...(lastAttempt ? { lastAttempt } : {}) });
    delete intent.deadlineAt;
  }

  function oneShotCondition(generation: number, oneShots: InterruptedOneShot[]): InstanceCondition {
    const names = oneShots.map((o) => o.resource);
    const condition: InstanceCondition = {
      type: "OneShotInterrupted",
      reason: "OneShotInterrupted",
      message: `generation ${generation}: ${names.join(", ")} started${oneShots[0]?.startedAt ? ` at ${oneShots[0].startedAt}` : ""} and left no outcome (the process is gone without an exit status): whether it took effect is unknown, and it is not run again until a person decides`,
      evidence: { oneShots },
      procedure: oneShotProcedure(desired, names),
      generation,
    };
    const attemptId = oneShots[0]?.run ?? intent.lastAttemptId;
    if (attemptId) condition.attemptId = attemptId;
    return condition;
  }

  function countFailure(immediate = false) {
    intent.failures += 1;
    intent.firstFailureAt ??= iso(now);
    const isSpent = budgetSpent(intent.failures, ms(intent.firstFailureAt), now, budget);
    const delay =
      immediate && !isSpent ? 0 : backoffDelay(intent.failures, timing.backoff, input.random, isSpent);
    intent.nextAttemptAt = iso(now + delay);
    intent.outcome = isSpent ? "stuck" : "failed";
    setStatus(isSpent ? "stuck" : "backoff");
    delete intent.deadlineAt;
  }

  function addStuck(isSpent: boolean) {
    if (!isSpent) return;
    const type: ConditionType = intent.everConverged ? "DriftUnhealed" : "Stuck";
    const condition: InstanceCondition = {
      type,
      reason: intent.reason ?? "BudgetSpent",
      message: `generation ${desired.generation}: ${intent.failures} failures since ${intent.firstFailureAt ?? "?"} (budget ${budget.attempts} attempts within ${Math.round(budget.withinMs / 1000)}s); retrying every ${Math.round(timing.backoff.maxMs / 1000)}s. Last: ${intent.message ?? comparison.summary}`,
      evidence: {
        failures: intent.failures,
        firstFailureAt: intent.firstFailureAt,
        observed: comparison.summary,
      },
    };
    if (intent.lastAttemptId) condition.attemptId = intent.lastAttemptId;
    conditions.push(condition);
  }

  function addProbeFailing() {
    if (
      !comparison.atGeneration ||
      comparison.resourcesNotOk.length > 0 ||
      comparison.probesFailing.length === 0
    )
      return;
    conditions.push({
      type: "ProbeFailing",
      reason: "ProbeFailing",
      message: `generation ${desired.generation} applied but ${comparison.probesFailing.map((p) => p.name).join(", ")} failing`,
      evidence: {
        probes: comparison.probesFailing.map((p) => ({
          name: p.name,
          kind: p.kind,
          message: p.message,
          at: p.at,
        })),
      },
    });
  }
}
