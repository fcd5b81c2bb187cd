import { describe, expect, it } from "vitest";
import { compare, type DecideInput, type Decision, decide, type Timing } from "../../src/hub/decide.js";
import type {
  AttemptRecord,
  DesiredInstance,
  IntentRecord,
  NodeRecord,
  Observation,
} from "../../src/hub/records.js";
import type { RolloutGate } from "../../src/hub/rollout.js";
import type { InstanceReport } from "../../src/model/generated.js";

const T0 = Date.parse("2026-03-01T10:00:00.000Z");
const iso = (ms: number) => new Date(ms).toISOString();
const timing: Timing = {
  leaseMs: 60_000,
  probeGraceMs: 30_000,
  ambiguousTimeoutMs: 120_000,
  backoff: { initialMs: 1_000, maxMs: 300_000, jitter: 0 },
};

const desired: DesiredInstance = {
  key: "web@n1",
  assignment: "web",
  node: "n1",
  generation: 3,
  hash: "sha256:g3",
  revision: "r3",
  spec: {
    assignment: "web",
    node: "n1",
    state: "running",
    version: "1.2",
    dependsOn: [],
    roots: ["/srv"],
    resources: [],
    probes: [],
  },
  rollout: { stage: "apply" },
  budget: { attempts: 3, withinMs: 3_600_000 },
};

const intent: IntentRecord = {
  instanceKey: "web@n1",
  generation: 3,
  assignment: "web",
  node: "n1",
  revision: "r3",
  hash: "sha256:g3",
  state: "running",
  version: "1.2",
  status: "pending",
  failures: 0,
  everConverged: false,
  createdAt: iso(T0),
  updatedAt: iso(T0),
};

const node: NodeRecord = {
  name: "n1",
  transport: "local",
  spec: {
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: { name: "n1" },
    spec: { transport: "local", roots: ["/srv"] },
  },
  draining: false,
};

function attempt(over: Partial<AttemptRecord>): AttemptRecord {
  return {
    id: "A1",
    instanceKey: "web@n1",
    generation: 3,
    assignment: "web",
    node: "n1",
    status: "dispatched",
    createdAt: iso(T0),
    dispatchedAt: iso(T0),
    leaseExpiresAt: iso(T0 + timing.leaseMs),
    ...over,
  };
}

function observed(over: Partial<InstanceReport> = {}, takenAt = T0): Observation {
  const report: InstanceReport = {
    assignment: "web",
    generation: 3,
    hash: "sha256:g3",
    state: "running",
    version: "1.2",
    converged: true,
    resources: [
      { name: "conf", kind: "file", status: "ok", counters: { consecutiveFailures: 0, everApplied: true } },
    ],
    probes: [],
    ...over,
  };
  const observation: Observation = {
    instanceKey: "web@n1",
    node: "n1",
    assignment: "web",
    generation: report.generation,
    state: report.state,
    converged: report.converged,
    takenAt: iso(takenAt),
    report,
  };
  if (report.hash) observation.hash = report.hash;
  if (report.version) observation.version = report.version;
  return observation;
}

const go: RolloutGate = { go: true };

function run(over: Partial<DecideInput> & { now?: number }): Decision {
  return decide({
    now: T0,
    desired,
    intent,
    node,
    transportEnabled: true,
    dependencies: [],
    rolloutGate: go,
    random: () => 0.5,
    timing,
    ...over,
  });
}

const types = (d: Decision) => d.conditions.map((c) => c.type);

