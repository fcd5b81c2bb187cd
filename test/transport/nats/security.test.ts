import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { type NatsConnection, PermissionViolationError } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/main.js";
import { type NatsAgent, runNatsAgent } from "../../../src/transport/nats/agent.js";
import { type ConditionChange, watchConditions } from "../../../src/transport/nats/conditions.js";
import { connectNats } from "../../../src/transport/nats/connect.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { identities, MAILBOX_STREAM, subjects } from "../../../src/transport/nats/subjects.js";
import { serveTasks, type TaskEvent } from "../../../src/transport/nats/tasks.js";
import { MarkerAgent, natsNode, testBundle } from "../../helpers/marker-agent.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

function cliIo(cwd: string) {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: {
      stdout: (t: string) => out.push(t),
      stderr: (t: string) => err.push(t),
      env: {},
      cwd,
      isTty: false,
    },
    out,
    err,
  };
}

describe("nats security - per-node credentials from steward nats config", () => {
  let dir: string;
  let server: TestNatsServer;
  let hub: NatsTransport;
  let agentA: NatsAgent;
  let nodeA: NatsConnection;
  const recorded = recordEvents();
  const taskEvents: TaskEvent[] = [];
  const creds = (path: string) => join(dir, "bus", "credentials", path);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "steward-nats-sec-"));
    const { io } = cliIo(dir);
    expect(
      await main(["nats", "config", "--static", "--out", "bus", "--node", "node-a", "--node", "node-b"], io),
    ).toBe(0);
    server = await startNatsServer({ configFile: join(dir, "bus", "nats-server.conf") });
    hub = createNatsTransport({
      servers: server.url,
      creds: creds("hub.nk"),
      nodes: ["node-a", "node-b"],
      onTaskEvent: (event) => {
        taskEvents.push(event);
      },
    });
    await hub.start(recorded.events);
    agentA = await runNatsAgent({
      servers: server.url,
      creds: creds("nodes/node-a.nk"),
      node: "node-a",
      agent: new MarkerAgent("node-a", join(dir, "node-a")),
    });
    nodeA = await connectNats({
      servers: server.url,
      creds: creds("nodes/node-a.nk"),
      identity: identities.node("node-a"),
    });
  });

  afterAll(async () => {
    await nodeA?.close();
    await agentA?.stop();
    await hub?.stop();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats security - seeds are written 0600 in 0700 directories and kept when the command runs again", async () => {
    const hubSeed = readFileSync(creds("hub.nk"), "utf8");
    expect(statSync(creds("hub.nk")).mode & 0o777).toBe(0o600);
    expect(statSync(creds("nodes/node-a.nk")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "bus", "credentials", "nodes")).mode & 0o777).toBe(0o700);
    const { io, out } = cliIo(dir);
    expect(
      await main(["nats", "config", "--static", "--out", "bus", "--node", "node-a", "--node", "node-c"], io),
    ).toBe(0);
    expect(readFileSync(creds("hub.nk"), "utf8")).toBe(hubSeed);
    expect(out.join("")).toMatch(/node-a\s+credentials\/nodes\/node-a\.nk \(kept\)/);
    expect(statSync(creds("nodes/node-c.nk")).mode & 0o777).toBe(0o600);
    // The running server keeps its configuration; restore the file for the other cases' clarity.
    expect(
      await main(
        ["nats", "config", "--static", "--out", "bus", "--node", "node-a", "--node", "node-b"],
        cliIo(dir).io,
      ),
    ).toBe(0);
  });

  it("nats security - a node with its own credentials converges an attempt end to end", async () => {
    const bundle = testBundle("node-a", "web", 1);
    await hub.dispatch(bundle, natsNode("node-a"));
    await recorded.until(
      () => recorded.results.some((r) => r.attemptId === bundle.attemptId),
      "node-a's result",
    );
    await recorded.until(
      () => recorded.reports.some((r) => r.node === "node-a" && r.instances.some((i) => i.generation === 1)),
      "node-a's report",
    );
  });

  it("nats security - node A cannot read node B's mailbox: direct gets of B's subjects are refused", async () => {
    await hub.dispatch(testBundle("node-b", "web", 1), natsNode("node-b"));
    for (const subject of [subjects.attempt("node-b", "web"), subjects.mailbox("node-b")]) {
      const api = subjects.lastOf(MAILBOX_STREAM, subject);
      await expect(nodeA.request(api, "", { timeout: 2_000 })).rejects.toThrow(
        `Permissions Violation for Publish to "${api}"`,
      );
    }
    // Nor by the request form that names the subject in its body.
    const any = `$JS.API.DIRECT.GET.${MAILBOX_STREAM}`;
    await expect(
      nodeA.request(any, JSON.stringify({ last_by_subj: subjects.attempt("node-b", "web") }), {
        timeout: 2_000,
      }),
    ).rejects.toThrow(`Permissions Violation for Publish to "${any}"`);
    const js = jetstream(nodeA);
    await expect(js.consumers.get(MAILBOX_STREAM, "node-b")).rejects.toThrow(
      'Permissions Violation for Publish to "$JS.API.CONSUMER.INFO.STEWARD_MAILBOX.node-b"',
    );
  });

  it("nats security - node A cannot publish node B's reports, results, heartbeats or last report", async () => {
    const js = jetstream(nodeA);
    for (const subject of [
      subjects.report("node-b"),
      subjects.result("node-b"),
      subjects.kv("steward-observed", "node-b"),
    ])
      await expect(js.publish(subject, "{}", { timeout: 2_000 })).rejects.toThrow(
        `Permissions Violation for Publish to "${subject}"`,
      );
    // Core publishes are refused asynchronously: the server answers with a permissions error.
    const errors = (async () => {
      for await (const status of nodeA.status())
        if (status.type === "error" && status.error instanceof PermissionViolationError) return status.error;
    })();
    nodeA.publish(subjects.heartbeat("node-b"), "{}");
    const refused = await errors;
    expect(refused?.message).toMatch(/Permissions Violation for Publish to "steward\.heartbeat\.node-b"/);
  });

  it("nats security - node A cannot listen to node B's inbox or control subject", async () => {
    const errors: string[] = [];
    const watch = (async () => {
      for await (const status of nodeA.status())
        if (status.type === "error") {
          errors.push(status.error.message);
          if (errors.length === 4) return;
        }
    })();
    nodeA.subscribe(`${subjects.inboxPrefix(identities.node("node-b"))}.>`);
    nodeA.subscribe(subjects.control("node-b"));
    nodeA.subscribe(subjects.attemptsOf("node-b"));
    nodeA.subscribe(subjects.mailbox("node-b"));
    await watch;
    expect(errors.join("\n")).toMatch(/Permissions Violation for Subscription to "_INBOX_node_node-b\.>"/);
    expect(errors.join("\n")).toMatch(/Permissions Violation for Subscription to "steward\.control\.node-b"/);
    expect(errors.join("\n")).toMatch(
      /Permissions Violation for Subscription to "steward\.attempt\.node-b\.\*"/,
    );
    expect(errors.join("\n")).toMatch(/Permissions Violation for Subscription to "steward\.mailbox\.node-b"/);
  });

  it("nats security - node B's attempt is still in node B's mailbox, untouched by A's tries", async () => {
    expect(await hub.mailbox("node-b")).toEqual([
      { assignment: "web", attemptId: expect.any(String), generation: 1 },
    ]);
  });

  it("nats security - the viewer's credentials watch conditions but cannot write them", async () => {
    const viewer = await connectNats({
      servers: server.url,
      creds: creds("viewer.nk"),
      identity: identities.viewer,
    });
    const changes: ConditionChange[] = [];
    const watch = await watchConditions(viewer, (change) => {
      changes.push(change);
    });
    await watch.initialized;
    await hub.conditions.put({ id: "cond-1", type: "NodeSilent", subject: { node: "node-b" } });
    await recorded.until(
      () => changes.some((c) => c.kind === "open" && c.id === "cond-1"),
      "the viewer to see it",
    );
    await expect(
      jetstream(viewer).publish("$KV.steward-conditions.cond-1", "{}", { timeout: 2_000 }),
    ).rejects.toThrow('Permissions Violation for Publish to "$KV.steward-conditions.cond-1"');
    await watch.stop();
    await viewer.close();
  });

  it("nats security - a task agent's credentials take tasks from the queue group and answer them", async () => {
    const nc = await connectNats({
      servers: server.url,
      creds: creds("task-agents/tasks.nk"),
      identity: identities.taskAgent("tasks"),
    });
    const taskAgent = await serveTasks({
      nc,
      name: "tasks",
      handle: async () => ({ outcome: "resolved", action: "re-keyed node-b" }),
    });
    await hub.publishTask({ id: "task-rekey", procedure: "recover node-b's identity" });
    await recorded.until(
      () => taskEvents.some((e) => e.kind === "resolved" && e.taskId === "task-rekey"),
      "the task resolved",
    );
    await taskAgent.stop();
    await nc.close();
  });

  it("nats security - the server's connect and disconnect events reach the hub as observations of the node", async () => {
    await agentA.stop();
    await recorded.until(
      () => recorded.healthEvents.some((h) => h.reason === "AgentDisconnected" && h.status === "degraded"),
      "node-a's disconnect",
    );
    const before = recorded.healthEvents.length;
    expect(
      recorded.healthEvents.find((h) => h.reason === "AgentDisconnected" && h.status === "degraded"),
    ).toMatchObject({
      node: "node-a",
      message: "agent of node-a disconnected from the server: Client Closed",
    });
    agentA = await runNatsAgent({
      servers: server.url,
      creds: creds("nodes/node-a.nk"),
      node: "node-a",
      agent: new MarkerAgent("node-a", join(dir, "node-a")),
    });
    await recorded.until(
      () =>
        recorded.healthEvents
          .slice(before)
          .some((h) => h.reason === "AgentDisconnected" && h.status === "recovered" && h.node === "node-a"),
      "node-a's connect",
    );
  });
});
