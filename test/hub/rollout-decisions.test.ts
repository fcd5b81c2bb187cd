/**
 * An operator steers a rollout: `pause` holds what has not started, `resume` lets it go on past
 * the failures it has seen (as does answering the RolloutPaused task with `--outcome resume`). Each
 * decision is recorded with who and why, in the store and in the condition's history; the condition
 * itself resolves only when the rollout is seen moving again.
 */
import { describe, expect, it } from "vitest";
import { idFactory } from "../../src/hub/ids.js";
import { revisionProgress, statusInputs } from "../../src/hub/progress.js";
import { pauseRollouts, resumeRollouts } from "../../src/hub/rollout-decisions.js";
import { revisionStatuses } from "../../src/hub/status.js";
import { resolveTask } from "../../src/hub/tasks.js";
import { instanceViews } from "../../src/hub/views.js";
import type { Resource, Rollout } from "../../src/model/generated.js";
import { assignmentYaml, file, nodeYaml } from "./helpers/fleet.js";
import { type Harness, startHarness } from "./helpers/harness.js";

/** Nodes whose `reload` command is a missing executable (a permanent failure) on `broken`. */
function fleet(names: readonly string[], broken: readonly string[] = []): Record<string, string> {
  return Object.fromEntries(
    names.map((n) => [
      `nodes/${n}.yaml`,
      nodeYaml(n, { vars: { reload: broken.includes(n) ? "/nonexistent/reload" : "/bin/true" } }),
    ]),
  );
}

const web = (nodes: string[], rollout: Rollout) =>
  assignmentYaml("web", {
    nodes,
    resources: [
      file("conf", "v1"),
      { kind: "command", name: "reload", run: ["${node.vars.reload}"] } as Resource,
    ],
    rollout,
  });

const states = (h: Harness, nodes: readonly string[]) =>
  Promise.all(
    nodes.map(async (n) => {
      const intent = await h.intent(`web@${n}`);
      return `${n} ${intent.status}${intent.holdReason ? ` (${intent.holdReason})` : ""}`;
    }),
  );

