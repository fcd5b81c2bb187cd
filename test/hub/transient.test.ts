import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { assignmentYaml, fleetYaml, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

// Fails until /srv/ready exists on the node: a dependency that comes up late.
const waitsForReady = assignmentYaml("app", {
  nodes: ["n1"],
  resources: [
    { kind: "directory", name: "srv", path: "/srv" },
    shell("check-ready", 'test -f "$STEWARD_ROOT/srv/ready"'),
  ],
  budget: { attempts: 3, within: "1h" },
});

describe("hub - transient failures", () => {
  it("hub - retries with exponential backoff, raises Stuck when the budget is spent, keeps retrying at the slowest cadence and heals when the dependency arrives", async () => {
    const h = await startHarness({
      files: { ...nodes("n1"), "steward.yaml": fleetYaml({}), "assignments/app.yaml": waitsForReady },
      timing: { backoff: { initialMs: 1_000, maxMs: 60_000, jitter: 0.2 } },
    });
    await h.commit();
    await h.settle();
    const attempts = () => h.store.attempts.ofInstance("app@n1");
    expect(await attempts()).toHaveLength(1);
    expect((await attempts())[0]).toMatchObject({
      status: "failed",
      failureClass: "transient",
      reason: "CommandFailed",
    });
    let intent = await h.intent("app@n1");
    expect(intent).toMatchObject({ status: "backoff", failures: 1, failureClass: "transient" });
    // First retry after 1 s (jitter pinned to the middle), the second after 2 s: exponential.
    expect(Date.parse(intent.nextAttemptAt!) - Date.parse(intent.firstFailureAt!)).toBe(1_000);
    await h.advance(999);
    expect(await attempts()).toHaveLength(1);
    await h.advance(1);
    expect(await attempts()).toHaveLength(2);
    intent = await h.intent("app@n1");
    expect(intent.failures).toBe(2);
    expect(Date.parse(intent.nextAttemptAt!) - h.clock.now().getTime()).toBe(2_000);
    expect(await h.store.conditions.list({ type: "Stuck" })).toEqual([]);

    // Third failure spends the budget of 3: Stuck, with the attempts tried and a task for judgement.
    await h.advance(2_000);
    expect(await attempts()).toHaveLength(3);
    intent = await h.intent("app@n1");
    expect(intent.status).toBe("stuck");
    const [stuck] = await h.store.conditions.list({ type: "Stuck", status: "open" });
    expect(stuck).toMatchObject({
      subjectKind: "instance",
      subject: "app@n1",
      reason: "CommandFailed",
      generation: 1,
    });
    expect(stuck!.tried).toContain((await attempts())[2]!.id);
    expect((await h.store.tasks.list({ status: "open" })).map((t) => t.type)).toEqual(["Stuck"]);

    // Still retrying, at the slowest cadence (60 s), never giving up.
    await h.advance(59_000);
    expect(await attempts()).toHaveLength(3);
    await h.advance(1_000);
    expect(await attempts()).toHaveLength(4);
    expect((await h.intent("app@n1")).status).toBe("stuck");

    // The late dependency arrives: the next retry converges, and observation resolves Stuck.
    writeFileSync(join(h.root, "n1", "srv", "ready"), "");
    await h.advance(60_000);
    expect(await h.intent("app@n1")).toMatchObject({ status: "converged", failures: 0 });
    expect(await h.store.conditions.list({ type: "Stuck", status: "open" })).toEqual([]);
    const resolved = (await h.store.conditions.list({ type: "Stuck" }))[0]!;
    expect(resolved.status).toBe("resolved");
    expect(resolved.resolution).toMatch(/converged at generation 1/);
    expect((await h.store.tasks.list({ status: "closed" })).map((t) => t.type)).toEqual(["Stuck"]);
  });
});
