import { describe, expect, it } from "vitest";
import { generationOutcomes } from "../../src/hub/views.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const good = assignmentYaml("app", {
  nodes: ["n1"],
  version: "1.0",
  resources: [file("conf", "version 1.0")],
});
const bad = assignmentYaml("app", {
  nodes: ["n1"],
  version: "1.1",
  resources: [
    file("conf", "version 1.1"),
    { kind: "command", name: "restart", run: ["/nonexistent/restart"] },
  ],
});

describe("hub - rollback", () => {
  it("hub - a rollback is a new generation; the failed one stays visible with its failure class and correlation id", async () => {
    const h = await startHarness({ files: { ...nodes("n1"), "assignments/app.yaml": good } });
    await h.commit("1.0");
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ generation: 1, status: "converged", version: "1.0" });
    const goodHash = (await h.intent("app@n1")).hash;

    h.write({ "assignments/app.yaml": bad });
    await h.commit("1.1");
    await h.settle();
    const failed = await h.intent("app@n1");
    expect(failed).toMatchObject({ generation: 2, status: "blocked", failureClass: "permanent" });
    const failedAttempt = failed.lastAttemptId!;

    // The revert restores the old content: a new generation (3) with the old hash, converged anew.
    h.write({ "assignments/app.yaml": good });
    await h.commit("Revert 1.1");
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({
      generation: 3,
      status: "converged",
      hash: goodHash,
      version: "1.0",
    });
    expect(h.read("n1", "srv/conf")).toBe("version 1.0");
    const history = (await h.store.intents.ofInstance("app@n1")).map((i) => ({
      generation: i.generation,
      status: i.status,
      outcome: i.outcome,
      failureClass: i.failureClass,
      attempt: i.lastAttemptId,
    }));
    expect(history).toEqual([
      {
        generation: 1,
        status: "superseded",
        outcome: "converged",
        failureClass: undefined,
        attempt: expect.any(String),
      },
      {
        generation: 2,
        status: "superseded",
        outcome: "blocked",
        failureClass: "permanent",
        attempt: failedAttempt,
      },
      {
        generation: 3,
        status: "converged",
        outcome: "converged",
        failureClass: undefined,
        attempt: expect.any(String),
      },
    ]);
    // The failed attempt keeps its record, and the Blocked condition its correlation id.
    expect(await h.store.attempts.get(failedAttempt)).toMatchObject({
      generation: 2,
      status: "failed",
      failureClass: "permanent",
    });
    const blocked = (await h.store.conditions.list({ type: "Blocked" }))[0]!;
    expect(blocked).toMatchObject({ status: "resolved", attemptId: failedAttempt, generation: 2 });
    expect(blocked.tried).toEqual([failedAttempt]);
    // `steward history` shows each generation's outcome, failure class and correlation id.
    const outcomeOf = generationOutcomes(h.store);
    expect(await outcomeOf("app@n1", 2)).toEqual({
      outcome: "blocked",
      failureClass: "permanent",
      correlationId: failedAttempt,
    });
    expect(await outcomeOf("app@n1", 3)).toEqual({
      outcome: "converged",
      correlationId: (await h.intent("app@n1")).lastAttemptId,
    });
    // The report of generation 1 was not rewritten: observations only move forward.
    expect(await h.store.observations.get("app@n1")).toMatchObject({ generation: 3, converged: true });
  });
});
