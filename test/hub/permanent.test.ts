import { describe, expect, it } from "vitest";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const HOUR = 3_600_000;

describe("hub - permanent failures", () => {
  it("hub - a permanent failure blocks the generation: no further attempts until a new generation unblocks it", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [
            file("conf", "v1"),
            { kind: "command", name: "migrate", run: ["/nonexistent/migrate-tool"] },
          ],
        }),
      },
    });
    await h.commit("add app");
    await h.settle();
    const [attempt] = await h.store.attempts.ofInstance("app@n1");
    expect(attempt).toMatchObject({ status: "failed", failureClass: "permanent", reason: "CommandNotFound" });
    expect(await h.intent("app@n1")).toMatchObject({
      status: "blocked",
      failureClass: "permanent",
      failures: 0,
    });
    const [blocked] = await h.store.conditions.list({ type: "Blocked", status: "open" });
    expect(blocked).toMatchObject({
      subject: "app@n1",
      reason: "CommandNotFound",
      resolver: "operator",
      attemptId: attempt!.id,
    });
    expect(blocked!.tried).toEqual([attempt!.id]);

    // An hour later, and after reports from the node: still one attempt.
    await h.advance(HOUR);
    await h.report("n1");
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(1);
    expect((await h.intent("app@n1")).status).toBe("blocked");

    // The fix is a new generation: it is attempted at once and converges; Blocked resolves.
    h.write({
      "assignments/app.yaml": assignmentYaml("app", {
        nodes: ["n1"],
        resources: [file("conf", "v1"), shell("migrate", "true")],
      }),
    });
    await h.commit("fix the migration command");
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ generation: 2, status: "converged" });
    expect(await h.store.intents.get("app@n1", 1)).toMatchObject({
      status: "superseded",
      outcome: "blocked",
      supersededBy: 2,
    });
    const resolved = (await h.store.conditions.get(blocked!.id))!;
    expect(resolved.status).toBe("resolved");
    expect(resolved.resolution).toBe("generation 2 supersedes generation 1");
  });
});
