/**
 * Interrupted one-shots at the hub: a run that left no outcome becomes `OneShotInterrupted`, a
 * condition that needs a person (a task); the instance is not converged while it is open, a newer
 * generation is not held back by it, and the answer — `ran` or `rerun` — reaches the agent, which
 * records the run as done or runs it once more, never twice.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/io.js";
import { runCli } from "../helpers/cli.js";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { type Harness, startHarness } from "./helpers/harness.js";

const steward = (dir: string, ...argv: string[]) => runCli(["--state", dir, ...argv], dir, { USER: "alice" });

/**
 * A migration that counts its runs, then — unless /srv/ok exists — kills its own session before
 * its wrapper can write an exit status: an outcome as lost as after a crash, without one.
 */
function migration(version: string) {
  return assignmentYaml("db", {
    nodes: ["n1"],
    resources: [
      { kind: "directory", name: "srv", path: "/srv" },
      shell(
        "migrate",
        'echo run >> "$STEWARD_ROOT/srv/count"; [ -e "$STEWARD_ROOT/srv/ok" ] || kill -KILL 0',
      ),
      file("version", version),
    ],
  });
}

function count(h: Harness): number {
  const text = h.read("n1", "/srv/count");
  return text ? text.trim().split("\n").length : 0;
}

/** Lets the next runs of the migration succeed. */
function allow(h: Harness): void {
  writeFileSync(join(h.root, "n1", "srv", "ok"), "");
}

async function openTask(h: Harness, generation: number) {
  const condition = (await h.store.conditions.list({ status: "open", type: "OneShotInterrupted" })).find(
    (c) => c.generation === generation,
  );
  expect(condition, `an open OneShotInterrupted at generation ${generation}`).toBeDefined();
  return { condition: condition!, task: (await h.store.tasks.ofCondition(condition!.id))! };
}

