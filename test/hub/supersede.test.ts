import { describe, expect, it } from "vitest";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

describe("hub - supersede", () => {
  it("hub - a newer generation is attempted at once: the old generation's backoff never delays it, and counters start again", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [{ kind: "directory", name: "srv", path: "/srv" }, shell("flaky", "exit 3")],
          budget: { attempts: 2 },
        }),
      },
      timing: { backoff: { initialMs: 60_000, maxMs: 3_600_000, jitter: 0 } },
    });
    await h.commit();
    await h.settle();
    await h.advance(60_000);
    const old = await h.intent("app@n1");
    expect(old).toMatchObject({ generation: 1, status: "stuck", failures: 2 });
    // The next retry of generation 1 is an hour away.
    expect(Date.parse(old.nextAttemptAt!) - h.clock.now().getTime()).toBe(3_600_000);
    expect(await h.store.conditions.list({ type: "Stuck", status: "open" })).toHaveLength(1);

    h.write({
      "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "fixed")] }),
    });
    await h.commit("fix");
    await h.settle(); // no clock movement at all
    expect(await h.intent("app@n1")).toMatchObject({ generation: 2, status: "converged", failures: 0 });
    expect(await h.store.intents.get("app@n1", 1)).toMatchObject({
      status: "superseded",
      supersededBy: 2,
      outcome: "stuck",
    });
    expect(await h.store.attempts.ofInstance("app@n1", 2)).toHaveLength(1);
    expect(await h.store.conditions.list({ type: "Stuck", status: "open" })).toEqual([]);
    expect((await h.store.conditions.list({ type: "Stuck" }))[0]!.resolution).toBe(
      "generation 2 supersedes generation 1",
    );
    // The old generation's retry timer fires later and changes nothing.
    await h.advance(3_600_000);
    expect(await h.store.attempts.ofInstance("app@n1", 1)).toHaveLength(2);
  });
});

describe("hub - superseded attempts", () => {
  it("hub - an attempt in flight when its generation is superseded ends superseded; its late result is evidence only", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [{ kind: "directory", name: "srv", path: "/srv" }, shell("slow", "sleep 1")],
        }),
      },
      timing: { leaseMs: 30_000 },
    });
    await h.commit();
    const first = await eventuallyAttempt(h, "dispatched");
    h.write({
      "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v2")] }),
    });
    await h.commit("v2");
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ generation: 2, status: "converged" });
    const ended = (await h.store.attempts.get(first.id))!;
    expect(ended).toMatchObject({ status: "superseded", supersededBy: 2, settledBy: "superseded" });
    // The result that still came is kept, and changed nothing.
    expect(ended.lateResult).toMatchObject({ outcome: "succeeded" });
    expect(await h.store.intents.get("app@n1", 1)).toMatchObject({ status: "superseded" });
    // Its lease passing later changes nothing, and nothing of generation 1 is in flight anywhere.
    await h.advance(60_000);
    expect((await h.store.attempts.get(first.id))!.status).toBe("superseded");
    expect(await h.store.attempts.openOfNodes(["n1"])).toEqual([]);
    expect(await h.store.attempts.countsByStatus()).not.toHaveProperty("dispatched");
    expect((await h.intent("app@n1")).status).toBe("converged");
  });
});

/** The instance's first attempt once it has the status, polling the real hub. */
async function eventuallyAttempt(h: Awaited<ReturnType<typeof startHarness>>, status: string) {
  for (let i = 0; i < 200; i++) {
    const attempt = (await h.store.attempts.ofInstance("app@n1"))[0];
    if (attempt?.status === status) return attempt;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no attempt ${status}`);
}