describe("hub - an operator pauses and resumes a rollout", () => {
  it("hub - rollout pause holds what has not started and says who paused it and why; resume lets it go on, and the pause resolves once it moves", async () => {
    const nodes = ["n1", "n2", "n3"];
    const h = await startHarness({
      files: {
        ...fleet(nodes),
        "assignments/web.yaml": web(nodes, { canary: { nodes: ["n1"], soak: "30s" } }),
      },
    });
    const newId = idFactory(h.clock);
    const { sha } = await h.commit();
    await h.settle();
    expect(await states(h, nodes)).toEqual(["n1 converged", "n2 held (canary)", "n3 held (canary)"]);

    const [paused] = await pauseRollouts(
      h.store,
      { revision: sha, by: "alice", reason: "watching the error rate", at: h.clock.now().toISOString() },
      newId,
    );
    expect(paused).toMatchObject({ assignment: "web", recorded: true });
    await h.hub.nudge({ revision: sha });
    await h.settle();
    await h.advance(60_000);
    expect(await states(h, nodes)).toEqual([
      "n1 converged",
      "n2 held (paused-by-operator)",
      "n3 held (paused-by-operator)",
    ]);
    expect((await h.intent("web@n2")).message).toBe("rollout paused by alice: watching the error rate");
    const [condition] = await h.store.conditions.list({ type: "RolloutPaused", status: "open" });
    expect(condition).toMatchObject({
      reason: "PausedByOperator",
      resolver: "operator",
      subject: `web@${sha}`,
    });
    expect(condition!.message).toContain("paused by alice: watching the error rate");

    // status, describe revision and the commit statuses say who paused it and why.
    expect((await instanceViews(h.store)).find((i) => i.instance === "web@n2")).toMatchObject({
      state: "held",
    });
    const progress = (await revisionProgress(h.store, sha))!.assignments[0]!;
    expect(progress).toMatchObject({
      state: "pending",
      pause: { by: "alice", why: "watching the error rate" },
    });
    expect(progress.description).toBe("1/3 nodes at generation 1; paused by alice: watching the error rate");
    const inputs = (await statusInputs(h.store, sha))!;
    expect(revisionStatuses(inputs.revision, inputs).map((s) => [s.context, s.state, s.description])).toEqual(
      [
        [
          "steward/fleet",
          "pending",
          "1/3 nodes at generation 1; web paused by alice: watching the error rate",
        ],
        ["steward/web", "pending", "1/3 nodes at generation 1; web paused by alice: watching the error rate"],
      ],
    );

    const [resumed] = await resumeRollouts(h.store, {
      revision: sha,
      by: "bob",
      reason: "error rate is flat",
      at: h.clock.now().toISOString(),
    });
    expect(resumed).toMatchObject({ recorded: true });
    // Recorded, not yet observed: the condition is still open until the rollout moves.
    expect(await h.store.conditions.get(condition!.id)).toMatchObject({ status: "open" });
    await h.hub.nudge({ revision: sha });
    await h.settle();
    expect(await states(h, nodes)).toEqual(["n1 converged", "n2 converged", "n3 converged"]);
    expect(await h.store.conditions.get(condition!.id)).toMatchObject({
      status: "resolved",
      resolution:
        "resumed by bob (error rate is flat); the rollout moves again (web@n2 started): 0 failed instances counted, within maxFailures 0",
    });
    expect((await h.store.conditions.history(condition!.id)).map((e) => [e.event, e.message])).toEqual([
      ["opened", condition!.message],
      [
        "updated",
        `rollout of web at ${sha.slice(0, 12)} resumed by bob: error rate is flat; no failure to go past; the condition closes when the rollout is seen moving`,
      ],
      ["resolved", expect.stringMatching(/^resumed by bob/)],
    ]);
    expect(await h.store.rollouts.decision("web", sha)).toMatchObject({ decision: "resume", by: "bob" });

    // Nothing is left to hold or to resume now.
    expect(
      await pauseRollouts(
        h.store,
        { revision: sha, by: "alice", reason: "again", at: h.clock.now().toISOString() },
        newId,
      ),
    ).toMatchObject([{ recorded: false, message: expect.stringMatching(/^nothing to pause/) }]);
    expect(
      await resumeRollouts(h.store, {
        revision: sha,
        by: "bob",
        reason: "again",
        at: h.clock.now().toISOString(),
      }),
    ).toMatchObject([{ recorded: false, message: expect.stringMatching(/^nothing to resume/) }]);
    await expect(
      resumeRollouts(h.store, { revision: sha, assignment: "db", by: "bob", reason: "x", at: "" }),
    ).rejects.toThrow(/has no rollout of "db" \(it rolls out web\): fix --assignment/);
  });

  it("hub - answering RolloutPaused with --outcome resume goes on past the failures seen; a new failure pauses again, naming only it", async () => {
    const nodes = ["n1", "n2", "n3", "n4"];
    const h = await startHarness({
      files: {
        ...fleet(nodes, ["n1", "n3"]),
        "assignments/web.yaml": web(nodes, { maxInFlight: 1, maxFailures: 0 }),
      },
    });
    const { sha } = await h.commit();
    await h.settle();
    expect(await states(h, nodes)).toEqual([
      "n1 blocked",
      "n2 held (paused)",
      "n3 held (paused)",
      "n4 held (paused)",
    ]);
    const [first] = await h.store.conditions.list({ type: "RolloutPaused", status: "open" });
    const task = (await h.store.tasks.ofCondition(first!.id))!;

    // Answering without a decision is fine too (what was done is recorded); the pause stays.
    await expect(resolveTask(h.store, task.id, "carol", "", h.clock.now().toISOString())).rejects.toThrow(
      /say what you did/,
    );
    await resolveTask(
      h.store,
      task.id,
      "carol",
      "n1 is being rebuilt: go on without it",
      h.clock.now().toISOString(),
      "resume",
    );
    await h.hub.nudge({ revision: sha });
    await h.settle();

    expect(await states(h, nodes)).toEqual(["n1 blocked", "n2 converged", "n3 blocked", "n4 held (paused)"]);
    expect(await h.store.conditions.get(first!.id)).toMatchObject({
      status: "resolved",
      resolution: expect.stringMatching(
        /^resumed by carol \(n1 is being rebuilt: go on without it\), past web@n1; the rollout moves again \(web@n2 started\)/,
      ),
    });
    expect(await h.store.rollouts.decision("web", sha)).toMatchObject({
      decision: "resume",
      by: "carol",
      taskId: task.id,
      accepted: ["web@n1"],
    });
    const [second] = await h.store.conditions.list({ type: "RolloutPaused", status: "open" });
    expect(second!.id).not.toBe(first!.id);
    expect(second!.message).toContain("1 instance failed (maxFailures 0): web@n3 blocked");
    expect(second!.message).not.toContain("web@n1");
    expect((await revisionProgress(h.store, sha))!.assignments[0]!.pause).toMatchObject({
      reason: "MaxFailuresExceeded",
      instances: [{ instance: "web@n3", status: "blocked" }],
    });
  });
});
