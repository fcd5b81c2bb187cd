import { describe, expect, it } from "vitest";
import { revisionProgress } from "../../src/hub/progress.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const web = (content: string, extra: object = {}) =>
  assignmentYaml("web", {
    nodes: ["n1", "n2", "n3"],
    resources: [file("conf", content)],
    rollout: { canary: { nodes: ["n1"], soak: "1m" } },
    ...extra,
  });

describe("hub - revision progress", () => {
  it("hub - pending while rolling out, success when every instance converged, superseded by a later revision", async () => {
    const h = await startHarness({
      files: { ...nodes("n1", "n2", "n3"), "assignments/web.yaml": web("v1") },
    });
    const first = await h.commit("v1");
    await h.settle();
    expect(await revisionProgress(h.store, first.sha)).toMatchObject({
      state: "pending",
      description: "1/3 instances converged",
      assignments: [{ assignment: "web", state: "pending", description: "1/3 nodes at generation 1" }],
    });
    await h.advance(60_000);
    expect(await revisionProgress(h.store, first.sha)).toMatchObject({
      state: "success",
      description: "3/3 instances converged",
    });

    h.write({ "assignments/web.yaml": web("v2") });
    const second = await h.commit("v2");
    await h.settle();
    expect(await revisionProgress(h.store, first.sha)).toMatchObject({
      state: "superseded",
      supersededBy: second.sha,
      assignments: [{ state: "superseded", supersededBy: second.sha }],
    });
  });

  it("hub - failure names the condition, the node and the attempt id; an invalid revision is an error with file:line", async () => {
    const h = await startHarness({
      files: { ...nodes("n1", "n2", "n3"), "assignments/web.yaml": web("v1") },
    });
    h.write({
      "assignments/web.yaml": web("v1", {
        resources: [file("conf", "v1"), { kind: "command", name: "reload", run: ["/nonexistent/reload"] }],
      }),
    });
    const broken = await h.commit("broken");
    await h.settle();
    const attemptId = (await h.intent("web@n1")).lastAttemptId;
    const progress = (await revisionProgress(h.store, broken.sha))!;
    expect(progress.state).toBe("failure");
    expect(progress.assignments[0]).toMatchObject({
      state: "failure",
      failure: { condition: "Blocked", reason: "CommandNotFound", node: "n1", attemptId },
    });
    expect(progress.assignments[0]!.description).toBe(
      `Blocked on n1 (attempt ${attemptId}): 0/3 nodes at generation 1`,
    );

    h.write({
      "assignments/web.yaml":
        "apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: web\nspec:\n  nodes: [n1]\n  resources: []\n",
    });
    const invalid = await h.commit("invalid");
    const error = (await revisionProgress(h.store, invalid.sha))!;
    expect(error.state).toBe("error");
    expect(error.errors![0]).toMatch(/^assignments\/web\.yaml:7:\d+: /);
    expect(await h.store.conditions.list({ type: "InvalidRevision", status: "open" })).toMatchObject([
      { subject: invalid.sha, revision: invalid.sha },
    ]);
  });
});
