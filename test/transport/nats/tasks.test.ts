import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectNats } from "../../../src/transport/nats/connect.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { identities } from "../../../src/transport/nats/subjects.js";
import {
  serveTasks,
  type TaskAgent,
  type TaskEvent,
  type TaskMessage,
} from "../../../src/transport/nats/tasks.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("nats tasks - judgement goes to a queue group and what the agent did is recorded", () => {
  let server: TestNatsServer;
  let hub: NatsTransport;
  const recordedByHub: TaskEvent[] = [];
  const connections: NatsConnection[] = [];
  const agents: TaskAgent[] = [];
  const handled: { agent: string; task: string }[] = [];

  async function startTaskAgent(name: string, decline: (task: TaskMessage) => boolean): Promise<void> {
    const nc = await connectNats({ servers: server.url, identity: identities.taskAgent(name) });
    connections.push(nc);
    agents.push(
      await serveTasks({
        nc,
        name,
        handle: async (task) => {
          handled.push({ agent: name, task: task.id });
          return decline(task)
            ? { outcome: "declined", note: `${name} cannot do this` }
            : { outcome: "resolved", action: `${name} restored the disk from the snapshot` };
        },
      }),
    );
  }

  beforeAll(async () => {
    server = await startNatsServer();
    hub = createNatsTransport({
      servers: server.url,
      onTaskEvent: (event) => {
        recordedByHub.push(event);
      },
    });
    await hub.start(recordEvents().events);
    await startTaskAgent("alice", (task) => task.id === "task-2");
    await startTaskAgent("bot", () => false);
  });

  afterAll(async () => {
    for (const agent of agents) await agent.stop();
    for (const nc of connections) await nc.close();
    await hub?.stop();
    await server?.dispose();
  });

  it("nats tasks - each task goes to one member of the group, and claims and resolutions reach the hub", async () => {
    const tasks = ["task-1", "task-3", "task-4", "task-5"].map((id) => ({
      id,
      condition: { type: "DestructiveRepairNeeded", subject: { instance: "db@db-1" } },
      procedure: "restore /var/lib/db from the last snapshot, then resolve",
    }));
    for (const task of tasks) await hub.publishTask(task);
    await until(
      () => tasks.every((t) => recordedByHub.some((e) => e.kind === "resolved" && e.taskId === t.id)),
      "every task resolved",
    );
    for (const task of tasks) {
      const takers = handled.filter((h) => h.task === task.id).map((h) => h.agent);
      expect(takers).toHaveLength(1);
      const events = recordedByHub.filter((e) => e.taskId === task.id);
      expect(events.map((e) => e.kind)).toEqual(["claimed", "resolved"]);
      expect(events[1]).toMatchObject({
        by: takers[0],
        action: `${takers[0]} restored the disk from the snapshot`,
      });
    }
  });

  it("nats tasks - publishing the same task twice hands it out once", async () => {
    const before = handled.length;
    await hub.publishTask({ id: "task-1" });
    await hub.publishTask({ id: "task-6" });
    await until(() => recordedByHub.some((e) => e.kind === "resolved" && e.taskId === "task-6"), "task-6");
    expect(handled.slice(before).map((h) => h.task)).toEqual(["task-6"]);
  });

  it("nats tasks - a declined task goes to another member and the decline is recorded", async () => {
    await agents[1]?.stop(); // only alice, who declines task-2, is listening
    await hub.publishTask({ id: "task-2" });
    await until(
      () => recordedByHub.some((e) => e.kind === "declined" && e.taskId === "task-2"),
      "alice's decline",
    );
    await startTaskAgent("carol", () => false);
    // The queue group hands each redelivery (a second after a decline) to either member: alice may
    // decline it a few times more before carol gets it.
    await until(
      () => recordedByHub.some((e) => e.kind === "resolved" && e.taskId === "task-2"),
      "task-2 resolved",
      30_000,
    );
    expect(recordedByHub.filter((e) => e.taskId === "task-2")).toContainEqual(
      expect.objectContaining({ kind: "declined", by: "alice", note: "alice cannot do this" }),
    );
    expect(recordedByHub.filter((e) => e.taskId === "task-2").at(-1)).toMatchObject({
      kind: "resolved",
      by: "carol",
    });
  }, 60_000);
});
