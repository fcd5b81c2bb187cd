/**
 * nats-server restarted at random points of a rollout, with every part a real process (the hub, an
 * agent per node) and commits coming meanwhile: every instance converges at the last generation,
 * every attempt is settled by its own result (no result or report was lost on the way), and no
 * one-shot ran twice for a generation.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { freePort } from "../../agent/helpers.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { startNatsAgent, startNatsHub, withLogs } from "../../helpers/nats-processes.js";
import { expectRolloutSettled, versionedRollout } from "../../helpers/nats-rollout.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { assignmentYaml, file, nodeYaml } from "../../hub/helpers/fleet.js";
import { eventually } from "../../hub/helpers/process.js";

const NODES = ["edge-1", "edge-2"];

const migration = (version: number) => versionedRollout(NODES, version);

describe("nats server faults - a rollout survives nats-server restarts at random points", {
  timeout: 180_000,
}, () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-faults-"));
  const children: ChildProcess[] = [];
  let server: TestNatsServer | undefined;
  afterAll(async () => {
    for (const child of children.reverse()) await stopChild(child);
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
    removeTempDirs();
  });

  it("nats server faults - every instance converges, every attempt is settled by its result, no one-shot runs twice", async () => {
    const repo = makeRepo({
      files: {
        ...Object.fromEntries(NODES.map((n) => [`nodes/${n}.yaml`, nodeYaml(n, { transport: "nats" })])),
        "assignments/app.yaml": migration(1),
      },
    });
    server = await startNatsServer();
    const state = join(dir, "hub");
    children.push(await startNatsHub({ cwd: dir, state, repo: repo.dir, url: server.url }));
    for (const node of NODES) children.push(await startNatsAgent({ cwd: dir, url: server.url, node }));

    const versions = 4;
    let head = "";
    for (let version = 2; version <= versions + 1; version++) {
      // A restart at a random point of the rollout of the commit before this one.
      await new Promise((resolve) => setTimeout(resolve, 200 + Math.random() * 1200));
      await server.restart();
      if (version <= versions)
        head = repo.commit(`version ${version}`, { "assignments/app.yaml": migration(version) });
    }

    const store = new SqliteStore(join(state, "hub.db"));
    try {
      await withLogs(dir, () =>
        eventually(
          async () => {
            for (const node of NODES) {
              // Commits fetched together make one generation: the last commit's is the one to reach.
              const desired = await store.desired.instance(`app@${node}`);
              if (desired?.revision !== head) return undefined;
              if ((await store.intents.get(desired.key, desired.generation))?.status !== "converged")
                return undefined;
            }
            return true;
          },
          90_000,
          "every instance converged at the last commit",
        ),
      );
      await expectRolloutSettled({ dir, nodes: NODES, store, version: versions });
      expect(existsSync(join(dir, "hub.log"))).toBe(true);
    } finally {
      await store.close();
    }
  });

  it("nats server faults - a hub started while its server is down waits for it, then delivers", async () => {
    const repo = makeRepo({
      files: {
        [`nodes/${NODES[0]}.yaml`]: nodeYaml(NODES[0]!, { transport: "nats" }),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: [NODES[0]!],
          resources: [file("conf", "v1\n")],
        }),
      },
    });
    const bus = await startNatsServer();
    await bus.stop();
    const work = mkdtempSync(join(dir, "down-"));
    const state = join(work, "hub");
    const log = join(work, "hub.log");
    const hub = await startNatsHub({ cwd: work, log, state, repo: repo.dir, url: bus.url });
    children.push(hub);
    await eventually(
      () => /waiting for the NATS server \(attempt 2\)/.test(readFileSync(log, "utf8")),
      30_000,
      "the hub to wait",
    );
    expect(hub.exitCode).toBeNull();
    await bus.restart();
    children.push(await startNatsAgent({ cwd: work, url: bus.url, node: NODES[0]! }));
    const store = new SqliteStore(join(state, "hub.db"));
    try {
      await eventually(
        async () =>
          (await store.intents.get(`app@${NODES[0]}`, 1))?.status === "converged" ? true : undefined,
        60_000,
        "the instance to converge once the server is up",
      );
    } finally {
      await store.close();
      await bus.dispose();
    }
  });
});

describe("nats server faults - a server without JetStream", () => {
  it("nats server faults - a hub on a server that runs without JetStream says so and stops waiting", async () => {
    const { spawn } = await import("node:child_process");
    const { locateNatsServer } = await import("../../../src/transport/nats/server.js");
    const { createNatsTransport } = await import("../../../src/transport/nats/hub.js");
    const { recordEvents } = await import("../../helpers/transport-events.js");
    const port = await freePort();
    const plain = spawn(locateNatsServer(), ["-a", "127.0.0.1", "-p", String(port)], { stdio: "ignore" });
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
      const transport = createNatsTransport({ servers: `nats://127.0.0.1:${port}`, jetStreamGraceMs: 1_000 });
      const started = Date.now();
      await expect(transport.start(recordEvents().events)).rejects.toThrow(
        /answers, but JetStream does not .*start nats-server with -js/,
      );
      expect(Date.now() - started).toBeLessThan(15_000);
      await transport.stop();
    } finally {
      plain.kill("SIGKILL");
    }
  });
});
