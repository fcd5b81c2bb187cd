/**
 * Several hub replicas on one PostgreSQL store, as processes: `steward hub --store postgres://...
 * --nats URL` twice, and an agent process per node on a real nats-server. They divide the nodes between them by leases (every replica works), one
 * syncs; when one dies its nodes move to the other within the replica lease and every instance
 * converges with no one-shot run twice; one paused past its lease is fenced — the other takes its
 * nodes, and once resumed it gives them up instead of writing for them.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/io.js";
import { shardOf } from "../../src/model/shards.js";
import { stopChild } from "../../src/transport/nats/server.js";
import { runCli } from "../helpers/cli.js";
import { makeRepo, type TempRepo } from "../helpers/git.js";
import { startNatsAgent, startNatsHub } from "../helpers/nats-processes.js";
import { startNatsServer, type TestNatsServer } from "../helpers/nats-server.js";
import { startPostgresServer, type TestPostgresServer } from "../helpers/postgres-server.js";
import { assignmentYaml, file, nodeYaml, shell } from "./helpers/fleet.js";
import { eventually as eventuallyOr } from "./helpers/process.js";

let server: TestPostgresServer;
let nats: TestNatsServer;
beforeAll(async () => {
  server = await startPostgresServer();
  nats = await startNatsServer();
});
afterAll(async () => {
  await server?.dispose();
  await nats?.dispose();
});

/** Each test's own node names: the NATS server (and its per-node consumers) is shared by the file. */
let NODES: string[] = [];

/** Every node gets a file and a one-shot that appends the version to srv/runs under its root. */
const fleet = (version: string) => ({
  ...Object.fromEntries(NODES.map((n) => [`nodes/${n}.yaml`, nodeYaml(n, { transport: "nats" })])),
  "assignments/app.yaml": assignmentYaml("app", {
    nodes: NODES,
    rollout: { maxInFlight: 2 },
    resources: [
      { kind: "directory", name: "srv", path: "/srv" },
      file("conf", version),
      shell("migrate", `echo ${version} >> "$STEWARD_ROOT/srv/runs"; sleep 0.2`),
    ],
  }),
});

interface ReplicaRow {
  id: string;
  address?: string;
  session?: string;
  live: boolean;
  sync: boolean;
  nodes: number;
  leases: { name: string; token: number }[];
}

interface Cluster {
  dir: string;
  repo: TempRepo;
  url: string;
  root: string;
  hubs: ChildProcess[];
  start(name: string): Promise<ChildProcess>;
  replicas(): Promise<ReplicaRow[]>;
  status(): Promise<{ answer: string; counted: number } | undefined>;
  runs(node: string): string[];
  log(name: string): string;
  dispose(): Promise<void>;
}

let clusters = 0;

