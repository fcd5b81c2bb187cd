/**
 * Every command, run for its main outcomes: the exit code it promises (0 fine, 1 problems found,
 * 2 usage or environment error, 3 converging or pending), that `-o json` prints JSON that parses,
 * and that every error is said the one way (`steward: ...`).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/io.js";
import { repoRoot, runCli } from "../helpers/cli.js";
import { assignmentYaml, file, nodes, shell } from "../hub/helpers/fleet.js";
import { type Harness, startHarness } from "../hub/helpers/harness.js";
import { runSteward } from "../hub/helpers/process.js";

const temporary: string[] = [];
afterEach(() => {
  for (const dir of temporary.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** The pid of a process that has ended. */
function deadPid(): number {
  return spawnSync(process.execPath, ["-e", ""]).pid;
}

/** A temporary directory, removed after the test. */
function workDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temporary.push(dir);
  return dir;
}

interface Case {
  /** What the row shows: `command - outcome`. */
  name: string;
  args: string[];
  code: number;
  /** `-o json` (or `--format json`) is appended and must parse; false for an error that prints none. */
  json?: boolean;
  /** The run's stderr, when it says something. */
  stderr?: RegExp;
}

/** Runs the rows in order (some change state for the next), each plainly and then with `-o json`. */
async function runCases(cwd: string, cases: Case[], jsonFlag: (c: Case) => string[] = () => ["-o", "json"]) {
  for (const c of cases) {
    const plain = await runCli(c.args, cwd, { USER: "alice" });
    expect({ name: c.name, code: plain.code, stderr: plain.stderr }).toEqual({
      name: c.name,
      code: c.code,
      stderr: c.stderr
        ? expect.stringMatching(c.stderr)
        : plain.code === EXIT.usage
          ? expect.stringMatching(/^steward: /)
          : plain.stderr,
    });
    if (plain.code === EXIT.usage) expect(plain.stderr, c.name).not.toMatch(/^error:|\nerror:|Usage:/);
    if (c.json === false) continue;
    const json = await runCli([...c.args, ...jsonFlag(c)], cwd, { USER: "alice" });
    expect({ name: c.name, code: json.code }).toEqual({ name: c.name, code: c.code });
    expect(() => JSON.parse(json.stdout), `${c.name}: -o json prints JSON`).not.toThrow();
  }
}

const failing = (budget: number) =>
  assignmentYaml("app", {
    nodes: ["n1"],
    resources: [file("conf", "v1"), shell("migrate", "echo 'psql: error: connection refused' >&2; exit 3")],
    budget: { attempts: budget, within: "1h" },
  });
const blocked = assignmentYaml("app", {
  nodes: ["n1"],
  resources: [{ kind: "command", name: "reload", run: ["/nonexistent/reload"] }],
});
const withConf = (content: string) =>
  assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", content)] });
const good = withConf("v1");

async function hub(files: Record<string, string>): Promise<Harness> {
  const h = await startHarness({ files: { ...nodes("n1"), ...files } });
  await h.commit("app");
  await h.settle();
  return h;
}

