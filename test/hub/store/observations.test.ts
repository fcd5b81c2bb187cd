/**
 * Observations, on every store: a report records what changed and says which instances it changed;
 * a body the store already holds is not written again; an instance a full report leaves out is no
 * longer observed; and a store opened afresh (or after another writer) still knows what it holds.
 */
import { describe, expect, it } from "vitest";
import type { InstanceReport, Report } from "../../../src/model/generated.js";
import { storeKinds } from "./stores.js";

function instance(assignment: string, generation: number, converged = true): InstanceReport {
  return { assignment, generation, state: "running", converged, resources: [], probes: [] };
}

let taken = 0;
function report(node: string, instances: InstanceReport[]): Report {
  taken++;
  return {
    apiVersion: "steward.dev/v1",
    kind: "Report",
    node,
    takenAt: new Date(Date.UTC(2026, 11, 1, 10, 0, taken)).toISOString(),
    agent: { version: "test" },
    instances,
  };
}

const AT = "2026-12-01T10:00:00.000Z";

describe.each(storeKinds())("store ($name) - observations", (kind) => {
  it("store - a report says which instances it changed, repeats change nothing, and one left out is gone", async () => {
    const store = await kind.fresh();
    const save = (r: Report) => store.transaction((tx) => tx.observations.saveReport(r, AT));
    expect(await save(report("n1", [instance("web", 1), instance("db", 1)]))).toEqual(["web@n1", "db@n1"]);
    // The same bodies in a later report: nothing changed.
    expect(await save(report("n1", [instance("web", 1), instance("db", 1)]))).toEqual([]);
    expect(await save(report("n1", [instance("web", 2), instance("db", 1)]))).toEqual(["web@n1"]);
    expect((await store.observations.get("web@n1"))?.generation).toBe(2);
    // A full report without db: the node holds no db.
    expect(await save(report("n1", [instance("web", 2)]))).toEqual(["db@n1"]);
    expect(await store.observations.get("db@n1")).toBeUndefined();
    // Another node's report touches nothing of n1.
    expect(await save(report("n2", [instance("web", 1)]))).toEqual(["web@n2"]);
    expect((await store.observations.get("web@n1"))?.generation).toBe(2);
    // A store opened afresh knows what is stored though not its bodies: it writes them again once,
    // and still takes out what a report leaves out.
    const again = await store.reopen();
    const saveAgain = (r: Report) => again.transaction((tx) => tx.observations.saveReport(r, AT));
    expect(await saveAgain(report("n1", [instance("web", 2), instance("db", 3, false)]))).toEqual([
      "web@n1",
      "db@n1",
    ]);
    expect(await saveAgain(report("n1", [instance("db", 3, false)]))).toEqual(["web@n1"]);
    expect(await again.observations.get("web@n1")).toBeUndefined();
    expect((await again.observations.get("db@n1"))?.converged).toBe(false);
  });

  it("store - an older report, or one of the same time with a lower sequence, changes nothing", async () => {
    const store = await kind.fresh();
    const save = (r: Report) => store.transaction((tx) => tx.observations.saveReport(r, AT));
    const at = (second: number, seq: number | undefined, generation: number): Report => ({
      ...report("n1", [instance("web", generation)]),
      takenAt: new Date(Date.UTC(2026, 11, 2, 10, 0, second)).toISOString(),
      ...(seq === undefined ? {} : { seq }),
    });
    expect(await save(at(10, 5, 1))).toEqual(["web@n1"]);
    // Built before the stored one, delivered after it: not the latest observation.
    expect(await save(at(9, 9, 2))).toBeUndefined();
    // The same time: the agent's sequence decides.
    expect(await save(at(10, 5, 2))).toBeUndefined();
    expect(await save(at(10, 4, 2))).toBeUndefined();
    expect((await store.observations.get("web@n1"))?.generation).toBe(1);
    expect(await store.observations.reportOf("n1")).toEqual({ takenAt: at(10, 5, 1).takenAt, seq: 5 });
    expect(await save(at(10, 6, 2))).toEqual(["web@n1"]);
    // Without a sequence (an older agent), the same time is taken as newer; a later time always is.
    expect(await save(at(10, undefined, 3))).toEqual(["web@n1"]);
    expect(await save(at(11, 1, 4))).toEqual(["web@n1"]);
    expect(await store.observations.reportOf("n1")).toEqual({ takenAt: at(11, 1, 4).takenAt, seq: 1 });
    expect((await store.observations.get("web@n1"))?.generation).toBe(4);
  });

  it("store - a node's last heartbeat only moves forward; a report sets its time and the heartbeat's in one", async () => {
    const store = await kind.fresh();
    const t = (second: number) => new Date(Date.UTC(2026, 11, 2, 10, 0, second)).toISOString();
    const touch = (at: { heartbeatAt?: string; reportAt?: string }) =>
      store.transaction((tx) => tx.nodes.touch("n1", at));
    await store.transaction((tx) =>
      tx.nodes.upsert({ name: "n1", transport: "local", spec: {} as never, revision: "r1" }),
    );
    await touch({ heartbeatAt: t(10) });
    await touch({ heartbeatAt: t(5) });
    expect(await store.nodes.get("n1")).toMatchObject({ lastHeartbeatAt: t(10) });
    // A report heard before the last heartbeat keeps the heartbeat, and is the node's last report.
    await touch({ heartbeatAt: t(8), reportAt: t(7) });
    expect(await store.nodes.get("n1")).toMatchObject({ lastHeartbeatAt: t(10), lastReportAt: t(7) });
    await touch({ heartbeatAt: t(20), reportAt: t(19) });
    expect(await store.nodes.get("n1")).toMatchObject({ lastHeartbeatAt: t(20), lastReportAt: t(19) });
  });

  it("store - the times of many nodes written in one unit: each as if written alone, in order", async () => {
    const store = await kind.fresh();
    const t = (second: number) => new Date(Date.UTC(2026, 11, 2, 10, 0, second)).toISOString();
    const names = Array.from({ length: 70 }, (_, i) => `n${i}`);
    await store.transaction(async (tx) => {
      for (const name of names)
        await tx.nodes.upsert({ name, transport: "local", spec: {} as never, revision: "r1" });
      await tx.nodes.touch("n0", { heartbeatAt: t(30) });
    });
    await store.transaction(async (tx) => {
      for (const [i, name] of names.entries())
        await tx.nodes.touch(
          name,
          i % 2 ? { heartbeatAt: t(i % 60) } : { heartbeatAt: t(20), reportAt: t(19) },
        );
      // The same node again in the unit: a heartbeat that is older changes nothing, a newer one does.
      await tx.nodes.touch("n3", { heartbeatAt: t(1) });
      await tx.nodes.touch("n5", { heartbeatAt: t(50) });
      await tx.nodes.touch("n6", { heartbeatAt: t(40), reportAt: t(39) });
    });
    const nodes = await store.nodes.named(names);
    // n0's stored heartbeat (30) is later than the report's (20); its report time is set.
    expect(nodes.get("n0")).toMatchObject({ lastHeartbeatAt: t(30), lastReportAt: t(19) });
    expect(nodes.get("n2")).toMatchObject({ lastHeartbeatAt: t(20), lastReportAt: t(19) });
    expect(nodes.get("n3")).toMatchObject({ lastHeartbeatAt: t(3) });
    expect(nodes.get("n3")!.lastReportAt).toBeUndefined();
    expect(nodes.get("n5")).toMatchObject({ lastHeartbeatAt: t(50) });
    expect(nodes.get("n6")).toMatchObject({ lastHeartbeatAt: t(40), lastReportAt: t(39) });
    expect(nodes.get("n69")).toMatchObject({ lastHeartbeatAt: t(9) });
  });

  it("store - a report that rolls back leaves the store's memory of what it holds as the database says", async () => {
    const store = await kind.fresh();
    await store.transaction((tx) => tx.observations.saveReport(report("n1", [instance("web", 1)]), AT));
    await expect(
      store.transaction(async (tx) => {
        await tx.observations.saveReport(report("n1", [instance("web", 2)]), AT);
        throw new Error("the unit fails after the report");
      }),
    ).rejects.toThrow("the unit fails");
    expect((await store.observations.get("web@n1"))?.generation).toBe(1);
    // Generation 2 was never stored: reporting it again is a change.
    expect(
      await store.transaction((tx) => tx.observations.saveReport(report("n1", [instance("web", 2)]), AT)),
    ).toEqual(["web@n1"]);
  });
});
