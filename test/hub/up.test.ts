import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ensureExampleRepo } from "../../src/cli/up.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import { exampleRepoOnFreePorts } from "../helpers/example-repo.js";
import { stopServicesOf } from "../helpers/steward-up.js";
import { assignmentYaml, nodes } from "./helpers/fleet.js";
import { runSteward } from "./helpers/process.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) {
    // Services the agents started keep running after `steward up` exits (a later run adopts them): stop ours.
    stopServicesOf(join(dir, "state"));
    rmSync(dir, { recursive: true, force: true });
  }
});

const git = (repo: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
    cwd: repo,
    stdio: "pipe",
  }).toString();

describe("hub - steward up", () => {
  it("hub - up --once converges the example fleet from a fresh state directory, then a committed change converges its new generation", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-up-"));
    dirs.push(dir);
    const state = join(dir, "state");
    // The example fleet as `steward up` makes it (ensureExampleRepo), with its web nodes on free
    // ports: the quick start's own `steward up` may still be serving the declared ones.
    const example = join(dir, "example");
    await exampleRepoOnFreePorts(example);
    expect(await ensureExampleRepo(join(state, "repo"), example)).toBe("created");
    expect(await ensureExampleRepo(join(state, "repo"), example)).toBe("existing");
    const first = await runSteward(["--state", state, "up", "--once", "--timeout", "90s"], { cwd: dir });
    expect(first.stderr).toBe("");
    expect(first.code, first.stdout).toBe(0);
    expect(first.stdout).toContain("steward up: state/repo at ");
    expect(first.stdout).toMatch(
      /right: no open conditions; 6\/6 instances converged \(3 local nodes in [0-9.]+s; 2 nodes not reached by this hub, see steward status\)\n$/,
    );
    expect(first.stdout).toMatch(
      /edge-1\s+-\s+not dispatched: transport ssh is not enabled in this hub \(base, edge-proxy, edge-system\)/,
    );
    expect(first.stdout).toMatch(
      /edge-2\s+-\s+not dispatched: transport nats is not enabled in this hub \(base, edge-proxy\)/,
    );
    const root = join(state, "root");
    // The example carries its key encrypted; db-1's agent has the demo identity `steward up` installed.
    expect(first.stdout).toContain(
      "steward up: installed the example's DEMO identities (examples/identities: published, never to be used elsewhere) into the local agents of db-1, web-1, web-2\n",
    );
    const key = readFileSync(join(root, "db-1", "etc", "db", "tls", "server.key"), "utf8");
    expect(key).toContain("BEGIN PRIVATE KEY");
    expect(readFileSync(join(state, "hub.db")).includes(key.split("\n")[1]!)).toBe(false);
    expect(readFileSync(join(root, "web-1", "srv", "web", "config.json"), "utf8")).toContain(
      '"version": "1.4.2"',
    );
    expect(readFileSync(join(root, "db-1", "var", "lib", "db", "schema-version"), "utf8")).toBe(
      "migrated to 7\n",
    );
    // The commit shows the convergence in git notes.
    const repo = join(state, "repo");
    expect(git(repo, "notes", "--ref", "steward", "show", "HEAD")).toContain("steward/web: success");
    // `steward status --revision` says the same from the hub's own records.
    const firstSha = git(repo, "rev-parse", "HEAD").trim();
    const statuses = await runSteward(
      ["--state", state, "status", "--revision", firstSha.slice(0, 10), "--json"],
      {
        cwd: dir,
      },
    );
    // The fleet context stays pending (exit 3): the example's ssh and nats nodes are not reached by this hub.
    expect(statuses.code).toBe(3);
    const view = JSON.parse(statuses.stdout) as { fleet: string; statuses: Record<string, string>[] };
    expect(view.fleet).toBe("pending");
    expect(view.statuses).toContainEqual(
      expect.objectContaining({
        context: "steward/fleet",
        description:
          "6/11 instances converged; skipped edge-1 (transport not run here), edge-2 (transport not run here)",
      }),
    );
    expect(view.statuses).toContainEqual(
      expect.objectContaining({
        context: "steward/web",
        state: "success",
        delivery: expect.stringMatching(/^posted/),
      }),
    );
    const unknown = await runSteward(["--state", state, "status", "--revision", "0000000"], { cwd: dir });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no single revision of the tracked branch starts with it");

    // The second step of the quick start: edit, commit, run again.
    const base = join(repo, "assignments", "base.yaml");
    writeFileSync(
      base,
      readFileSync(base, "utf8").replace("is managed by steward", "is managed by steward, changed"),
    );
    git(repo, "commit", "-qam", "base: a new banner");
    const second = await runSteward(["--state", state, "up", "--once", "--timeout", "90s"], { cwd: dir });
    expect(second.code).toBe(0);
    expect(second.stdout).not.toContain("the example fleet is in");
    expect(second.stdout).toMatch(/right: no open conditions; 6\/6 instances converged/);
    expect(readFileSync(join(root, "web-2", "etc", "steward-demo", "motd"), "utf8")).toContain(
      "is managed by steward, changed",
    );
    // The first commit is no longer the newest: its statuses still pending ended, naming the second.
    const secondSha = git(repo, "rev-parse", "HEAD").toString().trim();
    const ended = await runSteward(["--state", state, "status", "--revision", firstSha, "--json"], {
      cwd: dir,
    });
    const endedView = JSON.parse(ended.stdout) as { fleet: string; statuses: Record<string, string>[] };
    expect(endedView.statuses.filter((s) => s.state === "pending")).toEqual([]);
    expect(endedView.statuses).toContainEqual(
      expect.objectContaining({
        context: "steward/fleet",
        state: "error",
        description: expect.stringMatching(
          new RegExp(
            `^superseded by ${secondSha.slice(0, 12)} before it converged; was 6/11 instances converged`,
          ),
        ),
      }),
    );
    expect(endedView.statuses).toContainEqual(
      expect.objectContaining({ context: "steward/web", state: "success" }),
    );
    expect(ended.code).toBe(1);
    const store = new SqliteStore(join(state, "hub.db"));
    try {
      expect(await store.intents.get("base@web-2", 2)).toMatchObject({ status: "converged" });
      expect(await store.intents.get("web@web-2", 1)).toMatchObject({ status: "converged" });
    } finally {
      await store.close();
    }
    // Two whole `steward up` runs, each with the example's 5 s canary soak: give a loaded machine time.
  }, 120_000);

  it("hub - up --once ends converging (exit 3) as soon as an attempt failed within budget and nothing else is moving, with the next retry", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-up-"));
    dirs.push(dir);
    const repo = join(dir, "fleet");
    const files: Record<string, string> = {
      ...nodes("n1"),
      "assignments/app.yaml": assignmentYaml("app", {
        nodes: ["n1"],
        resources: [
          { kind: "directory", name: "srv", path: "/srv" },
          { kind: "command", name: "flaky", run: ["sh", "-c", "exit 3"] },
        ],
        budget: { attempts: 10, within: "1h" },
      }),
    };
    for (const [path, content] of Object.entries(files)) {
      execFileSync("mkdir", ["-p", join(repo, path, "..")]);
      writeFileSync(join(repo, path), content);
    }
    git(repo, "init", "-q", "-b", "main");
    git(repo, "add", "-A");
    git(repo, "commit", "-qm", "a failing command");
    const started = Date.now();
    const result = await runSteward(["--state", join(dir, "state"), "up", "--once", "--repo", repo], {
      cwd: dir,
    });
    expect(result.code).toBe(3);
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(result.stdout).toMatch(
      /converging: no open conditions; 0\/1 instances converged \(after [0-9.]+s nothing else is moving; the next retry is made by the next steward up or steward hub\)\n/,
    );
    expect(result.stdout).toMatch(/app@n1 {2}failing within budget {2}retry 1\/10, next at \S+Z \(/);
  });
});
