/**
 * Secrets end to end over NATS, with a real nats-server, `steward hub --nats` and `steward agent
 * --nats` as processes: the host's file has the plaintext, and nothing that crossed the bus does.
 * Every message published while the fleet converged is recorded (a `>` subscription), and the
 * streams and KV buckets are read back with a client at the end; the hub's database and log, and
 * the agent's log and records, are searched too — byte for byte, for the plaintext and its base64.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, describe, expect, it } from "vitest";
import { stopChild } from "../../../src/transport/nats/server.js";
import { CONDITIONS_BUCKET, OBSERVED_BUCKET } from "../../../src/transport/nats/subjects.js";
import { killServices } from "../../agent/helpers.js";
import { startNatsAgent, startNatsHub } from "../../helpers/nats-processes.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { secretFleet, secretTraces, TLS_KEY } from "../../helpers/secret-fleet.js";
import { filesBelow, leaks } from "../../helpers/secrets.js";
import { eventually, runSteward } from "../../hub/helpers/process.js";

describe("secrets end to end - NATS", () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-secrets-nats-"));
  const children: ChildProcess[] = [];
  let server: TestNatsServer | undefined;
  let watcher: NatsConnection | undefined;

  afterAll(async () => {
    await watcher?.close();
    for (const child of children) await stopChild(child);
    killServices(join(dir, "agent-db-1"));
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("secrets nats - the host's file has the plaintext; the messages on the bus, the streams and KV buckets read back, the hub's database and log and the agent's log and records have neither it nor its base64", async () => {
    const fleet = await secretFleet({
      dir,
      nodes: ["db-1"],
      transport: "nats",
      agentState: (node) => join(dir, `agent-${node}`),
    });
    server = await startNatsServer();
    watcher = await connect({ servers: server.url });
    const published: { name: string; bytes: Uint8Array }[] = [];
    watcher.subscribe(">", {
      callback: (_error, msg) => {
        published.push({ name: `bus ${msg.subject}`, bytes: msg.data });
      },
    });
    const hubState = join(dir, "hub-state");
    children.push(
      await startNatsHub({ cwd: dir, state: hubState, repo: fleet.repo.dir, url: server.url }),
      await startNatsAgent({ cwd: dir, url: server.url, node: "db-1" }),
    );
    const key = join(dir, "db-1", "srv", "db", "server.key");
    await eventually(
      () => existsSync(key),
      60_000,
      `the key on db-1 (hub log:\n${tail(join(dir, "hub.log"))})`,
    );
    expect(readFileSync(key, "utf8")).toBe(TLS_KEY);
    let status = await runSteward(["--state", hubState, "status"], { cwd: dir });
    for (let tries = 0; status.code !== 0 && tries < 60; tries++) {
      await new Promise((r) => setTimeout(r, 1_000));
      status = await runSteward(["--state", hubState, "status"], { cwd: dir });
    }
    expect(status.stdout).toMatch(/no open conditions/i);

    // What the bus holds now, read back with a client: every stream's messages, every KV entry.
    const stored: { name: string; bytes: Uint8Array }[] = [];
    const jsm = await jetstreamManager(watcher);
    const streams: string[] = [];
    for await (const info of jsm.streams.list()) {
      streams.push(info.config.name);
      for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
        const message = await jsm.streams.getMessage(info.config.name, { seq }).catch(() => null);
        if (message)
          stored.push({ name: `stream ${info.config.name} #${seq} ${message.subject}`, bytes: message.data });
      }
    }
    expect(streams).toEqual(expect.arrayContaining(["STEWARD_MAILBOX", "STEWARD_REPORTS"]));
    const kvm = new Kvm(watcher);
    for (const bucket of [OBSERVED_BUCKET, CONDITIONS_BUCKET]) {
      const kv = await kvm.open(bucket);
      for await (const k of await kv.keys()) {
        const entry = await kv.get(k);
        if (entry) stored.push({ name: `kv ${bucket} ${k}`, bytes: entry.value });
      }
    }
    expect(published.some((p) => p.name.startsWith("bus steward.attempt.db-1"))).toBe(true);
    expect(published.some((p) => p.name.startsWith("bus steward.agent.52.report.db-1"))).toBe(true);
    expect(stored.some((p) => p.name.startsWith("kv steward-observed"))).toBe(true);
    // The attempt did carry the secret, encrypted.
    expect(published.some((p) => Buffer.from(p.bytes).includes("BEGIN AGE ENCRYPTED FILE"))).toBe(true);

    const logs = ["hub.log", "agent-db-1.log"].map((name) => ({
      name,
      bytes: readFileSync(join(dir, name)),
    }));
    const hub = readdirSync(hubState)
      .filter((file) => file.startsWith("hub."))
      .map((file) => ({ name: file, bytes: readFileSync(join(hubState, file)) }));
    const agent = filesBelow(join(dir, "agent-db-1")).filter(
      (f) => !f.name.includes("/identity/") && !f.name.includes("/runs/"),
    );
    expect(leaks(secretTraces(), [...published, ...stored, ...logs, ...hub, ...agent])).toEqual([]);
  }, 180_000);
});

function tail(path: string): string {
  return existsSync(path) ? readFileSync(path, "utf8").slice(-3000) : "";
}
