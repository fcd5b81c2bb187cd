/**
 * `steward sync` with a hub running on the state directory: the hub syncs at once (not at its
 * interval) and the command prints what that sync did; a hub recorded but gone never makes it
 * wait, it syncs itself and says so. Real hub processes on real git repositories.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type HubFile, readHubFile, statePathsIn } from "../../src/cli/hub-state.js";
import { EXIT } from "../../src/cli/io.js";
import { stopChild } from "../../src/transport/nats/server.js";
import { runCli } from "../helpers/cli.js";
import { makeRepo, removeTempDirs, type TempRepo, tempDir } from "../helpers/git.js";
import { assignmentYaml, file, nodes } from "../hub/helpers/fleet.js";
import { eventually, startSteward } from "../hub/helpers/process.js";

const app = (content: string) => assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", content)] });

interface RunningHub {
  repo: TempRepo;
  state: string;
  root: string;
  child: ChildProcess;
  record: HubFile;
}

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) await stopChild(child);
});
afterAll(() => removeTempDirs());

/** A hub process on a fresh fleet repository, syncing by itself only once an hour. */
async function runningHub(): Promise<RunningHub> {
  const repo = makeRepo({ files: { ...nodes("n1"), "assignments/app.yaml": app("v1\n") } });
  const work = tempDir("steward-sync-hub-");
  const state = join(work, "state");
  const root = join(work, "root");
  const child = await startSteward(
    [
      "--state",
      state,
      "hub",
      "--repo",
      repo.dir,
      "--root",
      root,
      "--listen",
      "127.0.0.1:0",
      "--sync-interval",
      "1h",
    ],
    { cwd: work, log: join(work, "hub.log") },
  );
  children.push(child);
  const record = await eventually(
    () => readHubFile(statePathsIn(state)),
    30_000,
    `the hub to record itself (log: ${join(work, "hub.log")})`,
  );
  return { repo, state, root, child, record };
}

