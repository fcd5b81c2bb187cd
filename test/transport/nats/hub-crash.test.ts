import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import { shardOf } from "../../../src/model/shards.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { hubReportsConsumer, REPORTS_STREAM, subjects } from "../../../src/transport/nats/subjects.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { startNatsAgent, startNatsHub } from "../../helpers/nats-processes.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { assignmentYaml, nodeYaml, shell } from "../../hub/helpers/fleet.js";
import { eventually } from "../../hub/helpers/process.js";

const NODE = "edge-3";

/**
 * Built into the hub process: once it has written a result into the inbox's transaction, and before
 * that transaction commits, the process is killed — the worst moment, as a power cut would choose it.
 */
const CRASH_BEFORE_COMMIT = `
import { writeFileSync } from "node:fs";
import { Ingest } from "./src/hub/ingest.ts";
const marker = process.env.STEWARD_TEST_CRASH_MARKER;
if (marker) {
  const ingest = Ingest.prototype.result;
  Ingest.prototype.result = async function (tx, result) {
    await ingest.call(this, tx, result);
    writeFileSync(marker, result.attemptId);
    process.kill(process.pid, "SIGKILL");
  };
}
`;

function exited(child: ChildProcess): Promise<NodeJS.Signals | number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.signalCode ?? child.exitCode);
    else child.once("exit", (code, signal) => resolve(signal ?? code));
  });
}

describe("nats hub crash - the hub acknowledges what agents send only once it is committed", {
  timeout: 120_000,
}, () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-hub-crash-"));
  const state = join(dir, "hub-state");
  const marker = join(dir, "crashed-on");
  const children: ChildProcess[] = [];
  let server: TestNatsServer;
  let repo: string;
  let watcher: NatsConnection;
  const runs = () => {
    const path = join(dir, NODE, "srv", "runs");
    return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];
  };
  /** Where the hub's durable consumer of the node's shard stands on the stream of reports and results. */
  const hubConsumer = async () =>
    (await jetstreamManager(watcher)).consumers.info(REPORTS_STREAM, hubReportsConsumer(shardOf(NODE)));

  beforeAll(async () => {
    repo = makeRepo({
      files: {
        [`nodes/${NODE}.yaml`]: nodeYaml(NODE, { transport: "nats" }),
        "assignments/counted.yaml": assignmentYaml("counted", {
          nodes: [NODE],
          resources: [
            { kind: "directory", name: "srv", path: "/srv" },
            shell("count", 'echo "$STEWARD_ATTEMPT" >> "$STEWARD_ROOT/srv/runs"'),
          ],
        }),
      },
    }).dir;
    server = await startNatsServer();
    watcher = await connect({ servers: server.url });
  });

  afterAll(async () => {
    await watcher?.close();
    for (const child of children.reverse()) await stopChild(child);
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
    removeTempDirs();
  });

  it("nats hub crash - a hub killed between receiving a result and committing it gets it again, and records it once", async () => {
    const crashing = await startNatsHub({
      cwd: dir,
      log: join(dir, "hub-1.log"),
      state,
      repo,
      url: server.url,
      prelude: CRASH_BEFORE_COMMIT,
      env: { STEWARD_TEST_CRASH_MARKER: marker },
    });
    children.push(crashing, await startNatsAgent({ cwd: dir, url: server.url, node: NODE }));
    expect(await exited(crashing)).toBe("SIGKILL");
    const attemptId = readFileSync(marker, "utf8");
    expect(runs()).toEqual([attemptId]);

    // Nothing of it was committed: the attempt is still only handed over.
    const store = new SqliteStore(join(state, "hub.db"));
    try {
      expect(await store.attempts.get(attemptId)).toMatchObject({ status: "dispatched" });
      expect((await store.attempts.get(attemptId))?.settledBy).toBeUndefined();
    } finally {
      await store.close();
    }
    // The server handed the result to the hub, and was never told it was recorded.
    const result = await (await jetstreamManager(watcher)).streams.getMessage(REPORTS_STREAM, {
      last_by_subj: subjects.result(NODE),
    });
    expect(result?.json<{ attemptId: string }>().attemptId).toBe(attemptId);
    const seq = result?.seq as number;
    const before = await hubConsumer();
    expect(before.delivered.stream_seq).toBeGreaterThanOrEqual(seq);
    expect(before.ack_floor.stream_seq).toBeLessThan(seq);

    // The next hub on the same database is handed the result again and records it.
    children.push(
      await startNatsHub({ cwd: dir, log: join(dir, "hub-2.log"), state, repo, url: server.url }),
    );
    const settled = await eventually(
      async () => {
        const reader = new SqliteStore(join(state, "hub.db"));
        try {
          const attempt = await reader.attempts.get(attemptId);
          return attempt?.status === "succeeded" ? attempt : undefined;
        } finally {
          await reader.close();
        }
      },
      30_000,
      `the result to be recorded (hub log:\n${readFileSync(join(dir, "hub-2.log"), "utf8").slice(-2000)})`,
    );
    // By the result itself, not by a later report after the attempt's lease.
    expect(settled.settledBy).toBe("result");
    let after = await hubConsumer();
    for (const deadline = Date.now() + 30_000; after.num_ack_pending > 0 && Date.now() < deadline; )
      after = await new Promise((r) => setTimeout(r, 100)).then(hubConsumer);
    expect(after.num_ack_pending).toBe(0);
    expect(after.ack_floor.stream_seq).toBeGreaterThanOrEqual(seq);
    expect(after.num_pending).toBe(0);
    // Nothing ran twice.
    expect(runs()).toEqual([attemptId]);
  });
});
