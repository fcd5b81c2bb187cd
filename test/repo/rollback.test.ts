import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { rollback } from "../../src/repo/rollback.js";
import { makeRepo, removeTempDirs, type TempRepo, tempDir } from "../helpers/git.js";
import { type GitHttpServer, serveGit } from "../helpers/git-http.js";
import { assignmentYaml, smallFleet } from "./fleet.js";
import { type Harness, harness, steppingClock } from "./harness.js";

const AUTHOR = { STEWARD_GIT_AUTHOR_NAME: "Rollback Bot", STEWARD_GIT_AUTHOR_EMAIL: "rollback@example.test" };
const web = (content: string) => ({
  "assignments/web.yaml": assignmentYaml("web", { selector: { role: "web" }, content }),
});

function refusal(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  return promise.then(
    () => {
      throw new Error("expected the rollback to be refused");
    },
    (error: { code: string; message: string }) => error,
  );
}

/** `git clone` of the harness's HTTP remote (credentials in the clone URL only, then removed). */
async function operatorClone(h: Harness, auth?: { username: string; password: string }): Promise<string> {
  const dir = join(tempDir("steward-clone-"), "fleet");
  const url = h.server!.url("fleet.git");
  const cloneUrl = auth ? url.replace("http://", `http://${auth.username}:${auth.password}@`) : url;
  await h.repo.gitAsync("clone", "-q", cloneUrl, dir);
  h.repo.git("-C", dir, "remote", "set-url", "origin", url);
  return dir;
}

