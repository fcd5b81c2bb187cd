/**
 * `steward hub` checks every flag, and the repository it is to serve, before it does anything: each
 * problem is one line and exit 2, and the state directory stays untouched (no database, no sync,
 * no SSH). Real `steward hub` processes in real git repositories.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readHubFile, statePathsIn } from "../../src/cli/hub-state.js";
import { EXIT } from "../../src/cli/io.js";
import { newUserSeed } from "../../src/transport/nats/config.js";
import { stopChild } from "../../src/transport/nats/server.js";
import { repoRoot } from "../helpers/cli.js";
import { makeRepo, removeTempDirs, tempDir } from "../helpers/git.js";
import { assignmentYaml, file, nodes } from "../hub/helpers/fleet.js";
import { eventually, runSteward, startSteward } from "../hub/helpers/process.js";

const fleet = () =>
  makeRepo({
    files: {
      ...nodes("n1"),
      "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v1\n")] }),
    },
  });

const children: ChildProcess[] = [];
const servers: Server[] = [];
afterAll(async () => {
  for (const child of children) await stopChild(child);
  for (const server of servers) server.close();
  removeTempDirs();
});

/** A port something else listens on. */
async function takenPort(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as { port: number }).port;
}

/** `steward hub ARGS` in `cwd` with its own state directory; says whether it touched that directory. */
async function hub(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const state = join(tempDir("steward-hub-flags-"), "state");
  const run = await runSteward(["--state", state, "hub", ...args], { cwd, env, timeoutMs: 30_000 });
  return { ...run, touched: existsSync(state) };
}

