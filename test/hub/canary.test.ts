import { describe, expect, it } from "vitest";
import type { Resource, Rollout } from "../../src/model/generated.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { type Harness, startHarness } from "./helpers/harness.js";

const rollout: Rollout = { canary: { nodes: ["n1"], soak: "30s" }, maxInFlight: 1 };
const web = (resources: Resource[]) =>
  assignmentYaml("web", { nodes: ["n1", "n2", "n3"], resources, rollout });
const attempted = async (h: Harness, generation: number) => {
  const started: string[] = [];
  for (const n of ["n1", "n2", "n3"])
    if ((await h.store.attempts.ofInstance(`web@${n}`, generation)).length > 0) started.push(n);
  return started;
};

describe("hub - canary rollout", () => {
  it("hub - the canary goes first and soaks with probes passing before the rest start", async () => {
    const probed = assignmentYaml("web", {
      nodes: ["n1", "n2", "n3"],
      resources: [file("conf", "v1")],
      probes: [
        {
          kind: "command",
          name: "conf-present",
          run: ["sh", "-c", 'cat "$STEWARD_ROOT/srv/conf"'],
          expectOutput: "v1",
        },
      ],
      rollout,
    });
    const h = await startHarness({ files: { ...nodes("n1", "n2", "n3"), "assignments/web.yaml": probed } });
    await h.commit();
    await h.settle();
    expect(await attempted(h, 1)).toEqual(["n1"]);
    expect((await h.store.observations.get("web@n1"))!.report.probes).toMatchObject([
      { name: "conf-present", ok: true },
    ]);
    expect((await h.intent("web@n1")).status).toBe("converged");
    expect(await h.intent("web@n2")).toMatchObject({ status: "held", holdReason: "canary" });
    expect((await h.intent("web@n2")).message).toMatch(/^canary soaking until/);

    await h.advance(29_000);
    expect(await attempted(h, 1)).toEqual(["n1"]);
    await h.advance(1_000);
    expect(await attempted(h, 1)).toEqual(["n1", "n2", "n3"]);
    expect(
      await Promise.all(["n1", "n2", "n3"].map(async (n) => (await h.intent(`web@${n}`)).status)),
    ).toEqual(["converged", "converged", "converged"]);
  });

  it("hub - a failed canary pauses the rollout with RolloutPaused on the revision; the rest are never dispatched", async () => {
    const h = await startHarness({
      files: { ...nodes("n1", "n2", "n3"), "assignments/web.yaml": web([file("conf", "v1")]) },
    });
    await h.commit();
    await h.settle();
    await h.advance(30_000);

    h.write({
      "assignments/web.yaml": web([
        file("conf", "v2"),
        { kind: "command", name: "reload", run: ["/nonexistent/reload"] },
      ]),
    });
    const broken = await h.commit("v2");
    await h.settle();
    await h.advance(3_600_000);
    expect(await attempted(h, 2)).toEqual(["n1"]);
    expect(await h.intent("web@n1")).toMatchObject({ status: "blocked" });
    expect(await h.intent("web@n2")).toMatchObject({ status: "held", holdReason: "paused" });
    expect(await h.intent("web@n3")).toMatchObject({ status: "held", holdReason: "paused" });
    expect(h.read("n2", "srv/conf")).toBe("v1");
    const [paused] = await h.store.conditions.list({ type: "RolloutPaused", status: "open" });
    expect(paused).toMatchObject({
      subjectKind: "rollout",
      subject: `web@${broken.sha}`,
      revision: broken.sha,
      assignment: "web",
      reason: "MaxFailuresExceeded",
      tried: [(await h.intent("web@n1")).lastAttemptId],
    });

    // The fix is a new revision: a new rollout; the paused one resolves once nothing of it failed.
    h.write({ "assignments/web.yaml": web([file("conf", "v3")]) });
    await h.commit("v3");
    await h.settle();
    await h.advance(30_000);
    expect(
      await Promise.all(["n1", "n2", "n3"].map(async (n) => (await h.intent(`web@${n}`)).status)),
    ).toEqual(["converged", "converged", "converged"]);
    expect(await h.store.conditions.get(paused!.id)).toMatchObject({ status: "resolved" });
  });

  it("hub - at most maxInFlight instances are in progress; a failure within maxFailures frees its slot when it is stuck", async () => {
    const batch = assignmentYaml("web", {
      nodes: ["n1", "n2", "n3"],
      resources: [
        { kind: "directory", name: "srv", path: "/srv" },
        // Fails on n1 only.
        { kind: "command", name: "check", run: ["sh", "-c", 'test "$STEWARD_NODE" != n1'] },
      ],
      rollout: { maxInFlight: 1, maxFailures: 1 },
      budget: { attempts: 2 },
    });
    const h = await startHarness({
      files: { ...nodes("n1", "n2", "n3"), "assignments/web.yaml": batch },
      timing: { backoff: { initialMs: 10_000, maxMs: 60_000, jitter: 0 } },
    });
    await h.commit();
    await h.settle();
    expect(await attempted(h, 1)).toEqual(["n1"]);
    expect((await h.intent("web@n1")).status).toBe("backoff");
    expect(await h.intent("web@n2")).toMatchObject({ status: "held", holdReason: "batch" });
    expect((await h.intent("web@n2")).message).toBe("1 in progress, maxInFlight 1");

    // The second failure spends n1's budget: stuck counts as failed (1, tolerated), and its slot is free.
    await h.advance(10_000);
    expect((await h.intent("web@n1")).status).toBe("stuck");
    expect(await Promise.all(["n2", "n3"].map(async (n) => (await h.intent(`web@${n}`)).status))).toEqual([
      "converged",
      "converged",
    ]);
    expect(await h.store.conditions.list({ type: "RolloutPaused" })).toEqual([]);
  });
});
