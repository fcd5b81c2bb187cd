import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AgentReply, Report } from "../../../src/model/generated.js";
import type { ExecOutcome } from "../../../src/transport/ssh/connection.js";
import {
  interpretRun,
  LAUNCHER_EXIT,
  launcherScript,
  type RunContext,
  STARTED_LINE,
  uploadedAgentPath,
} from "../../../src/transport/ssh/launch.js";

const NODE_DIR = dirname(process.execPath);

/** Runs a launcher with /bin/sh as sshd would (through the login shell), in a fresh HOME. */
function runLauncher(script: string, env: Record<string, string>, stdin = "") {
  const run = spawnSync("/bin/sh", ["-c", script], { env, input: stdin, encoding: "utf8" });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe("ssh launcher", () => {
  const home = mkdtempSync(join(tmpdir(), "steward-launch-"));
  const id = "0.0.0-test-0123456789ab";

  it("ssh launcher - stops with its own exit status when node is missing, too old, or the agent is absent", () => {
    const script = launcherScript({ kind: "uploaded", id }, ["agent", "observe", "--json"]);
    const missing = runLauncher(script, { HOME: home, PATH: "/nonexistent" });
    expect([missing.code, missing.stderr.trim()]).toEqual([
      LAUNCHER_EXIT.noNode,
      "steward-ssh: no-node node not found on PATH=/nonexistent",
    ]);

    const oldBin = join(home, "old-bin");
    mkdirSync(oldBin, { recursive: true });
    writeFileSync(join(oldBin, "node"), "#!/bin/sh\necho v16.20.2\n");
    chmodSync(join(oldBin, "node"), 0o755);
    const old = runLauncher(script, { HOME: home, PATH: `${oldBin}:/usr/bin:/bin` });
    expect(old.code).toBe(LAUNCHER_EXIT.oldNode);
    expect(old.stderr).toContain("node v16.20.2 found at");

    const absent = runLauncher(script, { HOME: home, PATH: `${NODE_DIR}:/usr/bin:/bin` });
    expect([absent.code, absent.stderr.trim()]).toEqual([
      LAUNCHER_EXIT.noAgent,
      `steward-ssh: no-agent ${home}/${uploadedAgentPath(id)}`,
    ]);
  });

  it("ssh launcher - says it started, then hands the arguments and standard input to the agent untouched", () => {
    const agent = join(home, uploadedAgentPath(id));
    mkdirSync(dirname(agent), { recursive: true });
    // Stands where the uploaded agent goes; prints what it was given.
    writeFileSync(
      agent,
      "let input = ''; process.stdin.on('data', (c) => (input += c)); process.stdin.on('end', () => console.log(JSON.stringify({ argv: process.argv.slice(2), input, cwd: process.cwd() })));\n",
    );
    const script = launcherScript({ kind: "uploaded", id }, ["agent", "apply", "--bundle", "-", "--json"]);
    const run = runLauncher(
      script,
      { HOME: home, PATH: `${NODE_DIR}:/usr/bin:/bin` },
      '{"bundle":"it\'s $HOME"}',
    );
    expect(run.code).toBe(0);
    expect(run.stderr.trim()).toBe(STARTED_LINE);
    // The state directory is named, never left to the working directory; the launcher still starts
    // in $HOME, where an older agent's .steward/agent is found and moved.
    expect(JSON.parse(run.stdout)).toEqual({
      argv: ["--state", `${home}/.local/state/steward`, "agent", "apply", "--bundle", "-", "--json"],
      input: '{"bundle":"it\'s $HOME"}',
      cwd: home,
    });
    const xdg = runLauncher(script, {
      HOME: home,
      XDG_STATE_HOME: "/srv/state",
      PATH: `${NODE_DIR}:/usr/bin:/bin`,
    });
    expect(JSON.parse(xdg.stdout).argv.slice(0, 2)).toEqual(["--state", "/srv/state/steward"]);
    // A relative XDG_STATE_HOME is invalid (the XDG spec): ignored, as the agent ignores it.
    const relative = runLauncher(script, {
      HOME: home,
      XDG_STATE_HOME: "state",
      PATH: `${NODE_DIR}:/usr/bin:/bin`,
    });
    expect(JSON.parse(relative.stdout).argv.slice(0, 2)).toEqual(["--state", `${home}/.local/state/steward`]);
  });

  it("ssh launcher - checks an operator's steward command exists before starting it", () => {
    const script = launcherScript(
      { kind: "installed", command: "/opt/steward/bin/steward --state /var/lib/steward" },
      ["agent", "observe", "--json"],
    );
    const run = runLauncher(script, { HOME: home, PATH: "/usr/bin:/bin" });
    expect(run.code).toBe(LAUNCHER_EXIT.noSteward);
    expect(run.stderr).toContain("/opt/steward/bin/steward not found");
  });
});

describe("ssh launcher - what a run means", () => {
  const report: Report = {
    apiVersion: "steward.dev/v1",
    kind: "Report",
    node: "n1",
    takenAt: "2026-01-01T00:00:00.000Z",
    agent: { version: "0.1.0" },
    instances: [],
  };
  const reply: AgentReply = {
    result: {
      attemptId: "01J00000000000000000000000",
      node: "n1",
      assignment: "a",
      generation: 3,
      outcome: "failed",
      failureClass: "permanent",
      reason: "ImageNotFound",
      resources: [],
      startedAt: "2026-01-01T00:00:00.000Z",
      finishedAt: "2026-01-01T00:00:01.000Z",
    },
    report,
  };
  const context: RunContext = {
    node: "n1",
    label: "root@h:22",
    started: true,
    timedOut: false,
    timeoutMs: 1000,
  };
  function outcome(partial: Partial<ExecOutcome>): ExecOutcome {
    return { code: 0, stdout: Buffer.alloc(0), stderr: "", dropped: false, truncated: false, ...partial };
  }

  const cases: { name: string; run: ExecOutcome; context?: Partial<RunContext>; expect: unknown }[] = [
    {
      name: "a reply with a non-zero exit is delivered: its result says the class",
      run: outcome({ code: 1, stdout: Buffer.from(JSON.stringify(reply)) }),
      expect: { kind: "reply", reply },
    },
    {
      name: "output before the reply line is tolerated",
      run: outcome({ stdout: Buffer.from(`Welcome to host\n${JSON.stringify(reply)}\n`) }),
      expect: { kind: "reply", reply },
    },
    {
      name: "a dropped session after the start is lost",
      run: outcome({ code: null, dropped: true }),
      expect: { kind: "lost", reason: "SessionDropped" },
    },
    {
      name: "an agent killed by a signal is lost",
      run: outcome({ code: null, signal: "KILL" }),
      expect: { kind: "lost", reason: "AgentKilled" },
    },
    {
      name: "a timeout after the start is lost",
      run: outcome({ code: null, dropped: true }),
      context: { timedOut: true },
      expect: { kind: "lost", reason: "Timeout" },
    },
    {
      name: "an exit without a valid reply after the start is lost",
      run: outcome({ code: 2, stdout: Buffer.from('{"result":{}}'), stderr: `${STARTED_LINE}\nboom\n` }),
      expect: { kind: "lost", reason: "NoAnswer" },
    },
    {
      name: "an agent refusing the request itself (exit 2, one line) applied nothing",
      run: outcome({
        code: 2,
        stderr: `${STARTED_LINE}\nsteward: bundle is for node "n2" but this agent is node "n1"\n`,
      }),
      expect: {
        kind: "rejected",
        message:
          'node "n1" (root@h:22): the agent refused: bundle is for node "n2" but this agent is node "n1"',
      },
    },
    {
      name: "an internal error may have come half-way: lost, not rejected",
      run: outcome({ code: 2, stderr: `${STARTED_LINE}\nsteward: internal error: boom\n` }),
      expect: { kind: "lost", reason: "NoAnswer" },
    },
    {
      name: "a dropped session before the start cannot be proven unstarted: ambiguous",
      run: outcome({ code: null, dropped: true }),
      context: { started: false },
      expect: { kind: "refused", failureClass: "ambiguous", reason: "SessionDropped" },
    },
    {
      name: "no node is permanent",
      run: outcome({
        code: LAUNCHER_EXIT.noNode,
        stderr: "steward-ssh: no-node node not found on PATH=/x\n",
      }),
      context: { started: false },
      expect: { kind: "refused", failureClass: "permanent", reason: "NoNodeRuntime" },
    },
    {
      name: "an agent refusing an old node as its first statement is permanent: nothing ran",
      run: outcome({
        code: LAUNCHER_EXIT.oldNode,
        stderr: `${STARTED_LINE}\nsteward-ssh: old-node node v18.19.1 found at /usr/bin/node (the agent needs Node.js >= 20)\n`,
      }),
      expect: { kind: "refused", failureClass: "permanent", reason: "NoNodeRuntime" },
    },
    {
      name: "a launcher that fails on its own (nologin shell) is permanent",
      run: outcome({ code: 1, stderr: "This account is currently not available.\n" }),
      context: { started: false },
      expect: { kind: "refused", failureClass: "permanent", reason: "LauncherFailed" },
    },
  ];
  for (const testCase of cases) {
    it(`ssh launcher - ${testCase.name}`, () => {
      const verdict = interpretRun(testCase.run, "reply", { ...context, ...testCase.context });
      const summary =
        verdict.kind === "refused"
          ? { kind: verdict.kind, failureClass: verdict.error.failureClass, reason: verdict.error.reason }
          : verdict.kind === "lost"
            ? { kind: verdict.kind, reason: verdict.reason }
            : verdict;
      expect(summary).toEqual(testCase.expect);
    });
  }

  it("ssh launcher - an observation accepts a bare Report or one wrapped as {report}", () => {
    for (const stdout of [JSON.stringify(report), JSON.stringify({ report })])
      expect(interpretRun(outcome({ stdout: Buffer.from(stdout) }), "report", context)).toEqual({
        kind: "report",
        report,
      });
  });
});
