import { describe, expect, it } from "vitest";
import { fleetStatus } from "../../src/hub/answer.js";
import type { ConditionRecord, HoldReason, IntentStatus } from "../../src/hub/records.js";
import { type DisplayState, displayState } from "../../src/hub/states.js";
import type { InstanceView } from "../../src/hub/views.js";

describe("hub - display states: one mapping of every intent status and hold reason", () => {
  const cases: [IntentStatus | "not-started", HoldReason | undefined, DisplayState][] = [
    ["not-started", undefined, "converging"],
    ["pending", undefined, "converging"],
    ["dispatched", undefined, "converging"],
    ["verifying", undefined, "verifying"],
    ["ambiguous", undefined, "ambiguous"],
    ["backoff", undefined, "failing"],
    ["stuck", undefined, "stuck"],
    ["blocked", undefined, "blocked"],
    ["waiting", undefined, "waiting"],
    ["held", "observe", "observe-only"],
    ["held", "draining", "drained"],
    ["held", "transport-disabled", "skipped"],
    ["held", "node-unknown", "skipped"],
    ["held", "canary", "held"],
    ["held", "batch", "held"],
    ["held", "paused", "held"],
    ["held", "paused-by-operator", "held"],
    ["converged", undefined, "converging"],
    ["superseded", undefined, "superseded"],
    ["retired", undefined, "retired"],
  ];
  for (const [status, holdReason, state] of cases)
    it(`hub - display states: ${status}${holdReason ? ` (${holdReason})` : ""} is ${state}`, () => {
      expect(
        displayState({ status, ...(holdReason ? { holdReason } : {}), converged: false, openConditions: [] }),
      ).toBe(state);
    });

  it("hub - display states: observation wins, and an interrupted one-shot wins over it", () => {
    expect(displayState({ status: "backoff", converged: true, openConditions: [] })).toBe("converged");
    expect(displayState({ status: "held", holdReason: "observe", converged: true, openConditions: [] })).toBe(
      "converged",
    );
    expect(
      displayState({ status: "backoff", converged: false, openConditions: ["OneShotInterrupted"] }),
    ).toBe("interrupted");
  });
});

function view(instance: string, state: DisplayState): InstanceView {
  const [assignment, node] = instance.split("@") as [string, string];
  return {
    instance,
    assignment,
    node,
    generation: 1,
    status: "dispatched",
    state,
    converged: state === "converged",
    failures: 0,
    budget: { attempts: 5, withinMs: 60_000 },
    openConditions: [],
    retired: false,
  };
}

describe("hub - the fleet's answer", () => {
  const condition = { id: "c1", type: "TransportDegraded" } as ConditionRecord;
  const cases: { name: string; instances: InstanceView[]; conditions?: ConditionRecord[]; answer: string }[] =
    [
      { name: "everything converged", instances: [view("a@n1", "converged")], answer: "right" },
      { name: "nothing to deliver", instances: [], answer: "right" },
      {
        name: "an attempt in flight",
        instances: [view("a@n1", "converged"), view("a@n2", "converging")],
        answer: "converging",
      },
      { name: "a failure within budget", instances: [view("a@n1", "failing")], answer: "converging" },
      { name: "held by the rollout", instances: [view("a@n1", "held")], answer: "converging" },
      {
        name: "observe-only differences do not count",
        instances: [view("a@n1", "converged"), view("b@n1", "observe-only")],
        answer: "right",
      },
      {
        name: "drained nodes do not count",
        instances: [view("a@n1", "converged"), view("a@n2", "drained")],
        answer: "right",
      },
      {
        name: "an open condition",
        instances: [view("a@n1", "converged")],
        conditions: [condition],
        answer: "not-right",
      },
      { name: "an interrupted one-shot", instances: [view("a@n1", "interrupted")], answer: "not-right" },
    ];
  for (const c of cases)
    it(`hub - the fleet's answer: ${c.name} → ${c.answer}`, () => {
      expect(fleetStatus(c.instances, c.conditions ?? []).answer).toBe(c.answer);
    });
});
