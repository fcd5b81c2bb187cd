/**
 * One-shots across crashes over NATS, with every part a real process: the agent SIGKILLed while its
 * command runs (the attempt is delivered again to the agent that comes back, which waits for the
 * run instead of starting it again), and the hub SIGKILLed while it runs (the agent finishes, and
 * the next hub takes the result from the stream).
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { startNatsAgent, startNatsHub } from "../../helpers/nats-processes.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { assignmentYaml, nodeYaml, shell } from "../../hub/helpers/fleet.js";
import { eventually } from "../../hub/helpers/process.js";

const NODE = "edge-1";

describe("nats one-shots - never twice when the agent or the hub dies mid-command", {
  timeout: 120_000,
}, () => {
  let server: TestNatsServer;
  let dir: string;
  let repo: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    repo = makeRepo({
      files: {
        [`nodes/${NODE}.yaml`]: nodeYaml(NODE, { transport: "nats" }),
        "assignments/migrate.yaml": assignmentYaml("migrate", {
          nodes: [NODE],
          resources: [
            { kind: "directory", name: "srv", path: "/srv" },
            shell("migrate", 'echo "$STEWARD_ATTEMPT" >> "$STEWARD_ROOT/srv/runs"; sleep 2'),
          ],
        }),
      },
    }).dir;
    server = await startNatsServer();
  });
  afterEach(async () => {
    for (const child of children.splice(0).reverse()) await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  });
  afterAll(async () => {
    await server?.dispose();
    removeTempDirs();
  });

  const runs = () => {
    const path = join(dir, NODE, "srv", "runs");
    return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];
  };
  const converged = (state: string) =>
    eventually(
      async () => {
        const store = new SqliteStore(join(state, "hub.db"));
        try {
          return (await store.intents.get(`migrate@${NODE}`, 1))?.status === "converged"
            ? await store.attempts.ofInstance(`migrate@${NODE}`)
            : undefined;
        } finally {
          await store.close();
        }
      },
      60_000,
      "the instance to converge",
    );
  const kill = async (child: ChildProcess) => {
    child.kill("SIGKILL");
    if (child.exitCode === null && child.signalCode === null)
      await new Promise((resolve) => child.once("exit", resolve));
  };

  it("nats one-shot - an agent killed while its command runs comes back, waits for the run, and never starts it again", async () => {
    dir = mkdtempSync(join(tmpdir(), "steward-nats-oneshot-"));
    const state = join(dir, "hub");
    children.push(await startNatsHub({ cwd: dir, state, repo, url: server.url }));
    const agent = await startNatsAgent({ cwd: dir, url: server.url, node: NODE });
    children.push(agent);
    await eventually(() => runs().length === 1, 30_000, "the command to start");
    await kill(agent);
    children.push(await startNatsAgent({ cwd: dir, url: server.url, node: NODE }));
    const attempts = await converged(state);
    expect(runs()).toHaveLength(1);
    expect(attempts.at(-1)).toMatchObject({ status: "succeeded" });
  });

  it("nats one-shot - a hub killed while the command runs gets its result from the stream, and nothing runs twice", async () => {
    dir = mkdtempSync(join(tmpdir(), "steward-nats-oneshot-"));
    const state = join(dir, "hub");
    const hub = await startNatsHub({ cwd: dir, state, repo, url: server.url });
    children.push(hub, await startNatsAgent({ cwd: dir, url: server.url, node: NODE }));
    await eventually(() => runs().length === 1, 30_000, "the command to start");
    await kill(hub);
    children.push(
      await startNatsHub({ cwd: dir, log: join(dir, "hub-2.log"), state, repo, url: server.url }),
    );
    const [attempt, ...later] = await converged(state);
    expect(runs()).toEqual([attempt!.id]);
    expect(attempt).toMatchObject({ status: "succeeded", settledBy: "result" });
    expect(later).toEqual([]);
  });
});
