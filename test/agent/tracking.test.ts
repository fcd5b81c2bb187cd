import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recordOutcome, resourceStatus } from "../../src/agent/tracking.js";
import type { Resource } from "../../src/model/generated.js";
import { again, bundle, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
  mkdirSync(box.host("/srv"), { recursive: true });
});
afterEach(async () => {
  await box.close();
});

/** Succeeds only while /srv/dependency exists: a dependency that is up, or not. */
const needsDependency: Resource = {
  kind: "command",
  name: "connect",
  run: ["sh", "-c", 'test -f "$STEWARD_ROOT/srv/dependency" || { echo "connection refused" >&2; exit 1; }'],
};

describe("agent tracking - budget", () => {
  it("agent tracking - a transient failure is waiting within the budget and stuck once it is spent", async () => {
    const agent = box.agent();
    const attempt = bundle({ resources: [needsDependency], budget: { attempts: 3, withinMs: 3_600_000 } });
    const statuses: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { report } = await agent.apply(again(attempt));
      statuses.push(report.instances[0]!.resources[0]!.status);
    }
    expect(statuses).toEqual(["waiting", "waiting", "stuck", "stuck"]);
    const stuck = (await agent.observe()).instances[0]!.resources[0]!;
    expect(stuck).toMatchObject({
      status: "stuck",
      failureClass: "transient",
      reason: "CommandFailed",
      counters: { consecutiveFailures: 4, everApplied: false },
    });
    expect(stuck.evidence).toContain("connection refused");
    expect(stuck.counters.firstFailureAt! < stuck.counters.lastFailureAt!).toBe(true);

    // The dependency arrives: the very next attempt heals it, and the counters say so.
    writeFileSync(box.host("/srv/dependency"), "");
    const { report } = await agent.apply(again(attempt));
    expect(report.instances[0]!.resources[0]).toMatchObject({
      status: "ok",
      counters: { consecutiveFailures: 0, everApplied: true, lastSuccessAt: expect.any(String) },
    });
    expect(report.instances[0]!.resources[0]!.counters.firstFailureAt).toBeUndefined();
  });

  it("agent tracking - the time budget alone makes a resource stuck", async () => {
    let now = new Date("2026-01-01T00:00:00Z");
    const agent = box.agent({ clock: () => now });
    const attempt = bundle({ resources: [needsDependency], budget: { attempts: 100, withinMs: 60_000 } });
    expect((await agent.apply(again(attempt))).report.instances[0]!.resources[0]!.status).toBe("waiting");
    now = new Date("2026-01-01T00:00:59Z");
    expect((await agent.observe()).instances[0]!.resources[0]!.status).toBe("waiting");
    now = new Date("2026-01-01T00:01:00Z");
    expect((await agent.observe()).instances[0]!.resources[0]!.status).toBe("stuck");
  });

  it("agent tracking - never applied and applied-then-regressed are told apart", async () => {
    const agent = box.agent();
    // Applied once (the dependency was there), then regressed in the next generation.
    writeFileSync(box.host("/srv/dependency"), "");
    await agent.apply(bundle({ resources: [needsDependency], generation: 1 }));
    rmSync(box.host("/srv/dependency"));
    const regressed = await agent.apply(bundle({ resources: [needsDependency], generation: 2 }));
    expect(regressed.report.instances[0]!.resources[0]!.counters).toMatchObject({
      consecutiveFailures: 1,
      everApplied: true,
      lastSuccessAt: expect.any(String),
    });
    // Another assignment whose resource never once applied.
    const never = await agent.apply(bundle({ assignment: "other", resources: [needsDependency] }));
    const other = never.report.instances.find((i) => i.assignment === "other")!;
    expect(other.resources[0]!.counters).toEqual({
      consecutiveFailures: 1,
      everApplied: false,
      firstFailureAt: expect.any(String),
      lastFailureAt: expect.any(String),
    });
  });

  it("agent tracking - a permanent failure is reported failed, not waiting", async () => {
    const { report } = await box
      .agent()
      .apply(bundle({ resources: [{ kind: "command", name: "missing", run: ["/no/such/tool"] }] }));
    expect(report.instances[0]!.resources[0]).toMatchObject({ status: "failed", failureClass: "permanent" });
  });
});

describe("agent tracking - pure rules", () => {
  const at = "2026-01-01T00:00:00.000Z";
  const failed = { name: "r", kind: "file", action: "failed" as const, failureClass: "transient" as const };

  it("agent tracking - a new generation starts a new run of failures but keeps history", () => {
    let record = recordOutcome(undefined, { name: "r", kind: "file", action: "created" }, 1, "a1", at);
    record = recordOutcome(record, failed, 1, "a2", at);
    record = recordOutcome(record, failed, 1, "a3", at);
    expect(record.counters.consecutiveFailures).toBe(2);
    record = recordOutcome(record, failed, 2, "a4", at);
    expect(record.counters).toMatchObject({ consecutiveFailures: 1, everApplied: true, lastSuccessAt: at });
  });

  it("agent tracking - blocked resources keep their counters and report who blocks them", () => {
    const record = recordOutcome(
      undefined,
      { name: "r", kind: "file", action: "blocked", blockedBy: "migrate" },
      1,
      "a1",
      at,
    );
    expect(record.counters).toEqual({ consecutiveFailures: 0, everApplied: false });
    const status = resourceStatus({
      inSync: false,
      record,
      generation: 1,
      budget: { attempts: 5, withinMs: 1000 },
      now: new Date(at),
    });
    expect(status).toMatchObject({ status: "blocked", blockedBy: "migrate" });
    // A record from an older generation says nothing about this one: plain drift.
    expect(
      resourceStatus({
        inSync: false,
        record,
        generation: 2,
        budget: { attempts: 5, withinMs: 1000 },
        now: new Date(at),
      }).status,
    ).toBe("drifted");
  });
});