/** A loopback port that was free a moment ago, and nothing listens on now. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const sync = (hub: { state: string }, ...args: string[]) =>
  runCli(["--state", hub.state, "sync", ...args], tempDir("steward-sync-cwd-"));

describe("sync - through the running hub", () => {
  it("sync - the running hub syncs now, and the command prints the revision and generations it made", async () => {
    const hub = await runningHub();
    const conf = join(hub.root, "n1", "srv", "conf");
    await eventually(() => existsSync(conf), 30_000, "the first generation applied");
    const sha = hub.repo.commit("conf v2", { "assignments/app.yaml": app("v2\n") });

    const run = await sync(hub);
    expect(run).toEqual({
      code: EXIT.ok,
      stdout: `applied ${sha.slice(0, 12)} "conf v2": 1 new generation (app@n1→2), 0 retired, 0 unchanged\n(synced by the running hub, pid ${hub.record.pid} at ${hub.record.url})\n`,
      stderr: "",
    });
    // The hub took it in at once: its next sync was an hour away.
    await eventually(() => readFileSync(conf, "utf8") === "v2\n", 30_000, "generation 2 applied");

    const again = await sync(hub, "-o", "json");
    expect(again.code).toBe(EXIT.ok);
    expect(JSON.parse(again.stdout)).toEqual({
      kind: "up-to-date",
      branch: "main",
      head: sha,
      lastGood: sha,
      syncedBy: "hub",
      hub: { pid: hub.record.pid, url: hub.record.url },
    });
  }, 90_000);

  it("sync - an invalid revision synced by the hub is printed with file:line, exit 1", async () => {
    const hub = await runningHub();
    const sha = hub.repo.commit("typo", {
      "assignments/app.yaml": app("v2\n").replace("path: /srv/conf", "pathh: /srv/conf"),
    });
    const run = await sync(hub);
    expect(run.code).toBe(EXIT.problems);
    expect(run.stdout).toMatch(/^assignments\/app\.yaml:\d+:\d+: error: .*pathh/m);
    expect(run.stdout).toContain(
      `invalid ${sha.slice(0, 12)}: 2 errors; nothing advanced, still serving ${hub.repo.rev("HEAD~1").slice(0, 12)}\n(synced by the running hub, pid ${hub.record.pid} at ${hub.record.url})\n`,
    );
    const json = JSON.parse((await sync(hub, "-o", "json")).stdout);
    expect(json).toMatchObject({ kind: "up-to-date", syncedBy: "hub" });
  }, 90_000);

  it("sync - refuses to have the hub sync another repository or branch than the one it tracks", async () => {
    const hub = await runningHub();
    const other = makeRepo({ files: nodes("n1") });
    const repo = await sync(hub, "--repo", other.dir);
    expect(repo).toMatchObject({ code: EXIT.usage, stdout: "" });
    expect(repo.stderr).toBe(
      `steward: --repo ${JSON.stringify(other.dir)} is not the repository the hub running on this state directory (pid ${hub.record.pid}) tracks (${hub.repo.dir}): leave --repo out to sync that one, or give this one its own --state DIR\n`,
    );
    const branch = await sync(hub, "--branch", "prod");
    expect(branch.code).toBe(EXIT.usage);
    expect(branch.stderr).toMatch(/^steward: --branch "prod" is not the branch .* tracks \(main\)/);
    // The same repository, spelled as the user may: fine.
    expect((await sync(hub, "--repo", hub.repo.dir, "--branch", "main")).code).toBe(EXIT.ok);
  }, 90_000);

  it("sync - only the holder of the hub's token may ask it to sync: hub.json is its owner's alone", async () => {
    const hub = await runningHub();
    expect(statSync(statePathsIn(hub.state).hubFile).mode & 0o777).toBe(0o600);
    const anonymous = await fetch(`${hub.record.url}/sync`, { method: "POST", body: "{}" });
    expect(anonymous.status).toBe(401);
    const wrong = await fetch(`${hub.record.url}/sync`, {
      method: "POST",
      headers: { authorization: "Bearer not-the-token" },
      body: "{}",
    });
    expect(wrong.status).toBe(401);
    const right = await fetch(`${hub.record.url}/sync`, {
      method: "POST",
      headers: { authorization: `Bearer ${hub.record.token}` },
      body: "{}",
    });
    expect(right.status).toBe(200);
    expect(await right.json()).toMatchObject({ outcome: { kind: "up-to-date" } });
  }, 90_000);

  it("sync - a hub recorded but killed: the command syncs itself at once and says why", async () => {
    const hub = await runningHub();
    hub.child.kill("SIGKILL");
    await new Promise((resolve) => hub.child.once("exit", resolve));
    const sha = hub.repo.commit("conf v2", { "assignments/app.yaml": app("v2\n") });
    const started = Date.now();
    const run = await sync(hub, "--repo", hub.repo.dir);
    expect(run).toEqual({
      code: EXIT.ok,
      stdout: `applied ${sha.slice(0, 12)} "conf v2": 1 new generation (app@n1→2), 0 retired, 0 unchanged\n`,
      stderr: `steward: warning: the hub recorded in ${statePathsIn(hub.state).hubFile} (pid ${hub.record.pid}) is gone: its process ${hub.record.pid} is not running; syncing here instead\n`,
    });
    // No wait for an answer that cannot come (the probe's own bound is 2 s).
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 90_000);

  it("sync - a hub.json whose address answers nothing: the command syncs itself and says so", async () => {
    const repo = makeRepo({ files: { ...nodes("n1"), "assignments/app.yaml": app("v1\n") } });
    const state = tempDir("steward-sync-stale-");
    // This test's own pid (alive) at a port nothing listens on: a pid reused since the hub died.
    const port = await closedPort();
    writeFileSync(
      statePathsIn(state).hubFile,
      JSON.stringify({ pid: process.pid, url: `http://127.0.0.1:${port}`, startedAt: "", transports: [] }),
    );
    const run = await sync({ state }, "--repo", repo.dir, "-o", "json");
    expect(run.code).toBe(EXIT.ok);
    expect(run.stderr).toMatch(
      /^steward: warning: the hub recorded in \S+hub\.json \(pid \d+\) is gone: it does not answer at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\); syncing here instead\n$/,
    );
    expect(JSON.parse(run.stdout)).toMatchObject({ kind: "applied", syncedBy: "command" });
  });
});