/** Eight nodes on agents over NATS, a fresh database, and hub replicas with replica lease `lease`. */
async function cluster(lease = "3s"): Promise<Cluster> {
  clusters++;
  NODES = Array.from({ length: 8 }, (_, i) => `c${clusters}-n${i + 1}`);
  const dir = mkdtempSync(join(tmpdir(), "steward-replicas-"));
  const repo = makeRepo({ files: fleet("v1") });
  const url = await server.createDatabase();
  const root = join(dir, "root");
  const hubs: ChildProcess[] = [];
  const agents: ChildProcess[] = [];
  for (const node of NODES)
    agents.push(await startNatsAgent({ cwd: dir, url: nats.url, node, root: join(root, node) }));
  const log = (name: string) => {
    const path = join(dir, `${name}.log`);
    if (!existsSync(path)) return "";
    // What a replica decided and what went wrong, not every attempt's hand-over.
    const lines = readFileSync(path, "utf8")
      .split("\n")
      .filter((line) =>
        /"component":"(replica|syncer)"|"level":[456]0|took over|took in|^steward/.test(line),
      );
    return lines.slice(-40).join("\n").slice(-12_000);
  };
  logs = () => ["a", "b"].map((name) => `--- ${name}:\n${log(name)}`).join("\n");
  return {
    dir,
    repo,
    url,
    root,
    hubs,
    async start(name) {
      const hub = await startNatsHub({
        cwd: dir,
        log: join(dir, `${name}.log`),
        state: join(dir, name),
        repo: repo.dir,
        url: nats.url,
        args: ["--store", url, "--replica-lease", lease, "--status", "none", "--debug"],
      });
      hubs.push(hub);
      return hub;
    },
    async replicas() {
      const run = await runCli(["--store", url, "get", "replicas", "-o", "json"], dir, {});
      expect(run.stderr).toBe("");
      return (JSON.parse(run.stdout) as ReplicaRow[]).filter((r) => r.live);
    },
    async status() {
      const run = await runCli(["--store", url, "status", "--json"], dir, {});
      return run.code === EXIT.ok || run.code === 3
        ? (JSON.parse(run.stdout) as { answer: string; counted: number })
        : undefined;
    },
    runs(node) {
      const path = join(root, node, "srv", "runs");
      return existsSync(path) ? readFileSync(path, "utf8").trim().split("\n") : [];
    },
    log,
    async dispose() {
      for (const hub of hubs) {
        if (hub.exitCode !== null || hub.signalCode !== null) continue;
        hub.kill("SIGCONT");
        hub.kill("SIGKILL");
        await new Promise((resolve) => hub.once("exit", resolve));
      }
      for (const agent of agents) await stopChild(agent);
      if (process.env.KEEP) console.log("KEPT", dir);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `eventually`, with the replicas' logs (read when it gives up) in its failure. */
let logs: () => string = () => "";
async function eventually<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
  what: string,
): Promise<T> {
  try {
    return await eventuallyOr(check, timeoutMs, what);
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${logs()}`);
  }
}

const shardsOf = (row: ReplicaRow) => row.leases.filter((l) => l.name.startsWith("shard:")).length;
/** How many of the test's nodes are in the shards a replica holds. */
const nodesIn = (row: ReplicaRow) => {
  const held = new Set(row.leases.map((l) => l.name));
  return NODES.filter((node) => held.has(`shard:${shardOf(node)}`)).length;
};

describe("hub replicas on PostgreSQL", () => {
  it("replicas - two hubs divide the nodes and both work; one SIGKILLed mid-rollout, the other takes its nodes long before its 15 s lease runs out and every instance converges, no one-shot twice", async () => {
    // A long lease: the dead replica's session ends with its process, and the survivor takes its
    // nodes on seeing that rather than when the lease (renewed every 5 s) runs out 10–15 s later.
    const c = await cluster("15s");
    try {
      await c.start("a");
      await c.start("b");
      const both = await eventually(
        async () => {
          const rows = await c.replicas();
          return rows.length === 2 && rows.every((r) => shardsOf(r) > 0) ? rows : undefined;
        },
        30_000,
        "two replicas holding shards",
      );
      expect(both.reduce((n, r) => n + shardsOf(r), 0)).toBe(64);
      expect(both.filter((r) => r.sync)).toHaveLength(1);
      await eventually(async () => (await c.status())?.answer === "right", 60_000, "v1 to converge");
      // Counted at each renewal of the leases: within one replica lease of the rollout, each
      // replica the nodes of the shards it holds (the division is by hashing the random replica
      // ids: now and then one holds all eight).
      await eventually(
        async () => {
          const rows = await c.replicas();
          return rows.length === 2 && rows.every((r) => r.nodes === nodesIn(r));
        },
        15_000,
        "each replica counting the nodes of its shards",
      );
      for (const node of NODES) expect(c.runs(node)).toEqual(["v1"]);

      c.repo.commit("v2", fleet("v2"));
      // Mid-rollout: some nodes have run v2's one-shot, not all.
      await eventually(() => NODES.some((n) => c.runs(n).includes("v2")), 30_000, "v2 to start rolling out");
      const killed = c.hubs[0]!;
      killed.kill("SIGKILL");
      await new Promise((resolve) => killed.once("exit", resolve));
      const killedAt = Date.now();
      const survivor = await eventually(
        async () => {
          const rows = await c.replicas();
          return rows.length === 1 && shardsOf(rows[0]!) === 64 ? rows[0] : undefined;
        },
        15_000,
        "the survivor to hold every shard",
      );
      expect(Date.now() - killedAt).toBeLessThan(8_000);
      expect(survivor.sync).toBe(true);
      expect(survivor.session).toBe(`steward ${survivor.id}`);
      // Its /metrics say what it holds, and the process's own figures beside them.
      const metrics = await (await fetch(`${survivor.address}/metrics`)).text();
      expect(metrics).toMatch(/^steward_replica_shards 64$/m);
      expect(metrics).toMatch(/^process_resident_memory_bytes [1-9]\d+$/m);
      expect(metrics).toMatch(/^nodejs_heap_size_used_bytes [1-9]\d+$/m);
      await eventually(
        async () => {
          const status = await c.status();
          return status?.answer === "right" && NODES.every((n) => c.runs(n).includes("v2"));
        },
        60_000,
        "v2 to converge on the survivor",
      );
      for (const node of NODES) expect(c.runs(node), node).toEqual(["v1", "v2"]);
    } finally {
      await c.dispose();
    }
  }, 300_000);

  it("replicas - a replica SIGSTOPped past its lease is fenced: the other takes its nodes, and once resumed it writes nothing for them and gives them up", async () => {
    const c = await cluster();
    try {
      const paused = await c.start("a");
      await eventually(async () => (await c.replicas()).length === 1, 30_000, "a to start");
      await c.start("b");
      await eventually(
        async () => {
          const rows = await c.replicas();
          return rows.length === 2 && rows.every((r) => shardsOf(r) > 0);
        },
        30_000,
        "both replicas to hold shards",
      );
      await eventually(async () => (await c.status())?.answer === "right", 60_000, "v1 to converge");
      const before = await c.replicas();
      const a = before.find((r) => r.sync)!; // the first to start took the sync lease
      expect(a).toBeDefined();
      paused.kill("SIGSTOP");
      // Past the lease: b holds every shard and syncs, and rolls a new commit out on every node.
      const b = await eventually(
        async () => {
          const rows = (await c.replicas()).filter((r) => r.id !== a.id);
          return rows.length === 1 && shardsOf(rows[0]!) === 64 && rows[0]!.sync ? rows[0] : undefined;
        },
        15_000,
        "b to take every shard from the paused replica",
      );
      // Its shards changed hands: each has a greater fencing token than the paused replica's.
      const tokens = new Map(a.leases.map((l) => [l.name, l.token] as const));
      for (const lease of b.leases.filter((l) => tokens.has(l.name)))
        expect(lease.token, lease.name).toBeGreaterThan(tokens.get(lease.name)!);
      c.repo.commit("v2", fleet("v2"));
      await eventually(
        async () => (await c.status())?.answer === "right" && NODES.every((n) => c.runs(n).includes("v2")),
        60_000,
        "v2 to converge on b",
      );
      paused.kill("SIGCONT");
      // Resumed, it finds its leases gone: it holds nothing it held before (some may come back by
      // rebalancing, with new tokens), and nothing ran twice.
      const after = await eventually(
        async () => {
          const rows = await c.replicas();
          const again = rows.find((r) => r.id === a.id);
          return again && rows.length === 2 && shardsOf(again) > 0 ? rows : undefined;
        },
        30_000,
        "the resumed replica to rejoin",
      );
      const resumed = after.find((r) => r.id === a.id)!;
      for (const lease of resumed.leases.filter((l) => l.name.startsWith("shard:")))
        expect(lease.token, lease.name).toBeGreaterThan(tokens.get(lease.name) ?? 0);
      await eventually(async () => (await c.status())?.answer === "right", 30_000, "the fleet to stay right");
      for (const node of NODES) expect(c.runs(node), node).toEqual(["v1", "v2"]);
    } finally {
      await c.dispose();
    }
  }, 300_000);
});
