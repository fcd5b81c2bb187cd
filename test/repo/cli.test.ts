import { dirname } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";
import { makeRepo, removeTempDirs, tempDir } from "../helpers/git.js";
import { serveGit } from "../helpers/git-http.js";
import { assignmentYaml, smallFleet } from "./fleet.js";

afterAll(removeTempDirs);

const run = (args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) =>
  runCli(args, cwd, { HOME: tempDir(), ...env });

const dbChange = (content: string) => ({
  "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content }),
});

describe("cli", () => {
  it("cli - sync, history and the exit codes of each sync outcome", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const state = tempDir("steward-state-");
    const first = await run(["--state", state, "sync", "--repo", repo.dir], repo.dir);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(
      /^applied [0-9a-f]{12} "initial": 3 new generations \(db@db-1→1, web@web-1→1, web@web-2→1\), 0 retired, 0 unchanged\n$/,
    );

    // The source is remembered: later syncs need no --repo.
    expect((await run(["--state", state, "sync"], "/")).stdout).toMatch(
      /^up to date: main at [0-9a-f]{12}\n$/,
    );

    repo.commit("db v2", dbChange("db v2\n"));
    const second = await run(["--state", state, "--json", "sync"], "/");
    expect(second.code).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({
      kind: "applied",
      generations: [{ instanceKey: "db@db-1", generation: 2 }],
    });

    const bad = repo.commit("broken", { "assignments/db.yaml": "kind: [" });
    const invalid = await run(["--state", state, "sync"], "/");
    expect(invalid.code).toBe(1);
    expect(invalid.stdout).toContain("assignments/db.yaml:1:");
    expect(invalid.stdout).toContain(
      `invalid ${bad.slice(0, 12)}: 1 error; nothing advanced, still serving ${repo.rev("HEAD~1").slice(0, 12)}`,
    );

    const history = await run(["--state", state, "history", "db"], "/");
    expect(history.code).toBe(0);
    const lines = history.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^INSTANCE\s+GEN\s+REVISION\s+TIME\s+HASH\s+STATE\s+ATTEMPT\s+SUBJECT$/);
    expect(lines[1]).toMatch(
      new RegExp(
        `^db@db-1\\s+2\\s+${repo.rev("HEAD~1").slice(0, 12)}\\s+\\S+Z\\s+[0-9a-f]{12}\\s+current\\s+-\\s+db v2$`,
      ),
    );
    expect(lines[2]).toMatch(/^db@db-1\s+1\s+[0-9a-f]{12}\s+\S+\s+[0-9a-f]{12}\s+-\s+initial$/);

    const json = JSON.parse(
      (await run(["--state", state, "--json", "history", "web", "--node", "web-2"], "/")).stdout,
    );
    expect(json).toEqual([
      expect.objectContaining({
        instanceKey: "web@web-2",
        generation: 1,
        current: true,
        attempt: null,
        revision: expect.objectContaining({ message: "initial\n" }),
      }),
    ]);

    const unknown = await run(["--state", state, "history", "nope"], "/");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(
      'steward: no generations of assignment "nope": check the name (`steward get assignments`), or run steward sync\n',
    );
  });

  it("cli - sync from an HTTP remote with STEWARD_GIT_TOKEN from the environment", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const remote = repo.bareClone();
    const token = "tok-3f9a1c";
    const server = await serveGit({
      root: dirname(remote.dir),
      auth: { username: "x-access-token", password: token },
    });
    try {
      const state = tempDir("steward-state-");
      const url = server.url("fleet.git");
      const refused = await run(["--state", state, "sync", "--repo", url], "/");
      expect(refused.code).toBe(1);
      expect(refused.stderr).toBe(
        `steward: ${url} requires authentication: set STEWARD_GIT_TOKEN (or STEWARD_GIT_USERNAME and STEWARD_GIT_PASSWORD) in the environment\n`,
      );
      const synced = await run(["--state", state, "sync", "--repo", url], "/", { STEWARD_GIT_TOKEN: token });
      expect(synced.code).toBe(0);
      expect(synced.stdout).toMatch(/^applied [0-9a-f]{12} "initial": 3 new generations/);
      expect(synced.stdout + synced.stderr).not.toContain(token);
      const history = await run(["--state", state, "history", "web"], "/");
      expect(history.stdout.trimEnd().split("\n")).toHaveLength(3);
    } finally {
      await server.close();
    }
  });

  it("cli - history without a hub database says to sync first", async () => {
    const state = tempDir("steward-state-");
    const result = await run(["--state", state, "history", "web"], "/");
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      `steward: no hub state at ${state}/hub.db: run \`steward sync\` first (or pass --state DIR)\n`,
    );
  });

  it("cli - sync refuses a URL with credentials in it without echoing them", async () => {
    const state = tempDir("steward-state-");
    const result = await run(
      ["--state", state, "sync", "--repo", "https://bot:ghp_secret@git.example.test/fleet.git"],
      "/",
    );
    // A wrong --repo is a usage error.
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("must not carry credentials");
    expect(result.stderr).not.toContain("ghp_secret");
  });

  it("cli - plan prints the plan between two revisions as text, Markdown or JSON", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const from = repo.rev();
    const to = repo.commit("db v2", dbChange("db v2\n"));
    const text = await run(["plan", "--from", from, "--to", to], repo.dir);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("0 added, 1 new generations, 0 retired, 2 unchanged (1 node affected)");
    expect(text.stdout).toContain("          -db v1\n          +db v2");
    const markdown = await run(["plan", repo.dir, "--format", "markdown"], "/");
    expect(markdown.stdout).toContain(`### steward plan: \`${from.slice(0, 12)}\` → \`${to.slice(0, 12)}\``);
    const json = JSON.parse((await run(["--json", "plan", "--to", "HEAD"], repo.dir)).stdout);
    expect(json).toMatchObject({ from: { sha: from }, to: { sha: to }, plan: { summary: { changed: 1 } } });

    repo.commit("broken", { "assignments/db.yaml": "kind: [" });
    const invalid = await run(["plan"], repo.dir);
    expect(invalid.code).toBe(1);
    expect(invalid.stdout).toMatch(/--to revision [0-9a-f]{12} is invalid: no plan\n$/);
    const missing = await run(["plan", "--from", "nope"], repo.dir);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /^steward: "nope" names no commit in \S+: give a branch, tag, commit id or REV~N\n$/,
    );
  });

  it("cli - rollback reverts REV, or restores --to REV, and wants exactly one of them", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const first = repo.rev();
    const change = repo.commit("db v2", dbChange("db v2\n"));
    const env = { STEWARD_GIT_AUTHOR_NAME: "Op", STEWARD_GIT_AUTHOR_EMAIL: "op@example.test" };
    const both = await run(["rollback", change, "--to", first], repo.dir, env);
    expect(both.code).toBe(2);
    expect(both.stderr).toBe(
      "steward: give either the commit to revert (steward rollback REV) or --to REV, not both\n",
    );

    const reverted = await run(["rollback", change], repo.dir, env);
    expect(reverted.code).toBe(0);
    expect(reverted.stdout).toMatch(
      new RegExp(
        `^[0-9a-f]{12} Revert "db v2"\\n  on main \\(was ${change.slice(0, 12)}\\), 1 file: assignments/db.yaml\\n  not pushed`,
      ),
    );
    expect(repo.git("rev-parse", "HEAD^{tree}")).toBe(repo.git("rev-parse", `${first}^{tree}`));

    repo.write({ "assignments/db.yaml": "dirty\n" });
    const dirty = await run(["rollback", "--to", first], repo.dir, env);
    expect(dirty.code).toBe(1);
    expect(dirty.stderr).toContain(
      "has uncommitted changes (assignments/db.yaml): commit or stash them first",
    );
  });
});
