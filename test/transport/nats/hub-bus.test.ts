import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/main.js";
import type { ConditionRecord } from "../../../src/hub/records.js";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import {
  type ConditionChange,
  type ConditionWatch,
  watchConditions,
} from "../../../src/transport/nats/conditions.js";
import { connectNats } from "../../../src/transport/nats/connect.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { CONDITIONS_BUCKET, identities } from "../../../src/transport/nats/subjects.js";
import { serveTasks, type TaskAgent, type TaskMessage } from "../../../src/transport/nats/tasks.js";
import { ensureTopology } from "../../../src/transport/nats/topology.js";
import { type CliRun, runCli } from "../../helpers/cli.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { startNatsAgent, startNatsHub } from "../../helpers/nats-processes.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { assignmentYaml, file, fleetYaml, nodeYaml } from "../../hub/helpers/fleet.js";
import { eventually, runSteward, startSteward } from "../../hub/helpers/process.js";

const NODE = "edge-7";
/** The fleet's heartbeat: a beat a second, silent after two missed. */
const INTERVAL_MS = 1_000;
const MISSED = 2;

/** A child's exit, whenever it comes. */
function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once("exit", (code, signal) => resolve({ code, signal }));
  });
}

describe("nats hub bus - a real hub mirrors its conditions to KV and hands tasks to a queue group", {
  timeout: 120_000,
}, () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-hub-bus-"));
  const hubState = join(dir, "hub-state");
  const creds = (path: string) => join(dir, "bus", "credentials", path);
  const children: ChildProcess[] = [];
  const connections: NatsConnection[] = [];
  let server: TestNatsServer;
  let agent: ChildProcess;
  let store: SqliteStore;
  let watch: ConditionWatch;
  let taskAgent: TaskAgent;
  /** What a watcher on KV steward-conditions saw, with the viewer's credentials. */
  const seen: ConditionChange[] = [];
  /** Tasks the task agent took from the queue group; each waits until the test lets it finish. */
  const taken: TaskMessage[] = [];
  let finishTask: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    finishTask = resolve;
  });
  const watchers: { bus?: ChildProcess; db?: ChildProcess } = {};
  let beforeAnyHub: CliRun;
  const log = (name: string) => {
    const path = join(dir, name);
    return existsSync(path) ? readFileSync(path, "utf8") : "";
  };
  const silentConditions = async () =>
    (await store.conditions.list({ type: "NodeSilent" })).filter(
      (c) => c.subject === NODE,
    ) as ConditionRecord[];

  beforeAll(async () => {
    const repo = makeRepo({
      files: {
        "steward.yaml": fleetYaml({ heartbeat: { interval: `${INTERVAL_MS}ms`, missed: MISSED } }),
        [`nodes/${NODE}.yaml`]: nodeYaml(NODE, { transport: "nats" }),
        "assignments/motd.yaml": assignmentYaml("motd", {
          nodes: [NODE],
          resources: [file("motd", "watched over NATS\n")],
        }),
      },
    }).dir;

    const io = { stdout: () => {}, stderr: () => {}, env: {}, cwd: dir, isTty: false };
    expect(
      await main(
        ["nats", "config", "--static", "--out", "bus", "--nodes-from", repo, "--task-agent", "triage"],
        io,
      ),
    ).toBe(0);
    server = await startNatsServer({ configFile: join(dir, "bus", "nats-server.conf") });

    // Before any hub ran, there is nothing to watch, and the viewer is told so.
    beforeAnyHub = await runCli(
      ["--state", hubState, "status", "--nats", server.url, "--nats-creds", creds("viewer.nk")],
      dir,
    );

    // A condition the bucket holds from some earlier life, which no hub has open: stale.
    const admin = await connectNats({ servers: server.url, creds: creds("hub.nk"), identity: "hub" });
    connections.push(admin);
    await ensureTopology(admin, await jetstreamManager(admin));
    const kv = await new Kvm(admin).open(CONDITIONS_BUCKET);
    await kv.put("01STALE0000000000000000000", JSON.stringify({ id: "01STALE0000000000000000000" }));

    children.push(
      await startNatsHub({ cwd: dir, state: hubState, repo, url: server.url, creds: creds("hub.nk") }),
    );
    agent = await startNatsAgent({
      cwd: dir,
      url: server.url,
      node: NODE,
      creds: creds(`nodes/${NODE}.nk`),
      heartbeat: `${INTERVAL_MS}ms`,
    });
    children.push(agent);

    const viewer = await connectNats({ servers: server.url, creds: creds("viewer.nk"), identity: "viewer" });
    connections.push(viewer);
    watch = await watchConditions(viewer, (change) => {
      seen.push(change);
    });
    const triage = await connectNats({
      servers: server.url,
      creds: creds("task-agents/triage.nk"),
      identity: identities.taskAgent("triage"),
    });
    connections.push(triage);
    taskAgent = await serveTasks({
      nc: triage,
      name: "triage",
      handle: async (task) => {
        taken.push(task);
        await finished;
        return { outcome: "resolved", action: "found the host paused by its hypervisor and resumed it" };
      },
    });

    await eventually(
      () => existsSync(join(dir, NODE, "srv", "motd")),
      60_000,
      `the file on ${NODE} (hub log:\n${log("hub.log").slice(-3000)})`,
    );
    store = new SqliteStore(join(hubState, "hub.db"));
    await eventually(
      async () => (await store.conditions.list({ status: "open" })).length === 0,
      30_000,
      "no open condition",
    );
  }, 120_000);

  afterAll(async () => {
    finishTask();
    if (agent?.signalCode === null) agent.kill("SIGCONT");
    await taskAgent?.stop();
    await watch?.stop();
    for (const nc of connections) await nc.close();
    for (const child of [...Object.values(watchers), ...children].reverse())
      if (child) await stopChild(child);
    store?.close();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
    removeTempDirs();
  });

  it("nats hub bus - the hub replaces the whole bucket when it starts: a stale condition is removed", async () => {
    const kv = await new Kvm(connections[0] as NatsConnection).open(CONDITIONS_BUCKET);
    const keys: string[] = [];
    for await (const key of await kv.keys()) keys.push(key);
    expect(keys).toEqual([]);
  });

  it("nats hub bus - status --nats says in one line when there is no bucket yet or the credentials cannot read it", async () => {
    expect(beforeAnyHub).toMatchObject({ code: 2, stdout: "" });
    expect(beforeAnyHub.stderr).toBe(
      "steward: the NATS server has no KV bucket steward-conditions: no hub has run on it yet (start `steward hub --nats URL` first)\n",
    );
    const asNode = await runCli(
      ["--state", hubState, "status", "--nats", server.url, "--nats-creds", creds(`nodes/${NODE}.nk`)],
      dir,
    );
    expect(asNode.code).toBe(2);
    for (const [args, message] of [
      [["--nats-creds", creds("viewer.nk")], "--nats-creds only applies with --nats URL"],
      [
        ["--watch", "--revision", "abc"],
        "--revision shows one commit's statuses: leave out --watch and --nats",
      ],
    ] as const)
      expect(await runCli(["--state", hubState, "status", ...args], dir)).toMatchObject({
        code: 2,
        stderr: expect.stringMatching(new RegExp(`^steward: ${message}[^\n]*\n$`)),
      });
    // A node's credentials are known for whose they are, before any bucket is read.
    expect(asNode.stderr).toMatch(
      /^steward: the credentials .+edge-7\.nk are node "edge-7"'s, not the viewer's: .* pass the viewer's own credentials \(`steward nats config` writes them as credentials\/viewer\.nk\)\n$/,
    );
  });

  it("nats hub bus - status --watch, over the bus and on the database, prints what is open when it starts", async () => {
    const base = ["--state", hubState, "status", "--watch"];
    watchers.bus = await startSteward([...base, "--nats", server.url, "--nats-creds", creds("viewer.nk")], {
      cwd: dir,
      log: join(dir, "watch-bus.log"),
    });
    watchers.db = await startSteward(base, { cwd: dir, log: join(dir, "watch-db.log") });
    for (const name of ["watch-bus.log", "watch-db.log"])
      await eventually(() => /Ctrl-C to stop/.test(log(name)), 30_000, `${name} to start watching`);
    expect(log("watch-bus.log")).toMatch(/^no open conditions: the fleet is right$/m);
    expect(log("watch-bus.log")).toContain(`watching KV steward-conditions on ${server.url}`);
    expect(log("watch-db.log")).toMatch(/^no open conditions: the fleet is right$/m);
    // Without --watch, once; --json is one object (a watch prints one per change after it).
    const once = await runCli(
      ["--state", hubState, "status", "--nats", server.url, "--nats-creds", creds("viewer.nk"), "--json"],
      dir,
    );
    expect(once.code).toBe(0);
    expect(JSON.parse(once.stdout)).toEqual({ event: "open", ok: true, open: 0, conditions: [] });
  });

  it("nats hub bus - a stopped agent process is NodeSilent after its window; KV, both watchers and a task agent see it", async () => {
    agent.kill("SIGSTOP");
    const stoppedAt = Date.now();
    const silent = await eventually(
      async () => (await silentConditions()).find((c) => c.status === "open"),
      30_000,
      `NodeSilent on ${NODE} (hub log:\n${log("hub.log").slice(-2000)})`,
    );
    // By a timer at the end of the window since the last beat the hub heard, not sooner.
    const lastHeard = Date.parse(silent.evidence?.lastHeardAt as string);
    expect(Date.parse(silent.openedAt) - lastHeard).toBeGreaterThanOrEqual(INTERVAL_MS * MISSED);
    expect(lastHeard).toBeLessThanOrEqual(stoppedAt);
    expect(silent).toMatchObject({ reason: "HeartbeatMissed", subjectKind: "node" });

    // Mirrored: the KV watcher saw it put under its id.
    const put = await eventually(
      () => seen.find((c) => c.kind === "open" && c.id === silent.id),
      10_000,
      "the condition in KV",
    );
    expect(put).toMatchObject({ initial: false, condition: { type: "NodeSilent", subject: NODE } });

    // Both watching processes print a line for it.
    const opened = new RegExp(`opened\\s+NodeSilent node ${NODE} HeartbeatMissed: .* \\[1 open\\]`);
    for (const name of ["watch-bus.log", "watch-db.log"])
      await eventually(() => opened.test(log(name)), 15_000, `${name} to print the opening`);

    // NodeSilent needs judgement: its task went out on steward.tasks, and the claim came back.
    const task = await eventually(() => taken[0], 15_000, "the task on the queue group");
    expect(task).toMatchObject({
      type: "NodeSilent",
      subjectKind: "node",
      subject: NODE,
      condition: { id: silent.id },
    });
    const listed = async () =>
      JSON.parse((await runSteward(["--state", hubState, "tasks", "--json"], { cwd: dir })).stdout) as {
        task: { id: string; status: string; claimedBy?: string; publishedAt?: string };
      }[];
    let tasks = await listed();
    for (let tries = 0; tasks[0]?.task.status !== "claimed" && tries < 30; tries++) {
      await new Promise((r) => setTimeout(r, 300));
      tasks = await listed();
    }
    expect(tasks.map((t) => t.task)).toEqual([
      expect.objectContaining({ id: task.id, status: "claimed", claimedBy: "triage" }),
    ]);
    expect(tasks[0]?.task.publishedAt).toBeDefined();
  });

  it("nats hub bus - the agent resumes: NodeSilent resolves, its key is deleted, both watchers print it", async () => {
    const silent = (await silentConditions()).find((c) => c.status === "open") as ConditionRecord;
    agent.kill("SIGCONT");
    await eventually(
      async () => (await store.conditions.get(silent.id))?.status === "resolved",
      30_000,
      "NodeSilent to resolve",
    );
    await eventually(
      () => seen.some((c) => c.kind === "resolved" && c.id === silent.id),
      10_000,
      "the key's deletion",
    );
    const resolved = new RegExp(`resolved\\s+NodeSilent node ${NODE} HeartbeatMissed.* \\[0 open\\]`);
    for (const name of ["watch-bus.log", "watch-db.log"])
      await eventually(() => resolved.test(log(name)), 15_000, `${name} to print the resolution`);
    expect(log("watch-db.log")).toMatch(
      new RegExp(`resolved\\s+NodeSilent node ${NODE} HeartbeatMissed: heard from node ${NODE}`),
    );
  });

  it("nats hub bus - the task agent's resolution and action are recorded, as `steward tasks` shows", async () => {
    finishTask();
    const run = async () => runSteward(["--state", hubState, "tasks", "--all", "--json"], { cwd: dir });
    let views = JSON.parse((await run()).stdout) as { task: Record<string, string> }[];
    for (let tries = 0; views[0]?.task.status !== "resolved" && tries < 30; tries++) {
      await new Promise((r) => setTimeout(r, 300));
      views = JSON.parse((await run()).stdout);
    }
    expect(views.map((v) => v.task)).toEqual([
      expect.objectContaining({
        status: "resolved",
        claimedBy: "triage",
        resolvedBy: "triage",
        action: "found the host paused by its hypervisor and resumed it",
      }),
    ]);
  });

  it("nats hub bus - status --watch ends on SIGINT, cleanly, with exit 0 when nothing is open", async () => {
    for (const [name, child] of Object.entries(watchers)) {
      if (!child) continue;
      const exit = exited(child);
      child.kill("SIGINT");
      expect(await exit, name).toEqual({ code: 0, signal: null });
      delete watchers[name as keyof typeof watchers];
    }
    for (const name of ["watch-bus.log", "watch-db.log"]) expect(log(name)).not.toMatch(/Error|\n\s+at /);
  });
});
