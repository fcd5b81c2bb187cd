import { describe, expect, it } from "vitest";
import { backoffDelay, budgetSpent } from "../../src/hub/backoff.js";
import { maxInFlight, rolloutGate } from "../../src/hub/rollout.js";

const counts = (
  over: Partial<{ inProgress: number; failed: number; converged: number; started: number }> = {},
) => ({
  inProgress: 0,
  failed: 0,
  converged: 0,
  started: 0,
  ...over,
});

describe("hub - rollout gates", () => {
  it("hub - maxInFlight is a count or a percentage of the rollout, at least one", () => {
    expect(maxInFlight({}, 10)).toBe(10);
    expect(maxInFlight({ maxInFlight: 3 }, 10)).toBe(3);
    expect(maxInFlight({ maxInFlight: "25%" }, 10)).toBe(3);
    expect(maxInFlight({ maxInFlight: "50%" }, 1)).toBe(1);
    expect(maxInFlight({ maxInFlight: "1%" }, 10)).toBe(1);
  });

  it("hub - canaries first, then soak, then batches; more than maxFailures pauses", () => {
    const policy = { canary: { nodes: ["a"], soak: "1m" }, maxInFlight: 2, maxFailures: 1 };
    const base = { policy, size: 10, now: 1_000_000 };
    expect(
      rolloutGate({ ...base, node: "a", counts: counts(), canaries: [{ node: "a", converged: false }] }),
    ).toEqual({ go: true });
    expect(
      rolloutGate({ ...base, node: "b", counts: counts(), canaries: [{ node: "a", converged: false }] }),
    ).toMatchObject({
      go: false,
      hold: "canary",
      message: "waiting for canary a to converge",
    });
    expect(
      rolloutGate({
        ...base,
        node: "b",
        counts: counts(),
        canaries: [{ node: "a", converged: true, convergedAt: 1_000_000 - 59_000 }],
      }),
    ).toMatchObject({ go: false, hold: "canary", requeueAt: 1_001_000 });
    const soaked = [{ node: "a", converged: true, convergedAt: 1_000_000 - 60_000 }];
    expect(rolloutGate({ ...base, node: "b", counts: counts({ inProgress: 1 }), canaries: soaked })).toEqual({
      go: true,
    });
    expect(
      rolloutGate({ ...base, node: "b", counts: counts({ inProgress: 2 }), canaries: soaked }),
    ).toMatchObject({ hold: "batch" });
    expect(rolloutGate({ ...base, node: "b", counts: counts({ failed: 1 }), canaries: soaked })).toEqual({
      go: true,
    });
    expect(
      rolloutGate({ ...base, node: "a", counts: counts({ failed: 2 }), canaries: soaked }),
    ).toMatchObject({ hold: "paused" });
  });

  it("hub - an operator's pause holds every member that has not started, canaries too, before any count", () => {
    const gate = rolloutGate({
      node: "a",
      policy: { canary: { nodes: ["a"] }, maxInFlight: 5 },
      size: 10,
      counts: counts(),
      canaries: [{ node: "a", converged: false }],
      pausedBy: { by: "alice", reason: "metrics look off" },
      now: 0,
    });
    expect(gate).toEqual({
      go: false,
      hold: "paused-by-operator",
      message: "rollout paused by alice: metrics look off",
    });
  });

  it("hub - backoff doubles up to the slowest cadence, with bounded jitter; the budget counts attempts and time", () => {
    const policy = { initialMs: 1_000, maxMs: 60_000, jitter: 0.2 };
    expect([1, 2, 3, 4].map((n) => backoffDelay(n, policy, () => 0.5))).toEqual([1_000, 2_000, 4_000, 8_000]);
    expect(backoffDelay(20, policy, () => 0.5)).toBe(60_000);
    expect(backoffDelay(1, policy, () => 0.5, true)).toBe(60_000);
    expect(backoffDelay(3, policy, () => 0)).toBe(3_200);
    expect(backoffDelay(3, policy, () => 0.999999)).toBe(4_800);
    expect(budgetSpent(2, 0, 10, { attempts: 3, withinMs: 100 })).toBe(false);
    expect(budgetSpent(3, 0, 10, { attempts: 3, withinMs: 100 })).toBe(true);
    expect(budgetSpent(1, 0, 100, { attempts: 3, withinMs: 100 })).toBe(true);
  });
});
