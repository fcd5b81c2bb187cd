/**
 * One-shots across crashes: a real agent process is SIGKILLed while its command runs, and a later
 * agent on the same state directory must never start a second copy — it waits for a run that still
 * runs, reads the exit status of one that ended meanwhile, and reports one that left no exit status
 * `interrupted` until a person decides (or its `creates`/`unless` check does).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readProcess } from "../../src/agent/proc.js";
import { nodeProcessRunner, type ProcessRunner } from "../../src/agent/runner.js";
import type { Bundle, CommandResource, OneShotDecision } from "../../src/model/generated.js";
import { stewardEntry } from "../hub/helpers/process.js";
import { again, bundle, eventually, type Sandbox, sandbox } from "./helpers.js";

const steward = join(dirname(fileURLToPath(import.meta.url)), "../../bin/steward.js");

let box: Sandbox;
let agents: ChildProcess[] = [];
beforeEach(() => {
  box = sandbox();
  mkdirSync(box.host("/srv"), { recursive: true });
});
afterEach(async () => {
  for (const child of agents) child.kill("SIGKILL");
  agents = [];
  killRuns(box.state);
  await box.close();
});

/** Kills every one-shot still running from this state directory (they run in sessions of their own). */
function killRuns(state: string): void {
  const dir = join(state, "runonce");
  if (!existsSync(dir)) return;
  for (const file of readdirSync(dir)) {
    const records = JSON.parse(readFileSync(join(dir, file), "utf8")) as Record<string, { pid?: number }>;
    for (const record of Object.values(records))
      if (record.pid)
        try {
          process.kill(-record.pid, "SIGKILL");
        } catch {
          // Already gone.
        }
  }
}

/**
 * A command that appends a line to /srv/runs.log, prints, then sleeps for as many seconds as
 * /srv/delay says (default `seconds`): long enough to kill its agent meanwhile, and short once the
 * test rewrites the delay — the spec, and so the generation, stay the same.
 */
function slow(seconds: number, extra: Partial<CommandResource> = {}): CommandResource {
  writeFileSync(join(box.root, "srv", "delay"), String(seconds));
  return {
    kind: "command",
    name: "migrate",
    run: [
      "sh",
      "-c",
      'echo "run $STEWARD_ATTEMPT" >> "$STEWARD_ROOT/srv/runs.log"; echo working; sleep "$(cat "$STEWARD_ROOT/srv/delay")"',
    ],
    ...extra,
  };
}

/** Makes the next runs of `slow` quick. */
function noDelay(): void {
  writeFileSync(join(box.root, "srv", "delay"), "0");
}

function runs(): string[] {
  const path = box.host("/srv/runs.log");
  return existsSync(path) ? readFileSync(path, "utf8").trim().split("\n") : [];
}

/** The journal of the instance's commands, as the agent keeps it. */
function journal(): Record<string, { attemptId?: string; pid?: number; at?: string; exitCode?: number }> {
  return JSON.parse(readFileSync(join(box.state, "runonce", "demo.json"), "utf8"));
}

/** Starts a real agent process applying `attempt`, and kills it once the command has started. */
async function killAgentWhileItRuns(attempt: Bundle): Promise<void> {
  const file = join(box.dir, `${attempt.attemptId}.json`);
  writeFileSync(file, JSON.stringify(attempt));
  const child = spawn(
    process.execPath,
    [steward, "--state", box.state, "agent", "apply", "--bundle", file, "--root", box.root, "--json"],
    { stdio: "ignore" },
  );
  agents.push(child);
  const before = runs().length;
  await eventually(
    () => {
      const record = existsSync(join(box.state, "runonce", "demo.json")) ? journal().migrate : undefined;
      return record?.attemptId === attempt.attemptId && record.pid !== undefined && runs().length > before;
    },
    10_000,
    "the command to start",
  );
  // Let it print what it prints first (its evidence).
  await new Promise((resolve) => setTimeout(resolve, 100));
  child.kill("SIGKILL");
  await new Promise((resolve) => child.once("exit", resolve));
}

/** The live (not zombie) processes of a process group: a run's wrapper and whatever it started. */
function liveMembersOf(group: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const fields = readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]!.split(" ");
      if (Number(fields[2]) === group && fields[0] !== "Z") members.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return members;
}

/** Kills a run's whole session: the command and its wrapper die before the wrapper writes anything. */
async function killRun(): Promise<void> {
  const pid = journal().migrate!.pid!;
  process.kill(-pid, "SIGKILL");
  await eventually(() => readProcess(pid) === undefined, 5000, "the run to die");
}

