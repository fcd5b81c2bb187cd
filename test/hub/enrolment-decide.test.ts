/**
 * What the hub answers a host asking to join, decided from what Git declares and what was recorded:
 * one pure function, tabled in its policy order.
 */
import { describe, expect, it } from "vitest";
import { decideEnrolment, type EnrolmentFacts } from "../../src/hub/enrolment/decide.js";
import type { EnrolmentInput, EnrolmentRecord, EnrolmentStatus } from "../../src/hub/enrolment/records.js";

const KEY = `U${"A".repeat(55)}`;
const OTHER = `U${"B".repeat(55)}`;
const AGE = `age1${"q".repeat(58)}`;

const request: EnrolmentInput = {
  node: "web-3",
  identity: { nkey: KEY, age: AGE },
  labels: { role: "web" },
  facts: { hostname: "web-3", os: "Debian GNU/Linux 12", arch: "x64", agentVersion: "0.1.0" },
};

function recorded(
  nkey: string,
  status: EnrolmentStatus,
  extra: Partial<EnrolmentRecord> = {},
): EnrolmentRecord {
  return {
    node: "web-3",
    nkey,
    age: AGE,
    labels: {},
    facts: request.facts,
    status,
    requestedAt: "2026-01-01T00:00:00.000Z",
    lastAskedAt: "2026-01-01T00:00:00.000Z",
    ...extra,
  };
}

const none: EnrolmentFacts = { requests: [], undecided: 0 };

describe("enrolment - what the hub answers", () => {
  const cases: { name: string; facts: EnrolmentFacts; expected: string; reason?: string }[] = [
    { name: "a new name: queued", facts: none, expected: "queue" },
    {
      name: "declared with this key over NATS: admitted",
      facts: { ...none, declared: { transport: "nats", nkey: KEY } },
      expected: "admit",
    },
    {
      name: "declared with this key but over SSH: refused, it never connects to the bus",
      facts: { ...none, declared: { transport: "ssh", nkey: KEY } },
      expected: "refuse",
      reason: "NotNats",
    },
    {
      name: "declared with this key wins over an earlier denial (Git is the operator's word)",
      facts: {
        requests: [recorded(KEY, "denied")],
        undecided: 0,
        declared: { transport: "nats", nkey: KEY },
      },
      expected: "admit",
    },
    {
      name: "this key was denied: refused",
      facts: {
        requests: [recorded(KEY, "denied", { decidedBy: "alice", decision: "not ours" })],
        undecided: 0,
      },
      expected: "refuse",
      reason: "Denied",
    },
    {
      name: "approved and not merged yet, while Git still declares another key: it waits (duplicate)",
      facts: {
        requests: [recorded(KEY, "approved")],
        undecided: 0,
        declared: { transport: "nats", nkey: OTHER },
      },
      expected: "duplicate",
    },
    {
      name: "declared with another key: a conflict",
      facts: { ...none, declared: { transport: "nats", nkey: OTHER } },
      expected: "conflict",
      reason: "NameDeclaredWithAnotherKey",
    },
    {
      name: "another host waits with another key for the same name: a conflict",
      facts: { requests: [recorded(OTHER, "queued")], undecided: 1 },
      expected: "conflict",
      reason: "NameRequestedWithAnotherKey",
    },
    {
      name: "a conflicting request of another key is no rival (the first host is not made a conflict in turn)",
      facts: { requests: [recorded(OTHER, "conflict")], undecided: 1 },
      expected: "queue",
    },
    {
      name: "declared without a key (an older node): queued, a person gives it this one",
      facts: { ...none, declared: { transport: "nats" } },
      expected: "queue",
    },
    {
      name: "asked already and waiting: duplicate",
      facts: { requests: [recorded(KEY, "queued")], undecided: 1 },
      expected: "duplicate",
    },
    {
      name: "its conflict is gone (the name freed): decided afresh, queued",
      facts: { requests: [recorded(KEY, "conflict")], undecided: 1 },
      expected: "queue",
    },
    {
      name: "too many waiting for a person: refused",
      facts: { requests: [], undecided: 3 },
      expected: "refuse",
      reason: "TooManyWaiting",
    },
  ];
  for (const c of cases)
    it(`enrolment - ${c.name}`, () => {
      const verdict = decideEnrolment(request, c.facts, 3);
      expect(verdict.kind).toBe(c.expected);
      if (c.reason) expect((verdict as { reason?: string }).reason).toBe(c.reason);
    });

  it("enrolment - a refusal says why, in words the host prints", () => {
    const denied = decideEnrolment(request, {
      requests: [recorded(KEY, "denied", { decidedBy: "alice", decision: "not one of ours" })],
      undecided: 0,
    });
    expect(denied).toMatchObject({
      kind: "refuse",
      message: 'alice denied this host joining as "web-3": not one of ours',
    });
    const ssh = decideEnrolment(request, { ...none, declared: { transport: "ssh", nkey: KEY } });
    expect((ssh as { message: string }).message).toMatch(
      /reached over ssh, not NATS: set spec\.transport to nats/,
    );
  });
});
