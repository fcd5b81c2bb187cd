import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import { FaultyTransport } from "./helpers/faults.js";
import { assignmentYaml, file, fleetYaml, nodes, nodeYaml } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

describe("hub - liveness", () => {
  it("hub - a node silent past its heartbeat window and a request for a report is NodeSilent until it is heard again", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1", "n2"),
        "steward.yaml": fleetYaml({ heartbeat: { interval: "10s", missed: 3 } }),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1", "n2"],
          resources: [file("conf", "v1")],
        }),
      },
    });
    await h.commit();
    await h.settle();
    await h.advance(120_000);
    expect(await h.store.conditions.list({ type: "NodeSilent" })).toEqual([]);

    await h.local.stopNode("n1");
    await h.advance(29_000);
    expect(await h.store.conditions.list({ type: "NodeSilent" })).toEqual([]);
    // Past the window the hub asks the node for a report once, and waits one more interval.
    await h.advance(2_000);
    expect(await h.store.conditions.list({ type: "NodeSilent" })).toEqual([]);
    await h.advance(10_000);
    const [silent] = await h.store.conditions.list({ type: "NodeSilent", status: "open" });
    expect(silent).toMatchObject({
      subjectKind: "node",
      subject: "n1",
      reason: "HeartbeatMissed",
      resolver: "operator",
    });
    expect(silent!.message).toMatch(
      /^node n1 silent since .* \(window 30s\), and did not answer a request for a report$/,
    );
    expect(await h.store.tasks.ofCondition(silent!.id)).toMatchObject({ status: "open" });

    await h.local.startNode((await h.store.nodes.get("n1"))!.spec);
    await h.settle();
    expect(await h.store.conditions.get(silent!.id)).toMatchObject({ status: "resolved" });
    expect(await h.store.tasks.ofCondition(silent!.id)).toMatchObject({ status: "closed" });
  });

  it("hub - each transport problem is its own TransportDegraded condition, and a recovery resolves only what it recovers", async () => {
    const h = await startHarness({ files: { ...nodes("n1") } });
    // The node's own transport: a problem another transport observed would not hold for it.
    const events = h.hub.eventsFor("local");
    await events.health({
      status: "degraded",
      reason: "ServerDisconnected",
      message: "lost the NATS server",
    });
    await events.health({
      status: "degraded",
      node: "n1",
      reason: "MaxDeliveriesExceeded",
      message: "attempt redelivered 5 times",
    });
    await events.health({
      status: "degraded",
      node: "n1",
      reason: "AgentDisconnected",
      message: "agent of n1 disconnected",
    });
    const open = async () =>
      (await h.store.conditions.list({ type: "TransportDegraded", status: "open" })).map((c) => [
        c.subjectKind,
        c.subject,
        c.reason,
      ]);
    expect(await open()).toEqual([
      ["transport", "local", "ServerDisconnected"],
      ["node", "n1", "MaxDeliveriesExceeded"],
      ["node", "n1", "AgentDisconnected"],
    ]);
    expect((await h.store.conditions.list({ type: "TransportDegraded" }))[0]!.message).toBe(
      "local: lost the NATS server",
    );

    // The agent connects again: its attempts still exhausted their deliveries.
    await events.health({
      status: "recovered",
      node: "n1",
      reason: "AgentDisconnected",
      message: "connected",
    });
    expect(await open()).toEqual([
      ["transport", "local", "ServerDisconnected"],
      ["node", "n1", "MaxDeliveriesExceeded"],
    ]);
    // A recovery of a problem that is not open resolves nothing.
    await events.health({ status: "recovered", reason: "SlowConsumer", message: "quiet for a minute" });
    expect(await open()).toHaveLength(2);
    // The node is declared again (reachable): only TransportNotEnabled would be solved by that.
    h.write({ "nodes/n1.yaml": nodeYaml("n1", {}, { zone: "b" }) });
    await h.commit();
    await h.settle();
    expect(await open()).toHaveLength(2);

    await events.health({ status: "recovered", reason: "ServerDisconnected", message: "connected again" });
    await events.health({
      status: "recovered",
      node: "n1",
      reason: "MaxDeliveriesExceeded",
      message: "done",
    });
    expect(await open()).toEqual([]);
    const resolutions = (await h.store.conditions.list({ type: "TransportDegraded" })).map((c) => [
      c.reason,
      c.resolution,
    ]);
    expect(resolutions).toEqual([
      ["ServerDisconnected", "local: connected again"],
      ["MaxDeliveriesExceeded", "local: done"],
      ["AgentDisconnected", "local: connected"],
    ]);
  });

  it("hub - heartbeats are taken in memory: the store's last heartbeat moves every 30 s at most, and a beating node is never silent", async () => {
    const h = await startHarness({
      files: { ...nodes("n1"), "steward.yaml": fleetYaml({ heartbeat: { interval: "5s", missed: 3 } }) },
    });
    await h.commit();
    await h.settle();
    const written = new Set<string>();
    for (let i = 0; i < 36; i++) {
      await h.advance(5_000);
      const at = (await h.store.nodes.get("n1"))!.lastHeartbeatAt;
      if (at) written.add(at);
    }
    // 180 s of beats every 5 s: 36 beats, at most one write per 30 s of them.
    expect(written.size).toBeGreaterThanOrEqual(5);
    expect(written.size).toBeLessThanOrEqual(7);
    const last = Date.parse([...written].sort().at(-1)!);
    expect(h.clock.now().getTime() - last).toBeLessThanOrEqual(35_000);
    expect(await h.store.conditions.list({ type: "NodeSilent" })).toEqual([]);
  });

  it("hub - a beating fleet at rest is checked without reading the store", async () => {
    let reads = 0;
    const h = await startHarness({
      files: {
        ...nodes("n1", "n2"),
        "steward.yaml": fleetYaml({ heartbeat: { interval: "5s", missed: 3 } }),
      },
      store: async () => {
        const store = new SqliteStore(join(mkdtempSync(join(tmpdir(), "steward-liveness-")), "hub.db"));
        const get = store.nodes.get.bind(store.nodes);
        store.nodes.get = (name) => {
          reads++;
          return get(name);
        };
        return store;
      },
    });
    await h.commit();
    await h.settle();
    reads = 0;
    // Ten minutes of beats every 5 s: each node's check comes due 40 times.
    for (let i = 0; i < 120; i++) await h.advance(5_000);
    expect(reads).toBe(0);
    expect(await h.store.conditions.list({ type: "NodeSilent" })).toEqual([]);
  });

  it("hub - heartbeats are heard at once, busy store or not, and a second's worth of them is one unit recording each node's latest", async () => {
    // Units of work that write heartbeat times, and the times written.
    const counted = { units: 0, touches: 0 };
    const h = await startHarness({
      files: {
        ...nodes("n1", "n2"),
        "steward.yaml": fleetYaml({ heartbeat: { interval: "10s", missed: 3 } }),
      },
      wrap: (local) => {
        const faults = new FaultyTransport(local);
        faults.dropHeartbeats = true;
        return faults;
      },
      store: async () => {
        const store = new SqliteStore(join(mkdtempSync(join(tmpdir(), "steward-liveness-")), "hub.db"));
        const transaction = store.transaction.bind(store);
        store.transaction = (work) =>
          transaction((tx) => {
            let touched = false;
            const touch = tx.nodes.touch.bind(tx.nodes);
            tx.nodes.touch = (name, at) => {
              if (at.reportAt === undefined) {
                counted.touches++;
                if (!touched) counted.units++;
                touched = true;
              }
              return touch(name, at);
            };
            return work(tx);
          });
        return store;
      },
    });
    await h.commit();
    await h.settle();
    let release!: () => void;
    const busy = h.store.transaction(() => new Promise<void>((resolve) => (release = resolve)));
    counted.units = 0;
    counted.touches = 0;
    const events = h.hub.eventsFor("local");
    // Beats 40 s after the last-heard time the store holds: due to be written again (every 30 s).
    const start = Date.parse((await h.store.nodes.get("n1"))!.lastHeartbeatAt!) + 40_000;
    const state = (beat: void | Promise<void>) =>
      Promise.race([
        Promise.resolve(beat).then(() => "heard"),
        new Promise((resolve) => setTimeout(() => resolve("waiting"), 50)),
      ]);
    const beats: (void | Promise<void>)[] = [];
    for (let i = 1; i <= 200; i++)
      for (const node of ["n1", "n2"]) beats.push(events.heartbeat(node, new Date(start + i * 1_000)));
    try {
      // None waits for the store: each is heard in memory and settles at once.
      expect(await Promise.all(beats.map(state))).toEqual(beats.map(() => "heard"));
      // A second later the nodes' times go to the store, together.
      h.clock.advance(1_000);
    } finally {
      release();
    }
    await busy;
    await h.settle();
    expect(counted).toEqual({ units: 1, touches: 2 });
    // What was recorded is each node's latest beat, not the one that asked for the recording.
    for (const node of ["n1", "n2"])
      expect((await h.store.nodes.get(node))!.lastHeartbeatAt).toBe(new Date(start + 200_000).toISOString());
  });

  it("hub - a node that sends no heartbeats but answers requests for reports is never silent", async () => {
    let faults: FaultyTransport | undefined;
    const h = await startHarness({
      files: { ...nodes("n1"), "steward.yaml": fleetYaml({ heartbeat: { interval: "10s", missed: 3 } }) },
      wrap: (local) => {
        faults = new FaultyTransport(local);
        faults.dropHeartbeats = true;
        return faults;
      },
    });
    await h.commit();
    await h.settle();
    for (let i = 0; i < 20; i++) await h.advance(10_000);
    expect(await h.store.conditions.list({ type: "NodeSilent" })).toEqual([]);
    expect(Date.parse((await h.store.nodes.get("n1"))!.lastReportAt!)).toBeGreaterThan(
      h.clock.now().getTime() - 60_000,
    );
  });

  it("hub - a node on a transport this hub does not run is TransportDegraded and its instances are never dispatched", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "nodes/e1.yaml": nodeYaml("e1", { transport: "ssh", ssh: { host: "e1.example.net" } }),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1", "e1"],
          resources: [file("conf", "v1")],
        }),
      },
    });
    await h.commit();
    await h.settle();
    expect((await h.intent("app@n1")).status).toBe("converged");
    expect(await h.intent("app@e1")).toMatchObject({ status: "held", holdReason: "transport-disabled" });
    expect(await h.store.attempts.ofInstance("app@e1")).toEqual([]);
    const [degraded] = await h.store.conditions.list({ type: "TransportDegraded", status: "open" });
    expect(degraded).toMatchObject({ subjectKind: "node", subject: "e1", reason: "TransportNotEnabled" });
    expect(degraded!.message).toBe(
      "node e1 uses transport ssh, which this hub does not run (it runs local): its 1 instances are not dispatched",
    );
    // The node moves to a transport this hub runs: resolved, and it converges.
    h.write({ "nodes/e1.yaml": nodeYaml("e1") });
    await h.commit();
    await h.settle();
    expect((await h.store.conditions.get(degraded!.id))!.status).toBe("resolved");
    expect((await h.intent("app@e1")).status).toBe("converged");
  });
});
