/**
 * No state in the working directory: an agent's default state directory is /var/lib/steward for
 * root and $XDG_STATE_HOME/steward (or ~/.local/state/steward) otherwise, and an agent that finds
 * the state an older agent left in `.steward/agent` of its working directory moves it there — its
 * run-once records kept (nothing runs twice), its services adopted (the same processes), and a
 * one-shot still running when the move happens writing its exit status where the new agent finds
 * it. The agents are real `steward agent apply` processes, as the SSH transport runs them.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { defaultStateDir } from "../../src/agent/state.js";
import type { AgentReply, Resource } from "../../src/model/generated.js";
import { binPath } from "../helpers/cli.js";
import { testAgentFile } from "../transport/ssh/fixtures.js";
import { bundle, eventually, killServices } from "./helpers.js";

const NOBODY = 65534;
const dirs: string[] = [];
const states: string[] = [];
afterAll(() => {
  for (const state of states) killServices(state);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function workspace(owner?: number): string {
  const dir = mkdtempSync(join(tmpdir(), "steward-state-move-"));
  dirs.push(dir);
  chmodSync(dir, 0o755);
  for (const sub of ["work", "root"]) mkdirSync(join(dir, sub));
  if (owner !== undefined)
    for (const path of [dir, join(dir, "work"), join(dir, "root")]) chownSync(path, owner, owner);
  return dir;
}

/** `steward [--state S] agent apply --bundle FILE --root ROOT --json` in `cwd`, as root or as nobody. */
function apply(options: {
  cwd: string;
  root: string;
  bundle: object;
  state?: string;
  env?: NodeJS.ProcessEnv;
  as?: number;
}) {
  const file = join(options.cwd, `bundle-${Date.now()}-${Math.random()}.json`);
  writeFileSync(file, JSON.stringify(options.bundle));
  if (options.as !== undefined) chownSync(file, options.as, options.as);
  // Nobody may not read the checkout (a clone under a 0700 directory): it runs the single-file
  // agent, copied into its own workspace.
  const entry = options.as !== undefined ? agentCopyIn(dirname(options.cwd)) : binPath;
  const argv = [
    process.execPath,
    entry,
    ...(options.state ? ["--state", options.state] : []),
    "agent",
    "apply",
    "--bundle",
    file,
    "--root",
    options.root,
    "--json",
  ];
  const command =
    options.as !== undefined
      ? ["setpriv", `--reuid=${options.as}`, `--regid=${options.as}`, "--clear-groups", ...argv]
      : argv;
  const run = spawnSync(command[0]!, command.slice(1), {
    cwd: options.cwd,
    env: { PATH: process.env.PATH, ...options.env },
    encoding: "utf8",
    timeout: 60_000,
  });
  return {
    code: run.status,
    stderr: run.stderr,
    reply: run.stdout ? (JSON.parse(run.stdout) as AgentReply) : undefined,
  };
}

/** The single-file agent (scripts/build-agent.mjs), copied into `dir` for a user who may read only that. */
function agentCopyIn(dir: string): string {
  const copy = join(dir, "steward-agent.mjs");
  if (!existsSync(copy)) {
    copyFileSync(testAgentFile(), copy);
    chmodSync(copy, 0o644);
  }
  return copy;
}

function servicePid(reply: AgentReply | undefined): number | undefined {
  const service = reply?.report.instances[0]?.resources.find((r) => r.kind === "service");
  return (service?.observed as { pid?: number } | undefined)?.pid;
}

describe("agent state - the default state directory", () => {
  it("agent state - root keeps it in /var/lib/steward, anyone else under XDG_STATE_HOME or ~/.local/state", () => {
    const cases: [NodeJS.ProcessEnv, number, string][] = [
      [{ HOME: "/root", XDG_STATE_HOME: "/x" }, 0, "/var/lib/steward"],
      [{ HOME: "/home/ana", XDG_STATE_HOME: "/home/ana/.state" }, 1000, "/home/ana/.state/steward"],
      [{ HOME: "/home/ana" }, 1000, "/home/ana/.local/state/steward"],
      // The XDG spec: a relative XDG_STATE_HOME is invalid and ignored.
      [{ HOME: "/home/ana", XDG_STATE_HOME: "state" }, 1000, "/home/ana/.local/state/steward"],
    ];
    for (const [env, uid, expected] of cases)
      expect(defaultStateDir(env, uid), JSON.stringify(env)).toBe(expected);
  });
});