describe("hub - interrupted one-shots", () => {
  it("hub - an interrupted one-shot is a condition with a task, its evidence and procedure; answered ran, nothing runs again", async () => {
    const h = await startHarness({ files: { ...nodes("n1"), "assignments/db.yaml": migration("v1") } });
    await h.commit();
    await h.settle();
    expect(count(h)).toBe(1);
    const intent = await h.intent("db@n1");
    expect(intent).toMatchObject({ status: "blocked", reason: "OneShotInterrupted" });
    const { condition, task } = await openTask(h, 1);
    expect(condition).toMatchObject({ subject: "db@n1", resolver: "operator", generation: 1 });
    expect(condition.message).toMatch(/migrate started at .* and left no outcome/);
    expect(condition.procedure).toMatch(/--outcome ran .*--outcome rerun/);
    const oneShots = condition.evidence.oneShots as { resource: string; run: string; evidence: string }[];
    expect(oneShots).toEqual([
      expect.objectContaining({
        resource: "migrate",
        run: intent.lastAttemptId,
        evidence: expect.stringContaining("no exit status"),
      }),
    ]);
    expect(task.status).toBe("open");
    // Not right while it is open.
    const status = await steward(h.dir, "status");
    expect(status.code).toBe(EXIT.problems);
    expect(status.stdout).toContain("OneShotInterrupted");

    // More attempts (a retry, a report) never run it.
    await h.advance(10 * 60_000);
    await h.report("n1");
    expect(count(h)).toBe(1);

    // The answer needs a decision.
    const undecided = await steward(h.dir, "tasks", "resolve", task.id, "--action", "looked");
    expect(undecided.code).not.toBe(EXIT.ok);
    expect(undecided.stderr).toMatch(/needs a decision: --outcome ran or --outcome rerun/);
    const answered = await steward(
      h.dir,
      "tasks",
      "resolve",
      task.id,
      "--outcome",
      "ran",
      "--action",
      "checked the schema version",
    );
    expect(answered.code).toBe(EXIT.ok);
    expect(answered.stdout).toMatch(/resolved by alice \(--outcome ran\): checked the schema version/);
    expect(answered.stdout).toMatch(/condition OneShotInterrupted closed/);
    await h.hub.nudge({ node: "n1" });
    // The CLI stamps the answer with the wall clock; the harness's clock is a fake one behind it.
    await h.advance(1_000);
    expect(count(h)).toBe(1);
    expect((await h.intent("db@n1")).status).toBe("converged");
    const resolved = (await h.store.conditions.get(condition.id))!;
    expect(resolved.status).toBe("resolved");
    expect(await h.store.tasks.get(task.id)).toMatchObject({
      status: "resolved",
      outcome: "ran",
      resolvedBy: "alice",
    });
    expect((await steward(h.dir, "status")).code).toBe(EXIT.ok);
  });

  it("hub - answered rerun, the one-shot runs once more through the ordinary path", async () => {
    const h = await startHarness({ files: { ...nodes("n1"), "assignments/db.yaml": migration("v1") } });
    await h.commit();
    await h.settle();
    const { task } = await openTask(h, 1);
    allow(h);
    const answered = await steward(
      h.dir,
      "tasks",
      "resolve",
      task.id,
      "--outcome",
      "rerun",
      "--action",
      "restored the backup",
    );
    expect(answered.code).toBe(EXIT.ok);
    await h.hub.nudge({ node: "n1" });
    // The CLI stamps the answer with the wall clock; the harness's clock is a fake one behind it.
    await h.advance(1_000);
    expect(count(h)).toBe(2);
    expect((await h.intent("db@n1")).status).toBe("converged");
    // Answered once, done once: more attempts of the generation find it ran.
    await h.report("n1");
    await h.advance(60_000);
    expect(count(h)).toBe(2);
    expect(await h.store.conditions.list({ status: "open" })).toEqual([]);
  });

  it("hub - a newer generation is not held back; the older generation's question stays open until answered", async () => {
    const h = await startHarness({ files: { ...nodes("n1"), "assignments/db.yaml": migration("v1") } });
    await h.commit();
    await h.settle();
    const first = await openTask(h, 1);
    allow(h);
    h.write({ "assignments/db.yaml": migration("v2") });
    await h.commit();
    await h.settle();
    expect(await h.intent("db@n1")).toMatchObject({ generation: 2, status: "converged" });
    expect(count(h)).toBe(2);
    expect(h.read("n1", "/srv/version")).toBe("v2");
    // The question about generation 1 is still open, and the fleet is not right.
    expect((await h.store.conditions.get(first.condition.id))!.status).toBe("open");
    expect((await h.store.tasks.get(first.task.id))!.status).toBe("open");
    expect((await steward(h.dir, "status")).code).toBe(EXIT.problems);
    // Answering it records the answer and runs nothing: generation 1 is no longer desired.
    const answered = await steward(
      h.dir,
      "tasks",
      "resolve",
      first.task.id,
      "--outcome",
      "rerun",
      "--action",
      "checked",
    );
    expect(answered.code).toBe(EXIT.ok);
    expect(answered.stdout).toMatch(/condition OneShotInterrupted closed/);
    await h.hub.nudge({ node: "n1" });
    // The CLI stamps the answer with the wall clock; the harness's clock is a fake one behind it.
    await h.advance(1_000);
    expect(count(h)).toBe(2);
    expect(await h.store.conditions.get(first.condition.id)).toMatchObject({
      status: "resolved",
      resolution: expect.stringContaining("no longer desired"),
    });
    expect((await steward(h.dir, "status")).code).toBe(EXIT.ok);
    // The answer reached the node (with an attempt that changed nothing else): it asks no more.
    expect((await h.store.observations.get("db@n1"))!.report.lostRuns).toBeUndefined();
    expect((await h.intent("db@n1")).status).toBe("converged");
  });

  it("hub - two generations interrupted in turn are two questions", async () => {
    const h = await startHarness({ files: { ...nodes("n1"), "assignments/db.yaml": migration("v1") } });
    await h.commit();
    await h.settle();
    h.write({ "assignments/db.yaml": migration("v2") });
    await h.commit();
    await h.settle();
    const open = await h.store.conditions.list({ status: "open", type: "OneShotInterrupted" });
    expect(open.map((c) => c.generation).sort()).toEqual([1, 2]);
    const tasks = await Promise.all(open.map(async (c) => (await h.store.tasks.ofCondition(c.id))!.id));
    expect(new Set(tasks).size).toBe(2);
    expect(count(h)).toBe(2);
    expect(existsSync(join(h.root, "n1", "srv", "ok"))).toBe(false);
    // Not gating: what follows it was applied all the same.
    expect(readFileSync(join(h.root, "n1", "srv", "version"), "utf8")).toBe("v2");
  });
});
