/**
 * A rollout on a real 3-server cluster, from the configurations `steward nats config --static
 * --cluster 3` writes, with every part a real process (the hub and an agent per node, each given all
 * three URLs): the server leading the attempts stream is SIGKILLed mid-rollout and stays down. The
 * streams keep their R3 copies on the two survivors, the hub and agents reconnect to them, every
 * instance converges at the last commit, every attempt is settled by its own result (no result or
 * report lost), and no one-shot ran twice for a generation.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager, type StreamInfo } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import { credentialsAuthenticator } from "../../../src/transport/nats/connect.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { MAILBOX_STREAM, REPORTS_STREAM } from "../../../src/transport/nats/subjects.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { startNatsCluster, type TestNatsCluster } from "../../helpers/nats-cluster.js";
import { startNatsAgent, startNatsHub } from "../../helpers/nats-processes.js";
import { expectRolloutSettled, versionedRollout } from "../../helpers/nats-rollout.js";
import { nodeYaml } from "../../hub/helpers/fleet.js";
import { eventually } from "../../hub/helpers/process.js";

const NODES = ["edge-1", "edge-2", "edge-3"];

const migration = (version: number) => versionedRollout(NODES, version, 0.5);

describe("nats cluster failover - a rollout survives a cluster server killed mid-way", {
  timeout: 90_000,
}, () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-failover-"));
  const children: ChildProcess[] = [];
  let cluster: TestNatsCluster | undefined;
  let admin: NatsConnection | undefined;
  afterAll(async () => {
    for (const child of children.reverse()) await stopChild(child);
    await admin?.close();
    await cluster?.dispose();
    if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
    else console.log("KEPT", dir);
    removeTempDirs();
  });

  it("nats cluster failover - the attempts stream's leader killed mid-rollout: R3 streams live on, every instance converges, no report lost, no one-shot twice", async () => {
    const repo = makeRepo({
      files: {
        ...Object.fromEntries(NODES.map((n) => [`nodes/${n}.yaml`, nodeYaml(n, { transport: "nats" })])),
        "assignments/app.yaml": migration(1),
      },
    });
    cluster = await startNatsCluster({ nodes: NODES });
    admin = await connect({
      servers: cluster.urls.split(","),
      authenticator: credentialsAuthenticator(cluster.creds("hub")),
    });
    const jsm = await jetstreamManager(admin);
    const state = join(dir, "hub");
    children.push(
      await startNatsHub({ cwd: dir, state, repo: repo.dir, url: cluster.urls, creds: cluster.creds("hub") }),
    );
    for (const node of NODES)
      children.push(
        await startNatsAgent({ cwd: dir, url: cluster.urls, node, creds: cluster.creds({ node }) }),
      );

    const store = new SqliteStore(join(state, "hub.db"));
    try {
      const convergedAt = async (revision: string | undefined) => {
        for (const node of NODES) {
          const desired = await store.desired.instance(`app@${node}`);
          if (
            desired === undefined ||
            (revision !== undefined && desired.revision !== revision) ||
            (await store.intents.get(desired.key, desired.generation))?.status !== "converged"
          )
            return false;
        }
        return true;
      };
      await eventually(() => convergedAt(undefined), 30_000, "the first generation to converge");
      // Three replicas each (the leader and two peers; under load a peer may take a moment to show).
      for (const stream of [MAILBOX_STREAM, REPORTS_STREAM]) {
        const info = await eventually(
          async () => {
            const info = await jsm.streams.info(stream);
            return info.cluster?.replicas?.length === 2 ? info : undefined;
          },
          15_000,
          `${stream}'s two peers`,
        );
        expect(info.config.num_replicas, stream).toBe(3);
      }

      // Mid-rollout of version 2: kill the server leading the attempts stream, and keep it down.
      repo.commit("version 2", { "assignments/app.yaml": migration(2) });
      await eventually(
        () => NODES.some((node) => readFileSync(join(dir, node, "srv", "runs"), "utf8").includes("2 ")),
        30_000,
        "version 2's one-shot to start somewhere",
      );
      const leader = (await jsm.streams.info(MAILBOX_STREAM)).cluster?.leader;
      const victim = cluster.plan.servers.findIndex((server) => server.name === leader);
      expect(victim, `leader ${leader}`).toBeGreaterThanOrEqual(0);
      await cluster.kill(victim);
      const head = repo.commit("version 3", { "assignments/app.yaml": migration(3) });

      await eventually(() => convergedAt(head), 60_000, "every instance converged at the last commit");
      // Two copies of each stream are left, on the survivors; a new leader among them.
      for (const stream of [MAILBOX_STREAM, REPORTS_STREAM]) {
        // The first request after the kill may have gone to the dead server: asked again.
        let info: StreamInfo | undefined;
        await eventually(
          async () => {
            info = await jsm.streams.info(stream).catch(() => undefined);
            return info !== undefined;
          },
          15_000,
          `${stream}'s information`,
        );
        if (!info) throw new Error("unreachable");
        expect(info.config.num_replicas, stream).toBe(3);
        expect(info.cluster?.leader, stream).not.toBe(leader);
        expect(info.cluster?.replicas?.filter((peer) => peer.current && !peer.offline).length, stream).toBe(
          1,
        );
      }
      await expectRolloutSettled({ dir, nodes: NODES, store, version: 3 });
      for (const node of NODES)
        expect(readFileSync(join(dir, node, "srv", "runs"), "utf8"), node).toMatch(/^3 \S+\n$/m);
    } finally {
      await store.close();
    }
  });
});
