import { describe, expect, it } from "vitest";
import { type AttemptEvent, newAttempt, nextAttempt } from "../../src/hub/attempts.js";
import type { AttemptRecord, AttemptStatus } from "../../src/hub/records.js";
import type { AttemptResult } from "../../src/model/generated.js";

const T0 = "2025-01-01T00:00:00.000Z";
const T1 = "2025-01-01T00:01:00.000Z";
const T2 = "2025-01-01T00:02:00.000Z";

function attempt(status: AttemptStatus, extra: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    ...newAttempt({ id: "A1", instanceKey: "web@n1", generation: 2, assignment: "web", node: "n1", at: T0 }),
    status,
    ...extra,
  };
}

function result(outcome: "succeeded" | "failed", extra: Partial<AttemptResult> = {}): AttemptResult {
  return {
    attemptId: "A1",
    node: "n1",
    assignment: "web",
    generation: 2,
    outcome,
    resources: [],
    startedAt: T0,
    finishedAt: T1,
    ...extra,
  };
}

const events: Record<string, AttemptEvent> = {
  handedOver: { kind: "handed-over", at: T1, leaseExpiresAt: T2 },
  dispatchTransient: {
    kind: "dispatch-failed",
    at: T1,
    failureClass: "transient",
    reason: "ConnectionRefused",
    message: "refused",
  },
  dispatchAmbiguous: {
    kind: "dispatch-failed",
    at: T1,
    failureClass: "ambiguous",
    reason: "SessionDropped",
    message: "dropped",
  },
  succeeded: { kind: "result", at: T2, result: result("succeeded") },
  failed: {
    kind: "result",
    at: T2,
    result: result("failed", { failureClass: "permanent", reason: "ImageNotFound" }),
  },
  lost: { kind: "lost", at: T1, reason: "agent died" },
  leaseExpired: { kind: "lease-expired", at: T2, leaseEndedAt: T1, leaseMs: 60_000 },
  reportKnowing: {
    kind: "report",
    at: T2,
    lastAttempt: { attemptId: "A1", outcome: "succeeded", at: T1 },
  },
  reportNotKnowing: { kind: "report", at: T2, lastAttempt: { attemptId: "OTHER", outcome: "failed" } },
  superseded: { kind: "superseded", at: T2, by: 3 },
  retired: { kind: "retired" },
  ownerLost: { kind: "owner-lost", at: T2, replica: "hub-a" },
};

/** From each status, what each event makes of the attempt (— : the event does not apply). */
const TABLE: [AttemptStatus, keyof typeof events, AttemptStatus | "—"][] = [
  ["queued", "handedOver", "dispatched"],
  ["dispatched", "handedOver", "—"],
  ["queued", "dispatchTransient", "failed"],
  ["dispatched", "dispatchAmbiguous", "ambiguous"],
  ["succeeded", "dispatchTransient", "—"],
  ["queued", "succeeded", "succeeded"],
  ["dispatched", "failed", "failed"],
  ["ambiguous", "succeeded", "succeeded"],
  ["lost", "succeeded", "succeeded"],
  ["succeeded", "failed", "—"],
  ["cancelled", "succeeded", "—"],
  ["dispatched", "lost", "ambiguous"],
  ["ambiguous", "lost", "—"],
  ["succeeded", "lost", "—"],
  ["dispatched", "leaseExpired", "ambiguous"],
  ["queued", "leaseExpired", "—"],
  ["ambiguous", "reportKnowing", "succeeded"],
  ["ambiguous", "reportNotKnowing", "lost"],
  ["dispatched", "reportKnowing", "—"],
  ["queued", "superseded", "cancelled"],
  ["dispatched", "superseded", "superseded"],
  ["ambiguous", "superseded", "superseded"],
  ["succeeded", "superseded", "—"],
  ["queued", "retired", "cancelled"],
  ["dispatched", "retired", "—"],
  ["dispatched", "ownerLost", "ambiguous"],
  ["queued", "ownerLost", "ambiguous"],
  ["succeeded", "ownerLost", "—"],
  ["ambiguous", "ownerLost", "—"],
];

describe("attempt states", () => {
  it.each(TABLE)("attempt states - %s, then %s: %s", (from, event, to) => {
    const next = nextAttempt(attempt(from), events[event]!);
    if (to === "—") expect(next).toBeUndefined();
    else expect(next?.status).toBe(to);
  });

  it("attempt states - an expired lease is settled only by a report taken after the later of its end and now", () => {
    const expired = nextAttempt(attempt("dispatched"), {
      kind: "lease-expired",
      at: T1,
      leaseEndedAt: T2,
      leaseMs: 60_000,
    });
    expect(expired).toMatchObject({ status: "ambiguous", reason: "LeaseExpired", settleAfter: T2 });
  });

  it("attempt states - a result keeps the agent's finish and the hub's time it was read", () => {
    const settled = nextAttempt(attempt("dispatched"), events.succeeded!);
    expect(settled).toMatchObject({
      status: "succeeded",
      finishedAt: T1,
      recordedAt: T2,
      settledBy: "result",
    });
  });

  it("attempt states - a result for a superseded attempt is kept once as evidence, and its status stays", () => {
    const superseded = attempt("superseded", { supersededBy: 3 });
    const late = nextAttempt(superseded, events.failed!);
    expect(late).toMatchObject({
      status: "superseded",
      lateResult: { outcome: "failed", reason: "ImageNotFound", at: T1 },
    });
    expect(nextAttempt(late!, events.succeeded!)).toBeUndefined();
  });

  it("attempt states - a result names the failed resources and hides what looks like a secret", () => {
    const next = nextAttempt(attempt("dispatched"), {
      kind: "result",
      at: T2,
      result: result("failed", {
        message: "login with password=hunter2 refused",
        resources: [
          {
            name: "db",
            kind: "command",
            action: "failed",
            reason: "CommandFailed",
            evidence: "token=abcdef",
          } as AttemptResult["resources"][number],
        ],
      }),
    });
    expect(next?.message).not.toContain("hunter2");
    expect(next?.evidence).toEqual([expect.objectContaining({ name: "db", action: "failed" })]);
    expect(JSON.stringify(next?.evidence)).not.toContain("abcdef");
  });

  it("attempt states - a replica's lost attempt is ambiguous at once, settled by a report from now on", () => {
    expect(nextAttempt(attempt("dispatched", { dispatchedAt: T0 }), events.ownerLost!)).toMatchObject({
      status: "ambiguous",
      reason: "ReplicaLost",
      settleAfter: T2,
      dispatchedAt: T0,
    });
  });
});