describe("agent state - moved from the old default, nothing lost", () => {
  it("agent state - an agent without --state moves .steward/agent to its default: run-once records kept, services adopted", () => {
    const dir = workspace(NOBODY);
    const work = join(dir, "work");
    const counter = join(dir, "root", "ran");
    const resources: Resource[] = [
      { kind: "command", name: "migrate", run: ["sh", "-c", `echo ran >> ${counter}`] },
      { kind: "service", name: "sleeper", exec: ["sh", "-c", "while true; do sleep 1; done"] },
    ];
    const first = bundle({ resources, roots: ["/srv"] });
    const old = join(work, ".steward/agent");
    // What an older agent did: state in the directory it was started in.
    const before = apply({
      cwd: work,
      root: join(dir, "root"),
      bundle: first,
      state: old,
      as: NOBODY,
      env: { HOME: dir },
    });
    expect(before.reply?.result.outcome, before.stderr).toBe("succeeded");
    states.push(old);
    const pid = servicePid(before.reply);
    expect(pid).toBeGreaterThan(0);
    expect(readFileSync(counter, "utf8")).toBe("ran\n");

    // This agent, started in the same directory with no --state: its default is XDG_STATE_HOME's.
    const xdg = join(dir, "xdg");
    const after = apply({
      cwd: work,
      root: join(dir, "root"),
      bundle: { ...first, attemptId: `${first.attemptId}2` },
      as: NOBODY,
      env: { HOME: dir, XDG_STATE_HOME: xdg },
    });
    const moved = join(xdg, "steward");
    states.push(moved);
    expect(after.stderr).toBe(
      `steward: moved this agent's state from ${old} (the old default) to ${moved}, leaving a link in its place: run-once records and supervised services carry over\n`,
    );
    expect(after.reply?.result.outcome).toBe("succeeded");
    expect(readFileSync(counter, "utf8")).toBe("ran\n");
    expect(servicePid(after.reply)).toBe(pid);
    expect(after.reply?.result.resources.map((r) => [r.name, r.action])).toEqual([
      ["migrate", "unchanged"],
      ["sleeper", "unchanged"],
    ]);
    expect(lstatSync(old).isSymbolicLink()).toBe(true);
    expect(readlinkSync(old)).toBe(moved);
    for (const entry of ["runonce", "services", "instances"])
      expect(existsSync(join(moved, entry)), entry).toBe(true);
    expect(lstatSync(moved).isDirectory()).toBe(true);

    // Once moved, it is not moved again, and nothing more is said.
    const again = apply({
      cwd: work,
      root: join(dir, "root"),
      bundle: { ...first, attemptId: `${first.attemptId}3` },
      as: NOBODY,
      env: { HOME: dir, XDG_STATE_HOME: xdg },
    });
    expect(again.stderr).toBe("");
    expect(servicePid(again.reply)).toBe(pid);
  });

  it("agent state - a one-shot still running when its agent died and the state moved ends where the next agent finds it: nothing lost, nothing run twice", async () => {
    const dir = workspace();
    const work = join(dir, "work");
    const started = join(dir, "started");
    const done = join(dir, "done");
    const slow = bundle({
      roots: ["/srv"],
      resources: [
        {
          kind: "command",
          name: "slow",
          run: ["sh", "-c", `echo > ${started}; sleep 2; echo done >> ${done}`],
        },
      ],
    });
    const old = join(work, ".steward/agent");
    const file = join(work, "slow.json");
    writeFileSync(file, JSON.stringify(slow));
    const dying: ChildProcess = spawn(
      process.execPath,
      [binPath, "--state", old, "agent", "apply", "--bundle", file, "--root", join(dir, "root"), "--json"],
      { cwd: work, stdio: "ignore" },
    );
    await eventually(() => existsSync(started), 20_000, "the one-shot to start");
    dying.kill("SIGKILL");
    await new Promise((resolve) => dying.once("exit", resolve));
    expect(existsSync(done)).toBe(false);

    // The next agent moves the state while the one-shot still runs, and waits for it.
    const moved = join(dir, "state");
    const next = apply({
      cwd: work,
      root: join(dir, "root"),
      bundle: { ...slow, attemptId: `${slow.attemptId}2` },
      state: moved,
    });
    expect(next.stderr).toMatch(/^steward: moved this agent's state from /);
    expect(next.reply?.result.outcome).toBe("succeeded");
    expect(next.reply?.result.resources[0]).toMatchObject({ name: "slow" });
    expect(readFileSync(done, "utf8")).toBe("done\n");
    const instance = next.reply!.report.instances[0]!;
    expect(instance.resources[0]).toMatchObject({ status: "ok" });
    expect(JSON.stringify(next.reply)).not.toMatch(/OneShotInterrupted|interrupted/);
  });
});
