/**
 * The hub on PostgreSQL: the same product path as on SQLite (real syncer, hub, local transport and
 * agents) with its state in a real PostgreSQL server, and the commands that read it finding it by
 * `--store`, STEWARD_STORE, or the location a running hub recorded in hub.json (without password).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { statePathsIn, writeHubFile } from "../../src/cli/hub-state.js";
import { EXIT } from "../../src/cli/io.js";
import { PostgresStore } from "../../src/hub/store/postgres.js";
import { runCli } from "../helpers/cli.js";
import { makeRepo } from "../helpers/git.js";
import { startPostgresServer, type TestPostgresServer } from "../helpers/postgres-server.js";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";
import { eventually, startSteward } from "./helpers/process.js";

let server: TestPostgresServer;
beforeAll(async () => {
  server = await startPostgresServer();
});
afterAll(() => server?.dispose());

const fleet = (version: string) => ({
  ...nodes("n1", "n2"),
  "assignments/app.yaml": assignmentYaml("app", {
    nodes: ["n1", "n2"],
    resources: [file("conf", version)],
  }),
});

describe("hub on PostgreSQL", () => {
  it("hub - on PostgreSQL a commit converges, a newer one supersedes it, and a restarted hub finishes what the last left", async () => {
    const url = await server.createDatabase();
    const h = await startHarness({ files: fleet("v1"), store: () => PostgresStore.open({ url }) });
    await h.commit("v1");
    await h.settle();
    expect((await h.intent("app@n1")).status).toBe("converged");
    expect(h.read("n1", "srv/conf")).toBe("v1");

    // Written while the hub is down: the next hub takes it in from the store and delivers it.
    await h.stopHub();
    h.write(fleet("v2"));
    await h.commit("v2");
    await h.startHub();
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ generation: 2, status: "converged" });
    expect(await h.intent("app@n2")).toMatchObject({ generation: 2, status: "converged" });
    expect(h.read("n2", "srv/conf")).toBe("v2");
    // Generation 1's intents end superseded; each generation was attempted once.
    expect((await h.store.intents.list({ status: "superseded" })).map((i) => i.generation)).toEqual([1, 1]);
    const attempts = await h.store.attempts.ofInstance("app@n1");
    expect(attempts.map((a) => [a.generation, a.status]).sort()).toEqual([
      [1, "succeeded"],
      [2, "succeeded"],
    ]);
  });

  it("hub - on PostgreSQL a permanent failure is Blocked with a task, and `steward tasks resolve` through hub.json records the answer", async () => {
    const url = await server.createDatabase();
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [shell("refuse", "echo 'DestructiveRepairNeeded' >&2; exit 1")],
          budget: { attempts: 1, within: "1h" },
        }),
      },
      store: () => PostgresStore.open({ url }),
    });
    await h.commit();
    await h.settle();
    const open = await h.store.conditions.list({ status: "open" });
    expect(open.map((c) => c.type)).toContain("Stuck");
    const [task] = await h.store.tasks.list({ status: "open" });
    expect(task).toBeDefined();

    // What a running hub records: its store, with no password in it.
    writeHubFile(statePathsIn(h.dir), {
      pid: process.pid,
      url: "http://127.0.0.1:9",
      startedAt: new Date().toISOString(),
      transports: ["local"],
      store: h.store.location,
    });
    const resolved = await runCli(
      ["--state", h.dir, "tasks", "resolve", task!.id, "--action", "looked at it", "--as", "alice", "--json"],
      h.dir,
      {},
    );
    expect(resolved.stderr).toBe("");
    expect(resolved.code).toBe(EXIT.ok);
    expect(await h.store.tasks.get(task!.id)).toMatchObject({ status: "resolved", resolvedBy: "alice" });
  });
});

describe("steward hub --store postgres://...", () => {
  it("hub - `steward hub --store` runs on PostgreSQL, records the store in hub.json without its password, and `steward status` beside it reads it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-pg-hub-"));
    const repo = makeRepo({ files: fleet("v1") }).dir;
    const state = join(dir, "state");
    const url = (await server.createDatabase()).replace("steward@", "steward:s3cret@");
    const args = [
      "--state",
      state,
      "hub",
      "--repo",
      repo,
      "--root",
      join(dir, "root"),
      "--listen",
      "127.0.0.1:0",
    ];
    args.push("--store", url, "--sync-interval", "1h", "--status", "none");
    const hub = await startSteward(args, { cwd: dir, log: join(dir, "hub.log") });
    try {
      const recorded = await eventually(
        () =>
          existsSync(join(state, "hub.json")) &&
          (JSON.parse(readFileSync(join(state, "hub.json"), "utf8")) as { store?: string }),
        30_000,
        `hub.json (hub log: ${existsSync(join(dir, "hub.log")) ? readFileSync(join(dir, "hub.log"), "utf8").slice(-1500) : ""})`,
      );
      expect(recorded.store).toBe(url.replace(":s3cret", ""));
      expect(readFileSync(join(state, "hub.json"), "utf8")).not.toContain("s3cret");
      expect(existsSync(join(state, "hub.db"))).toBe(false);
      // Trust authentication here: the recorded URL needs no password to be read.
      const status = await eventually(
        async () => {
          const run = await runCli(["--state", state, "status", "--json"], dir, {});
          return run.code === EXIT.ok
            ? (JSON.parse(run.stdout) as { answer: string; counted: number })
            : undefined;
        },
        60_000,
        "the fleet to converge on PostgreSQL",
      );
      expect(status).toMatchObject({ answer: "right", counted: 2 });
    } finally {
      hub.kill("SIGTERM");
      await new Promise((resolve) => hub.once("exit", resolve));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("cli - the hub's store, wherever it is", () => {
  it("cli - --store, STEWARD_STORE and a hub's hub.json name a PostgreSQL store; anything else is a usage error", async () => {
    const url = await server.createDatabase();
    const h = await startHarness({ files: fleet("v1"), store: () => PostgresStore.open({ url }) });
    await h.commit("v1");
    await h.settle();
    const nodesOf = (run: { stdout: string }) =>
      (JSON.parse(run.stdout) as { name: string }[]).map((n) => n.name);

    // No hub.json and no flag: the state directory's own file, which a hub on PostgreSQL never made.
    const missing = await runCli(["--state", h.dir, "get", "nodes", "--json"], h.dir, {});
    expect(missing.code).toBe(EXIT.usage);
    expect(missing.stderr).toMatch(/no hub state in .*: run `steward up` \(or `steward hub`\) first/);

    const flag = await runCli(["--state", h.dir, "--store", url, "get", "nodes", "--json"], h.dir, {});
    expect(flag.code).toBe(EXIT.ok);
    expect(nodesOf(flag)).toEqual(["n1", "n2"]);

    const env = await runCli(["--state", h.dir, "get", "nodes", "--json"], h.dir, { STEWARD_STORE: url });
    expect(nodesOf(env)).toEqual(["n1", "n2"]);

    writeHubFile(statePathsIn(h.dir), {
      pid: process.pid,
      url: "http://127.0.0.1:9",
      startedAt: new Date().toISOString(),
      transports: ["local"],
      store: h.store.location,
    });
    const recorded = await runCli(["--state", h.dir, "status", "--json"], h.dir, {});
    expect(JSON.parse(recorded.stdout)).toMatchObject({ answer: "right" });

    const wrong = await runCli(["--state", h.dir, "--store", "mysql://x", "get", "nodes"], h.dir, {});
    expect(wrong.code).toBe(EXIT.usage);
    expect(wrong.stderr).toBe(
      'steward: --store "mysql://x": give sqlite:PATH (e.g. sqlite:.steward/hub.db) or postgres://USER@HOST[:PORT]/DATABASE\n',
    );
  });
});