describe("cli - every command's exit codes and -o json", () => {
  it("cli - the hub's commands: status, get, describe, history, tasks, drain, undrain, sync", async () => {
    const converging = await hub({ "assignments/app.yaml": failing(10) });
    const s = (...args: string[]) => ["--state", converging.dir, ...args];
    const attempt = (await converging.intent("app@n1")).lastAttemptId!;
    const sha = (await converging.intent("app@n1")).revision;
    await runCases(converging.dir, [
      { name: "status - converging", args: s("status"), code: EXIT.converging },
      {
        name: "status --revision - pending",
        args: s("status", "--revision", sha.slice(0, 8)),
        code: EXIT.converging,
      },
      {
        name: "status --revision - unknown",
        args: s("status", "--revision", "0000000"),
        code: EXIT.usage,
        json: false,
      },
      ...["nodes", "assignments", "instances", "intents", "attempts", "conditions", "tasks", "revisions"].map(
        (kind): Case => ({ name: `get ${kind}`, args: s("get", kind), code: EXIT.ok }),
      ),
      { name: "get - one", args: s("get", "instances", "app@n1"), code: EXIT.ok },
      { name: "get - unknown kind", args: s("get", "widgets"), code: EXIT.usage, json: false },
      { name: "get - unknown name", args: s("get", "nodes", "n9"), code: EXIT.usage, json: false },
      { name: "describe instance", args: s("describe", "instance", "app@n1"), code: EXIT.ok },
      { name: "describe node", args: s("describe", "node", "n1"), code: EXIT.ok },
      { name: "describe revision", args: s("describe", "revision", "HEAD"), code: EXIT.ok },
      { name: "describe attempt", args: s("describe", "attempt", attempt), code: EXIT.ok },
      {
        name: "describe - unknown",
        args: s("describe", "instance", "app@n9"),
        code: EXIT.usage,
        json: false,
      },
      { name: "describe - missing name", args: s("describe", "instance"), code: EXIT.usage, json: false },
      { name: "history", args: s("history", "app"), code: EXIT.ok },
      { name: "history - unknown", args: s("history", "nope"), code: EXIT.usage, json: false },
      { name: "drain", args: s("drain", "n1", "--reason", "disk"), code: EXIT.ok },
      { name: "drain - unknown node", args: s("drain", "n9"), code: EXIT.usage, json: false },
      { name: "undrain", args: s("undrain", "n1"), code: EXIT.ok },
      { name: "sync - up to date", args: s("sync", "--repo", converging.repo), code: EXIT.ok },
    ]);
    // A hub recorded in hub.json whose process is gone (killed): sync does the work itself.
    writeFileSync(
      join(converging.dir, "hub.json"),
      JSON.stringify({ pid: deadPid(), url: "http://127.0.0.1:1", startedAt: "", transports: ["local"] }),
    );
    await runCases(converging.dir, [
      {
        name: "sync - the recorded hub is gone: syncs here and says so",
        args: s("sync", "--repo", converging.repo),
        code: EXIT.ok,
        stderr:
          /^steward: warning: the hub recorded in \S+hub\.json \(pid \d+\) is gone: its process \d+ is not running; syncing here instead\n$/,
      },
      { name: "status - wrong flag", args: s("status", "--bogus"), code: EXIT.usage, json: false },
      {
        name: "status - wrong format",
        args: s("status", "-o", "xml"),
        code: EXIT.usage,
        json: false,
        stderr:
          /^steward: option '-o, --output <format>' argument 'xml' is invalid.*\n\(see `steward status --help`\)\n$/,
      },
    ]);

    const notRight = await hub({ "assignments/app.yaml": blocked });
    const n = (...args: string[]) => ["--state", notRight.dir, ...args];
    const [condition] = await notRight.store.conditions.list({ status: "open" });
    const task = (await notRight.store.tasks.ofCondition(condition!.id))!;
    await runCases(notRight.dir, [
      { name: "status - not right", args: n("status"), code: EXIT.problems },
      { name: "describe condition", args: n("describe", "condition", condition!.id), code: EXIT.ok },
      { name: "tasks", args: n("tasks"), code: EXIT.ok },
      { name: "tasks claim", args: n("tasks", "claim", task.id), code: EXIT.ok },
      { name: "tasks claim - unknown", args: n("tasks", "claim", "XYZ"), code: EXIT.usage, json: false },
      {
        name: "tasks resolve - without --action: one line",
        args: n("tasks", "resolve", task.id),
        code: EXIT.usage,
        json: false,
        stderr:
          /^steward: required option '--action <text>' not specified\n\(see `steward tasks resolve --help`\)\n$/,
      },
    ]);
    const resolved = await runCli(
      n("tasks", "resolve", task.id, "--action", "installed it", "-o", "json"),
      notRight.dir,
      {
        USER: "alice",
      },
    );
    expect(resolved.code).toBe(EXIT.ok);
    expect(JSON.parse(resolved.stdout)).toMatchObject({
      task: { status: "resolved", action: "installed it" },
    });

    const right = await hub({ "assignments/app.yaml": good });
    await runCases(right.dir, [
      { name: "status - right", args: ["--state", right.dir, "status"], code: EXIT.ok },
    ]);
    // The agent's own view: drift on disk is something not as desired.
    const observe = [
      "--state",
      join(right.dir, "state", "agents", "n1"),
      "agent",
      "observe",
      "--root",
      join(right.root, "n1"),
      "--node",
      "n1",
    ];
    await runCases(right.dir, [{ name: "agent observe - as desired", args: observe, code: EXIT.ok }], () => [
      "--json",
    ]);
    writeFileSync(join(right.root, "n1", "srv", "conf"), "edited by hand\n");
    await runCases(right.dir, [{ name: "agent observe - drift", args: observe, code: EXIT.problems }], () => [
      "--json",
    ]);
    await runCases(right.dir, [
      {
        name: "agent apply - no bundle file",
        args: ["agent", "apply", "--bundle", "/nonexistent/bundle.json"],
        code: EXIT.usage,
        json: false,
      },
    ]);
  }, 60_000);

  it("cli - the repository's commands: validate, plan, rollback, nats config", async () => {
    const work = workDir("steward-commands-");
    const repo = join(work, "fleet");
    mkdirSync(join(repo, "nodes"), { recursive: true });
    mkdirSync(join(repo, "assignments"), { recursive: true });
    for (const [path, content] of Object.entries({ ...nodes("n1"), "assignments/app.yaml": good }))
      writeFileSync(join(repo, path), content);
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd: repo });
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-qm", "v1");
    writeFileSync(join(repo, "assignments/app.yaml"), withConf("v2"));
    git("commit", "-qam", "v2");
    const broken = join(repoRoot, "test/fixtures/broken/undeclared-node");
    const formatJson = (c: Case) =>
      c.args[0] === "validate" || c.args[0] === "plan" ? ["--format", "json"] : ["-o", "json"];
    const cases: Case[] = [
      { name: "validate - valid", args: ["validate", repo], code: EXIT.ok },
      { name: "validate - invalid", args: ["validate", broken], code: EXIT.problems },
      {
        name: "validate - not a directory",
        args: ["validate", "/nonexistent"],
        code: EXIT.usage,
        json: false,
      },
      { name: "plan", args: ["plan", repo], code: EXIT.ok },
      { name: "plan - not a repository", args: ["plan", work], code: EXIT.usage, json: false },
      {
        name: "plan - unknown revision",
        args: ["plan", repo, "--from", "nope"],
        code: EXIT.usage,
        json: false,
      },
      {
        name: "rollback - neither REV nor --to",
        args: ["rollback", "--repo", repo],
        code: EXIT.usage,
        json: false,
      },
      {
        name: "nats config",
        args: ["nats", "config", "--static", "--out", join(work, "nats"), "--node", "edge-1"],
        code: EXIT.ok,
      },
      {
        name: "sync - not a repository, nothing synced yet: nothing is written",
        args: ["--state", join(work, "sync-state"), "sync"],
        code: EXIT.usage,
        json: false,
        stderr: /^steward: \S+ is not a git repository: give the path of a clone of the fleet repository\n$/,
      },
      {
        name: "up - --listen nonsense",
        args: ["--state", join(work, "up-state"), "up", "--listen", "nonsense"],
        code: EXIT.usage,
        json: false,
        stderr: /^steward: --listen "nonsense" is not host:port \(e\.g\. 127\.0\.0\.1:7117\)\n$/,
      },
      {
        name: "agent --nats - --creds and --nkey together",
        args: ["agent", "--nats", "nats://127.0.0.1:1", "--node", "n1", "--creds", "a.nk", "--nkey", "b.nk"],
        code: EXIT.usage,
        json: false,
        stderr: /^steward: --creds and --nkey both give this node's credentials: pass one of them\n$/,
      },
      // steward hub checks its flags and its repository before it does anything.
      ...(
        [
          [
            "--listen nonsense",
            ["--repo", repo, "--listen", "nonsense"],
            /^steward: --listen "nonsense" is not host:port \(e\.g\. 127\.0\.0\.1:7117\)\n$/,
          ],
          [
            "--sync-interval 0s",
            ["--repo", repo, "--sync-interval", "0s"],
            /^steward: --sync-interval "0s" is too short: give at least 1s\n$/,
          ],
          [
            "--nats without a URL",
            ["--repo", repo, "--nats", "localhost"],
            /^steward: --nats "localhost" is not a NATS server URL/,
          ],
          [
            "not a fleet repository",
            [],
            /^steward: this directory \(\S+\) is not a git repository: run steward hub in a clone of the fleet repository, or pass --repo PATH\|URL\n$/,
          ],
        ] as const
      ).map(
        ([what, args, stderr]): Case => ({
          name: `hub - ${what}`,
          args: ["--state", join(work, "hub-state"), "hub", ...args],
          code: EXIT.usage,
          json: false,
          stderr,
        }),
      ),
    ];
    await runCases(work, cases, formatJson);
    // The refusals above wrote nothing.
    for (const state of ["sync-state", "up-state", "hub-state"])
      expect(existsSync(join(work, state)), state).toBe(false);
    // -o json is --format json for validate and plan.
    for (const args of [
      ["validate", repo, "-o", "json"],
      ["plan", repo, "-o", "json"],
    ]) {
      const run = await runCli(args, work);
      expect(() => JSON.parse(run.stdout), args.join(" ")).not.toThrow();
    }
    // A rollback makes a commit: once, with -o json.
    const rollback = await runCli(["rollback", "HEAD", "--repo", repo, "-o", "json"], work, {
      STEWARD_GIT_AUTHOR_NAME: "t",
      STEWARD_GIT_AUTHOR_EMAIL: "t@example.com",
    });
    expect(rollback.code).toBe(EXIT.ok);
    expect(JSON.parse(rollback.stdout)).toMatchObject({
      branch: "main",
      paths: ["assignments/app.yaml"],
      pushed: false,
    });
    // An uncommitted change is not in a plan, and plan says so.
    writeFileSync(join(repo, "assignments/app.yaml"), withConf("v3"));
    const dirty = await runCli(["plan", repo], work);
    expect(dirty.stderr).toMatch(
      /^steward: warning: the working tree \S+ has uncommitted changes that are not in this plan \(assignments\/app\.yaml\)/,
    );
  });

  it("cli - up --once ends with status's answer: right 0, converging 3, not right 1; -o json carries it", async () => {
    const outcomes: [string, string, number][] = [
      ["right", good, EXIT.ok],
      ["converging", failing(10), EXIT.converging],
      ["not-right", blocked, EXIT.problems],
    ];
    for (const [answer, assignment, code] of outcomes) {
      const work = workDir("steward-up-");
      const repo = join(work, "fleet");
      mkdirSync(join(repo, "nodes"), { recursive: true });
      mkdirSync(join(repo, "assignments"), { recursive: true });
      for (const [path, content] of Object.entries({ ...nodes("n1"), "assignments/app.yaml": assignment }))
        writeFileSync(join(repo, path), content);
      execFileSync("git", ["init", "-q", "-b", "main"], { cwd: repo });
      execFileSync("git", ["add", "-A"], { cwd: repo });
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", answer], {
        cwd: repo,
      });
      const run = await runSteward(
        ["--state", join(work, "state"), "up", "--once", "--repo", repo, "--timeout", "60s", "-o", "json"],
        { cwd: work },
      );
      expect({ answer, code: run.code }).toEqual({ answer, code });
      expect(JSON.parse(run.stdout)).toMatchObject({ answer });
    }
  }, 120_000);

  it("cli - rollout pause and resume: their decisions, usage errors, and -o json", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1", "n2", "n3"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1", "n2", "n3"],
          resources: [{ kind: "command", name: "reload", run: ["/nonexistent/reload"] }],
          rollout: { maxInFlight: 1 },
        }),
      },
    });
    await h.commit("app");
    await h.settle();
    const r = (...args: string[]) => ["--state", h.dir, "rollout", ...args];
    await runCases(h.dir, [
      { name: "rollout pause", args: r("pause", "HEAD", "--reason", "looking at n1"), code: EXIT.ok },
      { name: "rollout resume", args: r("resume", "HEAD", "--reason", "n1 is known"), code: EXIT.ok },
      {
        name: "rollout resume - one assignment",
        args: r("resume", "HEAD", "--assignment", "app", "--reason", "again"),
        code: EXIT.ok,
      },
      {
        name: "rollout resume - no reason",
        args: r("resume", "HEAD"),
        code: EXIT.usage,
        json: false,
        stderr: /^steward: say why: `steward rollout resume HEAD --reason "\.\.\."`/,
      },
      {
        name: "rollout pause - wrong flag",
        args: r("pause", "HEAD", "--bogus"),
        code: EXIT.usage,
        json: false,
      },
      {
        name: "rollout pause - unknown revision",
        args: r("pause", "0000000", "--reason", "x"),
        code: EXIT.usage,
        json: false,
      },
      {
        name: "rollout resume - unknown assignment",
        args: r("resume", "HEAD", "--assignment", "db", "--reason", "x"),
        code: EXIT.usage,
        json: false,
        stderr: /has no rollout of "db" \(it rolls out app\): fix --assignment\n$/,
      },
      {
        name: "rollout - no subcommand",
        args: r(),
        code: EXIT.usage,
        json: false,
        stderr: /^steward: say what to do with the rollout: `steward rollout pause REVISION/,
      },
    ]);
    const sha = (await h.intent("app@n1")).revision;
    expect(await h.store.rollouts.decision("app", sha)).toMatchObject({
      decision: "resume",
      by: "alice",
      accepted: ["app@n1"],
    });
  });
});