describe("hub - flags are checked before anything runs", () => {
  it("hub - each bad flag is one line naming it and the fix, exit 2, and the state directory is untouched", async () => {
    const repo = fleet();
    const busy = await takenPort();
    const seed = join(tempDir("steward-hub-flags-creds-"), "open.nk");
    writeFileSync(seed, `${newUserSeed()}\n`, { mode: 0o644 });
    const cases: [string, string[], RegExp][] = [
      [
        "--listen",
        ["--listen", "nonsense"],
        /^steward: --listen "nonsense" is not host:port \(e\.g\. 127\.0\.0\.1:7117\)\n$/,
      ],
      [
        "--listen's port",
        ["--listen", "127.0.0.1:70000"],
        /^steward: --listen "127\.0\.0\.1:70000" is not host:port/,
      ],
      [
        "--listen in use",
        ["--listen", `127.0.0.1:${busy}`],
        new RegExp(
          `^steward: --listen 127\\.0\\.0\\.1:${busy}: the address is in use by another process: stop it, or pass another --listen \\(port 0 takes any free one\\)\\n$`,
        ),
      ],
      [
        "--listen on no address of this machine",
        ["--listen", "192.0.2.1:7117"],
        /^steward: --listen 192\.0\.2\.1:7117: no interface of this machine has that address: use 127\.0\.0\.1 or one it has\n$/,
      ],
      [
        "--sync-interval",
        ["--sync-interval", "soon"],
        /^steward: --sync-interval "soon" is not a duration: write e\.g\. 30s, 5m or 1h\n$/,
      ],
      [
        "--sync-interval 0s",
        ["--sync-interval", "0s"],
        /^steward: --sync-interval "0s" is too short: give at least 1s\n$/,
      ],
      ["--lease", ["--lease", "10"], /^steward: --lease "10" is not a duration/],
      [
        "--replica-lease 500ms",
        ["--replica-lease", "500ms"],
        /^steward: --replica-lease "500ms" is too short: give at least 1s\n$/,
      ],
      [
        "--ssh-key",
        ["--ssh-key", "missing-key"],
        /^steward: --ssh-key missing-key: no such file — give the path of the hub's private key\n$/,
      ],
      [
        "--ssh-known-hosts",
        ["--ssh-known-hosts", "missing_known_hosts"],
        /^steward: --ssh-known-hosts missing_known_hosts: no such file — give an existing known_hosts file, or add --ssh-tofu to record keys in it on first use\n$/,
      ],
      [
        "--ssh-concurrency",
        ["--ssh-concurrency", "many"],
        /^steward: --ssh-concurrency must be a whole number >= 1 \(got "many"\)\n$/,
      ],
      [
        "--nats",
        ["--nats", "localhost"],
        /^steward: --nats "localhost" is not a NATS server URL \(e\.g\. nats:\/\/127\.0\.0\.1:4222/,
      ],
      [
        "--nats-creds without --nats",
        ["--nats-creds", seed],
        /^steward: --nats-creds only applies with --nats URL: add --nats, or leave it out\n$/,
      ],
      [
        "--nats-creds others can read",
        ["--nats", "nats://127.0.0.1:4222", "--nats-creds", seed],
        /^steward: NATS credentials \S+open\.nk are readable by others \(mode 644\): run `chmod 600 \S+open\.nk`\n$/,
      ],
      [
        "--nats-tls-ca",
        ["--nats", "nats://127.0.0.1:4222", "--nats-tls-ca", "ca.pem"],
        /^steward: --nats-tls-ca ca\.pem: no such file — give the path of the CA certificate that signed the server's\n$/,
      ],
      [
        "--status github without a token",
        ["--status", "github", "--status-repo", "acme/fleet"],
        /^steward: --status github needs a token: set GITHUB_TOKEN in the hub's environment/,
      ],
      [
        "--webhook-secret-env unset",
        ["--webhook-secret-env", "STEWARD_TEST_UNSET"],
        /^steward: --webhook-secret-env STEWARD_TEST_UNSET: that variable is not set: export it with the webhook's secret\n$/,
      ],
      [
        "--branch that does not exist",
        ["--branch", "prod"],
        /^steward: --branch prod: \S+ has no such branch \(it has main\): pass --branch main, or push prod\n$/,
      ],
      [
        "--repo that does not exist",
        ["--repo", "/nonexistent/fleet"],
        /^steward: --repo \/nonexistent\/fleet does not exist/,
      ],
    ];
    for (const [what, args, stderr] of cases) {
      const run = await hub(repo.dir, args, { GITHUB_TOKEN: "", STEWARD_TEST_UNSET: "" });
      expect({ what, code: run.code, stderr: run.stderr, stdout: run.stdout, touched: run.touched }).toEqual({
        what,
        code: EXIT.usage,
        stderr: expect.stringMatching(stderr),
        stdout: "",
        touched: false,
      });
    }
  }, 120_000);

  it("hub - without --repo, a directory that is not a fleet repository is refused with the fix", async () => {
    const notGit = tempDir("steward-hub-plain-");
    const other = makeRepo({ files: { "README.md": "a library\n", "config/app.yaml": "port: 80\n" } });
    const repo = fleet();
    const cases: [string, string, RegExp][] = [
      [
        "steward's own source tree",
        repoRoot,
        /^steward: this directory \(\S+\) is not a fleet repository: it has no steward\.yaml, and no nodes\/ or assignments\/ with steward documents \(apiVersion: steward\.dev\/v1\)\. Run steward hub in your fleet repository or pass --repo PATH\|URL; `steward up` makes an example fleet to start from\n$/,
      ],
      [
        "another project's repository",
        other.dir,
        /^steward: this directory \(\S+\) is not a fleet repository: /,
      ],
      [
        "a directory that is not a git repository",
        notGit,
        /^steward: this directory \(\S+\) is not a git repository: run steward hub in a clone of the fleet repository, or pass --repo PATH\|URL\n$/,
      ],
      [
        "a directory inside the fleet repository",
        join(repo.dir, "nodes"),
        new RegExp(
          `^steward: this directory \\(\\S+\\) is inside the git repository ${repo.dir}, not its top: run steward hub there, or pass --repo ${repo.dir}\\n$`,
        ),
      ],
    ];
    for (const [what, cwd, stderr] of cases) {
      const run = await hub(cwd, []);
      expect({ what, code: run.code, stderr: run.stderr, touched: run.touched }).toEqual({
        what,
        code: EXIT.usage,
        stderr: expect.stringMatching(stderr),
        touched: false,
      });
    }
  }, 60_000);

  it("hub - a fleet repository without --repo is served; a second hub (or up) on its state directory is refused", async () => {
    const repo = fleet();
    const work = tempDir("steward-hub-serve-");
    const state = join(work, "state");
    const args = ["--state", state, "hub", "--root", join(work, "root"), "--listen", "127.0.0.1:0"];
    children.push(await startSteward(args, { cwd: repo.dir, log: join(work, "hub.log") }));
    const record = await eventually(
      () => readHubFile(statePathsIn(state)),
      30_000,
      "the hub to record itself",
    );
    expect(record).toMatchObject({ repo: repo.dir, branch: "main" });
    const refusal = `steward: a hub already runs on ${state} (pid ${record.pid}, ${record.url}): stop it first, or give this hub its own --state DIR\n`;
    const second = await runSteward(args, { cwd: repo.dir, timeoutMs: 30_000 });
    expect(second).toMatchObject({ code: EXIT.usage, stderr: refusal });
    // steward up runs a hub too.
    const up = await runSteward(["--state", state, "up", "--once", "--repo", repo.dir], {
      cwd: repo.dir,
      timeoutMs: 30_000,
    });
    expect(up).toMatchObject({ code: EXIT.usage, stderr: refusal });
  }, 60_000);
});