describe("rollback", () => {
  let h: Harness | undefined;
  let server: GitHttpServer | undefined;
  afterEach(async () => {
    await h?.close();
    await server?.close();
    h = undefined;
    server = undefined;
  });
  afterAll(removeTempDirs);

  it("rollback - a revert commit undoes the change in the tree and the working copy; the sync makes a new generation with the old hash", async () => {
    h = await harness("path", smallFleet());
    await h.syncer.sync();
    const original = (await h.store.currentInstances()).get("web@web-1")!.hash;
    const bad = h.commit("web v2", web("web v2\n"));
    await h.syncer.sync();

    const result = await rollback({
      location: { kind: "path", path: h.repo.dir },
      revision: "HEAD",
      mode: "revert",
      push: false,
      env: AUTHOR,
      cacheDir: join(h.state, "git"),
      clock: steppingClock(),
    });
    expect(result).toMatchObject({
      branch: "main",
      parent: bad,
      target: bad,
      paths: ["assignments/web.yaml"],
      pushed: false,
    });
    expect(result.message).toBe(
      `Revert "web v2"\n\nThis reverts commit ${bad}.\nWritten by steward rollback.\n`,
    );
    expect(h.repo.rev()).toBe(result.commit);
    expect(h.repo.git("log", "-1", "--format=%an <%ae>|%P")).toBe(
      `Rollback Bot <rollback@example.test>|${bad}`,
    );
    expect(h.repo.git("status", "--porcelain")).toBe("");
    expect(readFileSync(join(h.repo.dir, "assignments/web.yaml"), "utf8")).toBe(
      smallFleet()["assignments/web.yaml"],
    );
    expect(h.repo.git("rev-parse", "HEAD^{tree}")).toBe(h.repo.git("rev-parse", "HEAD~2^{tree}"));

    const outcome = await h.syncer.sync();
    expect(outcome).toMatchObject({ kind: "applied", head: result.commit });
    expect((await h.store.currentInstances()).get("web@web-1")).toMatchObject({
      generation: 3,
      hash: original,
    });
    expect((await h.store.history({ assignment: "web", node: "web-1" })).map((e) => e.generation)).toEqual([
      3, 2, 1,
    ]);
  });

  it("rollback - over HTTP: revert, push with credentials, and the syncer fetches it as a new generation", async () => {
    const auth = { username: "bot", password: "push-token" };
    h = await harness("http", smallFleet(), { auth });
    await h.syncer.sync();
    const original = (await h.store.currentInstances()).get("db@db-1")!.hash;
    const bad = h.commit("db v2", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
    });
    await h.syncer.sync();

    // An operator's clone of the HTTP remote, as `git clone` makes it.
    const cloneDir = await operatorClone(h, auth);
    const clone = { dir: cloneDir, git: (...args: string[]) => h!.repo.git("-C", cloneDir, ...args) };

    const result = await rollback({
      location: { kind: "path", path: cloneDir },
      revision: bad,
      mode: "revert",
      push: true,
      env: { ...AUTHOR, STEWARD_GIT_USERNAME: auth.username, STEWARD_GIT_PASSWORD: auth.password },
      cacheDir: join(h.state, "git"),
    });
    expect(result.pushed).toBe(true);
    expect(h.remote!.git("rev-parse", "main")).toBe(result.commit);
    expect(clone.git("status", "--porcelain")).toBe("");

    const outcome = await h.syncer.sync();
    expect(outcome).toMatchObject({
      kind: "applied",
      head: result.commit,
      generations: [{ instanceKey: "db@db-1", generation: 3 }],
    });
    expect((await h.store.currentInstances()).get("db@db-1")!.hash).toBe(original);
  });

  it("rollback - with a URL and --push, the commit is made in the mirror and pushed", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const bad = repo.commit("web v2", web("web v2\n"));
    const remote = repo.bareClone();
    server = await serveGit({ root: dirname(remote.dir) });
    const state = tempDir("steward-state-");
    const location = { kind: "url" as const, url: server.url("fleet.git") };
    const refused = await refusal(
      rollback({ location, revision: bad, mode: "revert", push: false, env: AUTHOR, cacheDir: state }),
    );
    expect(refused).toMatchObject({ code: "E_ROLLBACK_UNPUSHED" });
    expect(refused.message).toContain("add --push");

    const result = await rollback({
      location,
      revision: bad,
      mode: "revert",
      push: true,
      env: AUTHOR,
      cacheDir: state,
    });
    expect(remote.git("rev-parse", "main")).toBe(result.commit);
    expect(remote.git("rev-parse", "main^{tree}")).toBe(remote.git("rev-parse", "main~2^{tree}"));
  });

  it("rollback - --to restores the whole tree of an earlier revision in one new commit", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const first = repo.rev();
    repo.commit("web v2", web("web v2\n"));
    repo.commit("db v2 and web v3", {
      ...web("web v3\n"),
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
      "assignments/extra.yaml": assignmentYaml("extra", { nodes: ["db-1"] }),
    });
    const head = repo.rev();
    const result = await rollback({
      location: { kind: "path", path: repo.dir },
      revision: first.slice(0, 8),
      mode: "restore",
      push: false,
      env: AUTHOR,
      cacheDir: tempDir(),
    });
    expect(result.parent).toBe(head);
    expect(result.message.split("\n")[0]).toBe(`Restore the fleet to ${first.slice(0, 12)} "initial"`);
    expect(result.paths).toEqual(["assignments/db.yaml", "assignments/extra.yaml", "assignments/web.yaml"]);
    expect(repo.git("rev-parse", "HEAD^{tree}")).toBe(repo.git("rev-parse", `${first}^{tree}`));
    expect(repo.git("status", "--porcelain")).toBe("");
  });

  const refusals: {
    name: string;
    code: string;
    message: RegExp;
    arrange(repo: TempRepo): { revision: string; mode?: "revert" | "restore"; env?: NodeJS.ProcessEnv };
  }[] = [
    {
      name: "a dirty working tree",
      code: "E_ROLLBACK_DIRTY",
      message: /has uncommitted changes \(assignments\/db\.yaml\): commit or stash them first$/,
      arrange(repo) {
        writeFileSync(join(repo.dir, "assignments/db.yaml"), "edited\n");
        return { revision: "HEAD~1" };
      },
    },
    {
      name: "a file changed again after the reverted commit",
      code: "E_ROLLBACK_CONFLICT",
      message:
        /assignments\/web\.yaml changed again after it\. Revert the later commits first, or restore a whole revision with --to$/,
      arrange(repo) {
        repo.commit("web v3", web("web v3\n"));
        return { revision: "HEAD~1" };
      },
    },
    {
      name: "a change already undone",
      code: "E_ROLLBACK_NOTHING",
      message: /are already undone on main: nothing to revert$/,
      arrange(repo) {
        repo.commit("back to v1 by hand", web("web v1\n"));
        return { revision: "HEAD~1" };
      },
    },
    {
      name: "no author anywhere",
      code: "E_ROLLBACK_AUTHOR",
      message:
        /set STEWARD_GIT_AUTHOR_NAME and STEWARD_GIT_AUTHOR_EMAIL, or git config user\.name and user\.email$/,
      arrange: () => ({ revision: "HEAD", env: { HOME: tempDir() } }),
    },
    {
      name: "a revision that does not exist",
      code: "E_REVISION_NOT_FOUND",
      message: /^"no-such-rev" names no commit in /,
      arrange: () => ({ revision: "no-such-rev" }),
    },
  ];
  it.each(refusals)("rollback - refuses $name, changing nothing", async ({ code, message, arrange }) => {
    const repo = makeRepo({ files: smallFleet() });
    repo.commit("web v2", web("web v2\n"));
    const { revision, mode, env } = arrange(repo);
    const head = repo.rev();
    const error = await refusal(
      rollback({
        location: { kind: "path", path: repo.dir },
        revision,
        mode: mode ?? "revert",
        push: false,
        env: env ?? AUTHOR,
        cacheDir: tempDir(),
      }),
    );
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
    expect(repo.rev()).toBe(head);
  });

  it("rollback - refuses to push when the branch moved on the remote", async () => {
    h = await harness("http", smallFleet());
    const cloneDir = await operatorClone(h);
    h.commit("someone else's change", web("web v2\n"));
    const local = h.repo.git("-C", cloneDir, "rev-parse", "HEAD");
    const error = await refusal(
      rollback({
        location: { kind: "path", path: cloneDir },
        revision: "HEAD",
        mode: "revert",
        push: true,
        env: AUTHOR,
        cacheDir: join(h.state, "git"),
      }),
    );
    expect(error.code).toBe("E_ROLLBACK_MOVED");
    expect(error.message).toMatch(
      /^branch main moved: local [0-9a-f]{12}, origin [0-9a-f]{12}\. Pull \(or push\) first, then roll back$/,
    );
    expect(h.repo.git("-C", cloneDir, "rev-parse", "HEAD")).toBe(local);
  });

  it("rollback - the author comes from git config when the environment names none", async () => {
    const repo = makeRepo({ files: smallFleet() });
    repo.commit("web v2", web("web v2\n"));
    repo.git("config", "user.name", "Config Person");
    repo.git("config", "user.email", "config@example.test");
    await rollback({
      location: { kind: "path", path: repo.dir },
      revision: "HEAD",
      mode: "revert",
      push: false,
      env: { HOME: tempDir() },
      cacheDir: tempDir(),
    });
    expect(repo.git("log", "-1", "--format=%an <%ae>")).toBe("Config Person <config@example.test>");
  });
});