describe("hub - decide", () => {
  it("hub - converged only when generation, hash, state, version, resources and probes all match", () => {
    expect(compare(desired, observed()).converged).toBe(true);
    const cases: [string, Observation][] = [
      ["older generation", observed({ generation: 2 })],
      ["other hash", observed({ hash: "sha256:other" })],
      ["stopped", observed({ state: "stopped" })],
      ["old version", observed({ version: "1.1" })],
      ["failing probe", observed({ probes: [{ name: "http", kind: "http", ok: false, at: iso(T0) }] })],
      [
        "drifted resource",
        observed({
          converged: false,
          resources: [
            {
              name: "conf",
              kind: "file",
              status: "drifted",
              counters: { consecutiveFailures: 0, everApplied: true },
            },
          ],
        }),
      ],
      ["node says not converged", observed({ converged: false })],
    ];
    for (const [label, observation] of cases)
      expect([label, compare(desired, observation).converged]).toEqual([label, false]);
    expect(compare(desired, observed({ version: "1.1" })).summary).toBe("version 1.1, declared 1.2");
  });

  it("hub - a converged observation wins over any record and resets the counters", () => {
    const d = run({
      intent: {
        ...intent,
        status: "stuck",
        failures: 5,
        firstFailureAt: iso(T0 - 1000),
        lastAttemptId: "A1",
      },
      attempt: attempt({ status: "failed", failureClass: "transient" }),
      observed: observed(),
    });
    expect(d.outcome).toBe("converged");
    expect(d.intent).toMatchObject({
      status: "converged",
      failures: 0,
      everConverged: true,
      accountedAttemptId: "A1",
    });
    expect(d.intent.firstFailureAt).toBeUndefined();
    expect(d.conditions).toEqual([]);
    expect(d.dispatch).toBe(false);
  });

  it("hub - dispatches a first attempt when every gate is open", () => {
    const d = run({ observed: observed({ generation: 2, hash: "sha256:g2" }) });
    expect(d).toMatchObject({ outcome: "dispatch", dispatch: true, intent: { status: "dispatched" } });
  });

  it("hub - a first attempt otherwise ready asks for the rollout's gate, and a retry never does", () => {
    const first = run({ rolloutGate: undefined });
    expect(first).toMatchObject({ needsRolloutGate: true, dispatch: false });
    const retry = run({
      rolloutGate: undefined,
      intent: { ...intent, status: "backoff", lastAttemptId: "A1", accountedAttemptId: "A1", failures: 1 },
      attempt: attempt({ status: "failed", failureClass: "transient" }),
    });
    expect(retry.needsRolloutGate).toBeUndefined();
    expect(retry.dispatch).toBe(true);
  });

  it("hub - an attempt in flight waits for its lease; an expired lease makes it ambiguous and asks for a report", () => {
    const inFlight = {
      intent: { ...intent, status: "dispatched" as const, lastAttemptId: "A1" },
      attempt: attempt({}),
    };
    const waiting = run({ ...inFlight, now: T0 + 59_999 });
    expect(waiting).toMatchObject({
      outcome: "in-flight",
      dispatch: false,
      requeueAt: T0 + 60_000,
      requestReport: false,
    });
    const expired = run({ ...inFlight, now: T0 + 60_000 });
    expect(expired.attempt).toMatchObject({
      status: "ambiguous",
      reason: "LeaseExpired",
      settleAfter: iso(T0 + 60_000),
    });
    // A report taken while the attempt may still have been running (before its lease ended) proves nothing.
    const early = run({
      ...inFlight,
      now: T0 + 61_000,
      reportTakenAt: T0 + 30_000,
      intent: { ...expired.intent },
      attempt: expired.attempt!,
    });
    expect(early).toMatchObject({ outcome: "ambiguous", dispatch: false });
    const after = run({
      ...inFlight,
      now: T0 + 61_000,
      reportTakenAt: T0 + 60_500,
      intent: { ...expired.intent },
      attempt: expired.attempt!,
    });
    expect(after.attempt).toMatchObject({ status: "lost", settledBy: "report" });
    expect(expired).toMatchObject({
      outcome: "ambiguous",
      dispatch: false,
      requestReport: true,
      requeueAt: T0 + 60_000 + 120_000,
      intent: { status: "ambiguous" },
    });
    expect(expired.conditions).toEqual([]);
  });

  it("hub - an ambiguous attempt is never replayed: Ambiguous after the timeout, settled only by a report taken after its dispatch", () => {
    const base = {
      intent: { ...intent, status: "ambiguous" as const, lastAttemptId: "A1", deadlineAt: iso(T0 + 120_000) },
      attempt: attempt({ status: "ambiguous", reason: "ResultLost" }),
      observed: observed({ generation: 2, hash: "sha256:g2" }),
    };
    const early = run({ ...base, now: T0 + 1_000, reportTakenAt: T0 });
    expect(early).toMatchObject({ outcome: "ambiguous", dispatch: false, requestReport: false });
    const late = run({ ...base, now: T0 + 120_000, reportTakenAt: T0 });
    expect(late).toMatchObject({ outcome: "ambiguous", dispatch: false, requestReport: true });
    expect(late.conditions).toMatchObject([{ type: "Ambiguous", reason: "ResultLost", attemptId: "A1" }]);

    // A fresh report that knows the attempt: its outcome is the attempt's.
    const known = run({
      ...base,
      now: T0 + 5_000,
      reportTakenAt: T0 + 4_000,
      observed: observed(
        { lastAttempt: { attemptId: "A1", outcome: "succeeded", at: iso(T0 + 2_000) } },
        T0 + 4_000,
      ),
    });
    expect(known.attempt).toMatchObject({ status: "succeeded", settledBy: "report" });
    expect(known.outcome).toBe("converged");
    // A fresh report that does not know it: the attempt is lost; compare again and try anew at once.
    const unknown = run({ ...base, now: T0 + 5_000, reportTakenAt: T0 + 4_000 });
    expect(unknown.attempt).toMatchObject({ status: "lost", settledBy: "report" });
    expect(unknown).toMatchObject({
      outcome: "dispatch",
      dispatch: true,
      intent: { failures: 1, reason: "ResultLost" },
    });
  });

  it("hub - transient failures back off exponentially, then Stuck keeps retrying at the slowest cadence", () => {
    const failed = (id: string, failures: number) =>
      run({
        intent: {
          ...intent,
          status: "dispatched",
          lastAttemptId: id,
          failures,
          ...(failures ? { firstFailureAt: iso(T0) } : {}),
        },
        attempt: attempt({ id, status: "failed", failureClass: "transient", reason: "RegistryUnreachable" }),
      });
    const first = failed("A1", 0);
    expect(first).toMatchObject({ outcome: "backoff", dispatch: false, requeueAt: T0 + 1_000 });
    expect(first.intent).toMatchObject({
      status: "backoff",
      failures: 1,
      failureClass: "transient",
      nextAttemptAt: iso(T0 + 1_000),
    });
    expect(failed("A2", 1).intent.nextAttemptAt).toBe(iso(T0 + 2_000));
    const third = failed("A3", 2);
    expect(third.intent).toMatchObject({ status: "stuck", failures: 3, nextAttemptAt: iso(T0 + 300_000) });
    expect(third.conditions).toMatchObject([
      { type: "Stuck", reason: "RegistryUnreachable", attemptId: "A3" },
    ]);
    // Re-running decide on the same records counts nothing twice.
    const again = run({
      intent: third.intent,
      attempt: attempt({ id: "A3", status: "failed", failureClass: "transient" }),
    });
    expect(again.intent.failures).toBe(3);
    // The time budget alone also spends it.
    const slow = run({
      now: T0 + 3_600_000,
      intent: { ...intent, status: "dispatched", lastAttemptId: "A2", failures: 1, firstFailureAt: iso(T0) },
      attempt: attempt({ id: "A2", status: "failed", failureClass: "transient" }),
    });
    expect(slow.intent.status).toBe("stuck");
  });

  it("hub - a permanent failure blocks the generation for good", () => {
    const blocked = run({
      intent: { ...intent, status: "dispatched", lastAttemptId: "A1" },
      attempt: attempt({
        status: "failed",
        failureClass: "permanent",
        reason: "ImageNotFound",
        message: "no such digest",
      }),
    });
    expect(blocked).toMatchObject({
      outcome: "blocked",
      dispatch: false,
      intent: { status: "blocked", failures: 0 },
    });
    expect(blocked.conditions).toMatchObject([{ type: "Blocked", reason: "ImageNotFound", attemptId: "A1" }]);
    expect(blocked.requeueAt).toBeUndefined();
    const later = run({
      now: T0 + 86_400_000,
      intent: blocked.intent,
      attempt: attempt({ status: "failed", failureClass: "permanent" }),
    });
    expect(later).toMatchObject({ outcome: "blocked", dispatch: false });
    const destructive = run({
      intent: { ...intent, status: "dispatched", lastAttemptId: "A1" },
      attempt: attempt({ status: "failed", failureClass: "permanent", reason: "DestructiveRepairNeeded" }),
    });
    expect(types(destructive)).toEqual(["DestructiveRepairNeeded"]);
  });

  it("hub - a successful apply waits for probes within the grace, then counts as a failure with ProbeFailing", () => {
    const failing = observed(
      { probes: [{ name: "http", kind: "http", ok: false, message: "503", at: iso(T0) }] },
      T0,
    );
    const base = {
      intent: { ...intent, status: "dispatched" as const, lastAttemptId: "A1" },
      attempt: attempt({ status: "succeeded", finishedAt: iso(T0) }),
      observed: failing,
      reportTakenAt: T0,
    };
    expect(run({ ...base, now: T0 + 10_000 })).toMatchObject({
      outcome: "verifying",
      requeueAt: T0 + 30_000,
      conditions: [],
    });
    const after = run({ ...base, now: T0 + 30_000 });
    expect(after.intent).toMatchObject({ status: "backoff", failures: 1, reason: "ProbeFailing" });
    expect(types(after)).toEqual(["ProbeFailing"]);
  });

  it("hub - the wait for the confirming report starts when the hub read the result, not when the agent finished", () => {
    // The agent finished at T0; a busy hub (or an agent's clock behind the hub's) read the result
    // 70 s later, and the report right behind it is not read yet.
    const base = {
      intent: { ...intent, status: "dispatched" as const, lastAttemptId: "A1" },
      attempt: attempt({ status: "succeeded", finishedAt: iso(T0), recordedAt: iso(T0 + 70_000) }),
      observed: observed({ generation: 2, hash: "sha256:g2" }, T0 - 5_000),
      reportTakenAt: T0 - 5_000,
    };
    const read = run({ ...base, now: T0 + 70_010 });
    expect(read).toMatchObject({ outcome: "verifying", dispatch: false, requeueAt: T0 + 100_000 });
    expect(read.intent.failures).toBe(0);
    // Still no report once that wait is over: the apply did not take.
    const over = run({ ...base, now: T0 + 100_000 });
    expect(over.intent).toMatchObject({ status: "backoff", failures: 1, reason: "NotConvergedAfterApply" });
  });

  it("hub - gates: unknown node, transport not enabled, observe-only, draining, dependsOn, rollout; waiting spends no budget", () => {
    const diverged = { observed: observed({ generation: 2, hash: "sha256:g2" }) };
    expect(run({ ...diverged, node: undefined }).intent).toMatchObject({
      status: "held",
      holdReason: "node-unknown",
    });
    expect(run({ ...diverged, transportEnabled: false }).intent).toMatchObject({
      holdReason: "transport-disabled",
    });
    const observe = run({ ...diverged, desired: { ...desired, rollout: { stage: "observe" } } });
    expect(observe).toMatchObject({ dispatch: false, intent: { status: "held", holdReason: "observe" } });
    expect(observe.intent.message).toBe("observe-only: observed generation 2, desired 3");
    expect(run({ ...diverged, node: { ...node, draining: true } }).intent).toMatchObject({
      holdReason: "draining",
    });
    const waiting = run({
      ...diverged,
      dependencies: [{ assignment: "base", placed: true, converged: false }],
    });
    expect(waiting).toMatchObject({
      dispatch: false,
      intent: { status: "waiting", failures: 0 },
      conditions: [],
    });
    const unplaced = run({
      ...diverged,
      dependencies: [{ assignment: "db", placed: false, converged: false }],
    });
    expect(unplaced).toMatchObject({ outcome: "blocked", intent: { reason: "DependencyNotPlaced" } });
    const canary = run({
      ...diverged,
      rolloutGate: { go: false, hold: "canary", message: "soaking", requeueAt: T0 + 5 },
    });
    expect(canary).toMatchObject({
      dispatch: false,
      requeueAt: T0 + 5,
      intent: { status: "held", holdReason: "canary" },
    });
    // A retry is already part of the rollout: the gate does not hold it.
    const retry = run({
      ...diverged,
      intent: {
        ...intent,
        status: "backoff",
        lastAttemptId: "A1",
        accountedAttemptId: "A1",
        failures: 1,
        firstFailureAt: iso(T0),
        nextAttemptAt: iso(T0),
      },
      attempt: attempt({ status: "failed", failureClass: "transient" }),
      rolloutGate: { go: false, hold: "paused", message: "paused" },
    });
    expect(retry.dispatch).toBe(true);
  });

  it("hub - drift after convergence is repaired by the same path; a spent budget then is DriftUnhealed", () => {
    const drifted = observed({
      converged: false,
      resources: [
        {
          name: "conf",
          kind: "file",
          status: "drifted",
          counters: { consecutiveFailures: 0, everApplied: true },
        },
      ],
    });
    const repair = run({
      intent: {
        ...intent,
        status: "converged",
        everConverged: true,
        lastAttemptId: "A1",
        accountedAttemptId: "A1",
      },
      attempt: attempt({ status: "succeeded" }),
      observed: drifted,
    });
    expect(repair).toMatchObject({ dispatch: true, outcome: "dispatch" });
    const unhealed = run({
      intent: {
        ...intent,
        status: "dispatched",
        everConverged: true,
        lastAttemptId: "A3",
        failures: 2,
        firstFailureAt: iso(T0),
      },
      attempt: attempt({ id: "A3", status: "failed", failureClass: "transient" }),
      observed: drifted,
    });
    expect(types(unhealed)).toEqual(["DriftUnhealed"]);
  });

  it("hub - a retired instance is no longer managed and its queued attempt never leaves", () => {
    const d = run({
      desired: { ...desired, retiredAt: iso(T0) },
      intent: { ...intent, status: "dispatched", lastAttemptId: "A1" },
      attempt: attempt({ status: "queued" }),
    });
    expect(d).toMatchObject({
      outcome: "retired",
      dispatch: false,
      intent: { status: "retired" },
      attempt: { status: "cancelled" },
    });
  });

  it("hub - a one-shot whose outcome is lost is a question per generation until answered; the answer unblocks", () => {
    const interruptedResource = {
      name: "migrate",
      kind: "command",
      status: "interrupted" as const,
      reason: "OneShotInterrupted",
      observed: { run: { attemptId: "A2", startedAt: iso(T0), generation: 3, state: "lost" } },
      counters: { consecutiveFailures: 1, everApplied: false },
    };
    const report = observed({
      converged: false,
      generation: 2,
      observedGeneration: 3,
      resources: [interruptedResource],
      lostRuns: [{ resource: "migrate", generation: 2, run: "A1", startedAt: iso(T0 - 60_000) }],
    });
    const blocked = {
      ...intent,
      status: "blocked" as const,
      reason: "OneShotInterrupted",
      lastAttemptId: "A2",
      accountedAttemptId: "A2",
    };
    const failed = attempt({
      id: "A2",
      status: "failed",
      failureClass: "permanent",
      reason: "OneShotInterrupted",
    });
    const asked = run({ intent: blocked, attempt: failed, observed: report });
    expect(asked.dispatch).toBe(false);
    expect(
      asked.conditions.map((c) => [
        c.type,
        c.generation,
        (c.evidence!.oneShots as { run: string }[])[0]!.run,
      ]),
    ).toEqual([
      ["OneShotInterrupted", 2, "A1"],
      ["OneShotInterrupted", 3, "A2"],
    ]);
    // Answering the older question leaves this generation's open and blocked.
    const older = run({ intent: blocked, attempt: failed, observed: report, answeredRuns: new Set(["A1"]) });
    expect(older.conditions.map((c) => c.generation)).toEqual([3]);
    expect(older.intent.status).toBe("blocked");
    // Answering this generation's: no question left, and the next attempt (carrying the answer) goes.
    const both = run({
      intent: blocked,
      attempt: failed,
      observed: report,
      answeredRuns: new Set(["A1", "A2"]),
    });
    expect(both.conditions).toEqual([]);
    expect(both).toMatchObject({ dispatch: true, intent: { status: "dispatched" } });
  });
});
