import { describe, expect, it } from "vitest";
import { failureLines, upOutcome } from "../../src/cli/up.js";
import type { InstanceView } from "../../src/hub/views.js";

function view(node: string, status: InstanceView["status"], extra: Partial<InstanceView> = {}): InstanceView {
  return {
    instance: `web@${node}`,
    assignment: "web",
    node,
    generation: 1,
    status,
    converged: status === "converged",
    failures: 0,
    openConditions: [],
    retired: false,
    ...extra,
  };
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

  it("up - a failed instance is explained with its attempt id and message", () => {
    const outcome = upOutcome(
      () => true,
      [view("a", "backoff", { lastAttemptId: "01ATTEMPT", message: "service web exited at once" })],
    );
    expect(failureLines(outcome)).toEqual([
      "  web@a backoff (attempt 01ATTEMPT): service web exited at once",
    ]);
  });
});