describe("agent one-shots across crashes", () => {
  it("agent one-shot - a run still going when the next attempt comes is waited for, never started twice", async () => {
    const attempt = bundle({ resources: [slow(1.5)] });
    await killAgentWhileItRuns(attempt);
    const reply = await box.agent().apply(again(attempt));
    expect(reply.result.outcome).toBe("succeeded");
    expect(reply.result.resources[0]).toMatchObject({
      action: "ran",
      message: expect.stringContaining(`waited for the run started`),
      evidence: expect.stringContaining("working"),
    });
    expect(runs()).toEqual([`run ${attempt.attemptId}`]);
    expect(journal().migrate).toMatchObject({ exitCode: 0, outcomeFrom: "wrapper" });
    // And for good: yet another attempt of the generation finds it done.
    const third = await box.agent().apply(again(attempt));
    expect(third.result.resources[0]!.action).toBe("unchanged");
    expect(runs()).toHaveLength(1);
  });

  it("agent one-shot - a run that ended while no agent ran is known by the exit status its wrapper wrote", async () => {
    const attempt = bundle({ resources: [slow(0.3)] });
    await killAgentWhileItRuns(attempt);
    await eventually(() => existsSync(join(box.state, "runs", "demo", "migrate", attempt.attemptId, "exit")));
    const reply = await box.agent().apply(again(attempt));
    expect(reply.result.outcome).toBe("succeeded");
    expect(reply.result.resources[0]).toMatchObject({
      action: "unchanged",
      message: "ran for generation 1 (outcome read from its exit status)",
    });
    expect(runs()).toHaveLength(1);

    const failing = bundle({
      resources: [
        { ...slow(0.3), run: ["sh", "-c", 'echo x >> "$STEWARD_ROOT/srv/runs.log"; sleep 0.3; exit 4'] },
      ],
      generation: 2,
    });
    await killAgentWhileItRuns(failing);
    await eventually(() => existsSync(join(box.state, "runs", "demo", "migrate", failing.attemptId, "exit")));
    // A known failure is retried by the ordinary path, as any failed command is.
    const retried = await box.agent().apply(again(failing));
    expect(retried.result.resources[0]).toMatchObject({ action: "failed", reason: "CommandFailed" });
    expect(runs()).toHaveLength(3);
  });

  it("agent one-shot - a run gone without an exit status is interrupted, with its evidence, and never run again on the agent's own judgement", async () => {
    const attempt = bundle({ resources: [slow(5), { kind: "file", path: "/srv/after", content: "x" }] });
    await killAgentWhileItRuns(attempt);
    await killRun();
    const reply = await box.agent().apply(again(attempt));
    expect(reply.result).toMatchObject({
      outcome: "failed",
      failureClass: "permanent",
      reason: "OneShotInterrupted",
    });
    const outcome = reply.result.resources[0]!;
    expect(outcome).toMatchObject({ action: "failed", reason: "OneShotInterrupted" });
    expect(outcome.message).toContain(`by attempt ${attempt.attemptId}`);
    expect(outcome.evidence).toMatch(/the process is gone and left no exit status/);
    expect(outcome.evidence).toContain("working");
    const reported = reply.report.instances[0]!.resources[0]!;
    expect(reported.status).toBe("interrupted");
    expect(reported.evidence).toContain("working");
    expect(reply.report.instances[0]!.converged).toBe(false);
    // Again and again: never run.
    await box.agent().apply(again(attempt));
    expect(runs()).toHaveLength(1);
    // A new generation supersedes as always: its run is its own.
    const next = await box.agent().apply(bundle({ resources: [slow(0)], generation: 2 }));
    expect(next.result.outcome).toBe("succeeded");
    expect(runs()).toHaveLength(2);
  });

  it("agent one-shot - the agent journals the start before the spawn and the pid right after", async () => {
    // What the journal holds at the moment of the spawn, seen by the runner itself.
    const atSpawn: (Record<string, unknown> | undefined)[] = [];
    const runner: ProcessRunner = {
      ...nodeProcessRunner,
      spawnDetached: (request) => {
        atSpawn.push(journal().migrate as Record<string, unknown> | undefined);
        return nodeProcessRunner.spawnDetached(request);
      },
    };
    const quick = bundle({ resources: [slow(0)] });
    await box.agent({ runner }).apply(quick);
    expect(atSpawn).toEqual([
      { generation: 1, attemptId: quick.attemptId, startedAt: expect.any(String), timeoutMs: 300_000 },
    ]);

    const attempt = bundle({ resources: [slow(1)], generation: 2 });
    await killAgentWhileItRuns(attempt);
    const record = journal().migrate as Record<string, unknown>;
    expect(record).toMatchObject({ generation: 2, attemptId: attempt.attemptId });
    expect(record.startedAt).toEqual(expect.any(String));
    expect(record.startTime).toMatch(/^\d+$/);
    expect(record.at).toBeUndefined();
    // The run is in a session of its own: it outlived its agent.
    expect(readProcess(record.pid as number)).toBeDefined();
  });

  it("agent one-shot - a guarded command interrupted is decided by its check again", async () => {
    // The check says done (what it creates is there): skipped, not run.
    const done = bundle({
      resources: [
        slow(5, {
          run: [
            "sh",
            "-c",
            'echo run >> "$STEWARD_ROOT/srv/runs.log"; : > "$STEWARD_ROOT/srv/made"; sleep 5',
          ],
          creates: "/srv/made",
        }),
      ],
    });
    await killAgentWhileItRuns(done);
    await killRun();
    const skipped = await box.agent().apply(again(done));
    expect(skipped.result.resources[0]).toMatchObject({
      action: "skipped",
      message: "creates /srv/made exists",
    });
    expect(runs()).toHaveLength(1);

    // The check says not done: it runs again, once.
    const notDone = bundle({
      resources: [slow(5, { unless: ["test", "-e", `${box.root}/srv/never`] })],
      generation: 2,
    });
    await killAgentWhileItRuns(notDone);
    await killRun();
    noDelay();
    const ran = await box.agent().apply(again(notDone));
    expect(ran.result.resources[0]!.action).toBe("ran");
    expect(runs()).toHaveLength(3);
    // A guarded run's lost outcome is never a question for a person: its check decides.
    expect(ran.report.instances[0]!.lostRuns).toBeUndefined();
  });

  it("agent one-shot - a person's answer: ran records it as done, rerun runs it once more, and neither applies twice", async () => {
    const attempt = bundle({ resources: [slow(5)] });
    await killAgentWhileItRuns(attempt);
    await killRun();
    expect((await box.agent().apply(again(attempt))).result.reason).toBe("OneShotInterrupted");
    const decision = (outcome: "ran" | "rerun", task: string): OneShotDecision => ({
      resource: "migrate",
      run: attempt.attemptId,
      outcome,
      task,
      by: "alice",
    });

    const recorded = await box.agent().apply({ ...again(attempt), decisions: [decision("ran", "T1")] });
    expect(recorded.result.outcome).toBe("succeeded");
    expect(recorded.result.resources[0]).toMatchObject({
      action: "unchanged",
      message: "recorded as ran for generation 1 by alice (task T1): not run again",
    });
    expect(runs()).toHaveLength(1);
    // Remembered without the decision too.
    expect((await box.agent().apply(again(attempt))).result.outcome).toBe("succeeded");

    // Generation 2 interrupted, then answered rerun.
    const second = bundle({ resources: [slow(5)], generation: 2 });
    await killAgentWhileItRuns(second);
    await killRun();
    noDelay();
    const rerun: Bundle = {
      ...again(second),
      decisions: [{ ...decision("rerun", "T2"), run: second.attemptId }],
    };
    const reran = await box.agent().apply(rerun);
    expect(reran.result.resources[0]!.action).toBe("ran");
    expect(runs()).toHaveLength(3);
    // The same answer delivered again runs nothing more.
    const redelivered = await box.agent().apply(again(rerun));
    expect(redelivered.result.resources[0]!.action).toBe("unchanged");
    expect(runs()).toHaveLength(3);
  });

  it("agent one-shot - a lost run a newer generation replaces stays a question in every report until a decision names it", async () => {
    const first = bundle({ resources: [slow(5)] });
    await killAgentWhileItRuns(first);
    await killRun();
    noDelay();
    // Generation 2 arrives before anyone looked: it runs, and generation 1's lost run is kept.
    const second = await box.agent().apply(bundle({ resources: [slow(0)], generation: 2 }));
    expect(second.result.outcome).toBe("succeeded");
    expect(runs()).toHaveLength(2);
    const question = {
      resource: "migrate",
      generation: 1,
      run: first.attemptId,
      startedAt: expect.any(String),
      evidence: expect.stringContaining("working"),
    };
    expect(second.report.instances[0]!.lostRuns).toEqual([question]);
    expect((await box.agent().observe()).instances[0]!.lostRuns).toEqual([question]);
    // The answer (with whatever attempt comes next) drops it, and runs nothing.
    const answered = await box.agent().apply({
      ...bundle({ resources: [slow(0)], generation: 2 }),
      decisions: [{ resource: "migrate", run: first.attemptId, outcome: "rerun", task: "T1", by: "alice" }],
    });
    expect(answered.report.instances[0]!.lostRuns).toBeUndefined();
    expect(runs()).toHaveLength(2);
  });

  it("agent one-shot - an agent killed between journalling the start and the pid finds the run by its argv and waits for it", async () => {
    const attempt = bundle({ resources: [slow(1.5)] });
    const file = join(box.dir, "attempt.json");
    writeFileSync(file, JSON.stringify(attempt));
    // The agent dies the moment the wrapper is spawned, before it can journal the pid.
    const entry = await stewardEntry(`
import { nodeProcessRunner } from "./src/agent/runner.ts";
const spawnDetached = nodeProcessRunner.spawnDetached;
nodeProcessRunner.spawnDetached = async (request) => {
  const child = await spawnDetached(request);
  if (request.awaited) process.kill(process.pid, "SIGKILL");
  return child;
};
`);
    const child = spawn(
      process.execPath,
      [entry, "--state", box.state, "agent", "apply", "--bundle", file, "--root", box.root],
      { stdio: "ignore" },
    );
    agents.push(child);
    await new Promise((resolve) => child.once("exit", resolve));
    expect(journal().migrate).toMatchObject({ attemptId: attempt.attemptId });
    expect(journal().migrate!.pid).toBeUndefined();
    const reply = await box.agent().apply(again(attempt));
    expect(reply.result.resources[0]).toMatchObject({
      action: "ran",
      message: expect.stringContaining("waited for the run started"),
    });
    expect(runs()).toEqual([`run ${attempt.attemptId}`]);
  });

  it("agent one-shot - a command that ignores SIGTERM is killed whole at its timeout: nothing of it runs beside the retry", async () => {
    const attempt = bundle({
      resources: [
        {
          kind: "command",
          name: "migrate",
          run: [
            "sh",
            "-c",
            `trap '' TERM; echo "run $STEWARD_ATTEMPT" >> "$STEWARD_ROOT/srv/runs.log"; sleep 30`,
          ],
          timeout: "1s",
        },
      ],
    });
    const reply = await box.agent().apply(attempt);
    expect(reply.result.resources[0]).toMatchObject({ action: "failed", reason: "CommandTimedOut" });
    expect(liveMembersOf(journal().migrate!.pid!)).toEqual([]);
  });

  it("agent one-shot - a guarded command killed while the agent watches is retried by the ordinary path, not asked about", async () => {
    const attempt = bundle({
      resources: [
        slow(5, {
          run: ["sh", "-c", 'echo run >> "$STEWARD_ROOT/srv/runs.log"; kill -KILL 0'],
          creates: "/srv/never",
        }),
      ],
    });
    const reply = await box.agent().apply(attempt);
    expect(reply.result).toMatchObject({
      outcome: "failed",
      failureClass: "transient",
      reason: "CommandKilled",
    });
    expect(reply.report.instances[0]!.resources[0]!.status).not.toBe("interrupted");
  });

  it("agent one-shot - an earlier generation's lost run stays a question though the newer generation blocks its command", async () => {
    const first = bundle({ resources: [slow(5)] });
    await killAgentWhileItRuns(first);
    await killRun();
    const gate: CommandResource = { kind: "command", name: "gate", run: ["false"], gating: true };
    const second = await box.agent().apply(bundle({ resources: [gate, slow(0)], generation: 2 }));
    expect(second.result.resources.map((r) => r.action)).toEqual(["failed", "blocked"]);
    expect(second.report.instances[0]!.lostRuns).toEqual([
      expect.objectContaining({ resource: "migrate", generation: 1, run: first.attemptId }),
    ]);
  });

  it("agent one-shot - an answer about a run that is still running changes nothing", async () => {
    const attempt = bundle({ resources: [slow(1.5)] });
    await killAgentWhileItRuns(attempt);
    const reply = await box.agent().apply({
      ...again(attempt),
      decisions: [{ resource: "migrate", run: attempt.attemptId, outcome: "ran", task: "T1", by: "alice" }],
    });
    // The run was waited for and its own outcome recorded, not the answer.
    expect(reply.result.resources[0]).toMatchObject({ action: "ran" });
    expect(journal().migrate).toMatchObject({ outcomeFrom: "wrapper" });
  });

  it("agent one-shot - a run past its timeout is killed even by an agent that only adopted it", async () => {
    const attempt = bundle({ resources: [slow(30, { timeout: "1s" })] });
    await killAgentWhileItRuns(attempt);
    const started = Date.now();
    const reply = await box.agent().apply(again(attempt));
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(reply.result.resources[0]).toMatchObject({ action: "failed", reason: "CommandTimedOut" });
    // Gone, all of it (or zombies no one reaps: not running either way).
    expect(liveMembersOf(journal().migrate!.pid!)).toEqual([]);
  });
});
