import { describe, expect, it } from "vitest";
import { instanceLine } from "../../src/cli/status.js";
import { reachedConditions, upOutcome } from "../../src/cli/up.js";
import type { ConditionRecord } from "../../src/hub/records.js";
import { displayState } from "../../src/hub/states.js";
import type { InstanceView } from "../../src/hub/views.js";

function view(node: string, status: InstanceView["status"], extra: Partial<InstanceView> = {}): InstanceView {
  const converged = status === "converged";
  const base = {
    instance: `web@${node}`,
    assignment: "web",
    node,
    generation: 1,
    status,
    converged,
    failures: 0,
    budget: { attempts: 5, withinMs: 600_000 },
    openConditions: [],
    retired: false,
    ...extra,
  };
  return { ...base, state: displayState(base) };
}

describe("up - outcome of --once", () => {
  const cases: { name: string; instances: InstanceView[]; done: boolean; converged: boolean }[] = [
    {
      name: "a node held behind a canary still in flight is moving",
      instances: [view("a", "dispatched"), view("b", "held", { holdReason: "canary" })],
      done: false,
      converged: false,
    },
    {
      name: "a node held behind a converged canary is soaking, which ends by itself",
      instances: [view("a", "converged"), view("b", "held", { holdReason: "canary" })],
      done: false,
      converged: false,
    },
    {
      name: "a node held behind a failed canary waits on nothing that will change",
      instances: [view("a", "stuck"), view("b", "held", { holdReason: "canary" })],
      done: true,
      converged: false,
    },
    {
      name: "a batch slot taken by a node in backoff: nothing moves",
      instances: [view("a", "backoff"), view("b", "held", { holdReason: "batch" })],
      done: true,
      converged: false,
    },
    {
      name: "an instance waiting for a dependency that has just converged is dispatched next: moving",
      instances: [view("a", "converged", { assignment: "base", instance: "base@a" }), view("a", "waiting")],
      done: false,
      converged: false,
    },
    {
      name: "an instance waiting for a dependency that failed on its node waits on nothing that will change",
      instances: [view("a", "backoff", { assignment: "base", instance: "base@a" }), view("a", "waiting")],
      done: true,
      converged: false,
    },
    {
      name: "a failure on another node does not stop a waiting instance",
      instances: [
        view("b", "backoff", { assignment: "base", instance: "base@b" }),
        view("a", "converged", { assignment: "base", instance: "base@a" }),
        view("a", "waiting"),
      ],
      done: false,
      converged: false,
    },
    {
      name: "a drained node does not keep --once waiting",
      instances: [view("a", "converged"), view("b", "held", { holdReason: "draining" })],
      done: true,
      converged: false,
    },
    {
      name: "everything converged",
      instances: [view("a", "converged"), view("b", "converged")],
      done: true,
      converged: true,
    },
  ];
  for (const c of cases)
    it(`up - ${c.name}`, () => {
      const outcome = upOutcome(() => true, c.instances);
      expect({ done: outcome.done, converged: outcome.converged }).toEqual({
        done: c.done,
        converged: c.converged,
      });
    });

  it("up - nodes this hub does not reach are left out of the outcome", () => {
    const outcome = upOutcome((node) => node === "a", [view("a", "converged"), view("b", "dispatched")]);
    expect(outcome).toMatchObject({ done: true, converged: true });
    expect(outcome.unreachable.map((i) => i.node)).toEqual(["b"]);
  });

  it("up - a failure within budget is explained with the evidence line, the retries and when the next one is", () => {
    const now = new Date("2026-01-01T10:00:00.000Z");
    const failing = view("a", "backoff", {
      lastAttemptId: "01ATTEMPT",
      reason: "ServiceExited",
      message: "1 of 1 resources failed (first: web: service web exited at once within 300 ms of starting)",
      errorLine: "web: Error: listen EADDRINUSE: address already in use 127.0.0.1:18081",
      failures: 2,
      nextAttemptAt: "2026-01-01T10:00:04.000Z",
    });
    expect(instanceLine(failing, { now, wide: true })).toBe(
      "  web@a  failing within budget  retry 2/5, next at 2026-01-01T10:00:04.000Z (in 4s); ServiceExited: 1 of 1 resources failed (first: web: service web exited at once within 300 ms of starting); web: Error: listen EADDRINUSE: address already in use 127.0.0.1:18081; attempt 01ATTEMPT",
    );
  });

  it("up - the conditions of nodes this hub does not reach are left to steward status", () => {
    const condition = (subjectKind: ConditionRecord["subjectKind"], subject: string, node?: string) =>
      ({ type: "TransportDegraded", subjectKind, subject, ...(node ? { node } : {}) }) as ConditionRecord;
    const kept = reachedConditions(
      [
        condition("node", "edge-1", "edge-1"),
        condition("instance", "web@a", "a"),
        condition("revision", "abc"),
      ],
      (node) => node === "a",
    );
    expect(kept.map((c) => c.subject)).toEqual(["web@a", "abc"]);
  });
});
