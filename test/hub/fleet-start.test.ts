/**
 * A hub's start and a whole fleet declared at once cost queries for the fleet, not per node: a
 * hub on 10,000 nodes (a PostgreSQL round trip each) took minutes to start, and syncing waited
 * for it.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import { assignmentYaml, file, nodes, nodeYaml } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const NODES = Array.from({ length: 30 }, (_, i) => `n${String(i).padStart(2, "0")}`);

/** A SQLite store that counts node reads and units of work while `counting` is on. */
function countingStore() {
  const counts = { counting: false, nodeReads: 0, units: 0 };
  const store = new SqliteStore(join(mkdtempSync(join(tmpdir(), "steward-fleet-start-")), "hub.db"));
  const get = store.nodes.get.bind(store.nodes);
  store.nodes.get = (name) => {
    if (counts.counting) counts.nodeReads++;
    return get(name);
  };
  const transaction = store.transaction.bind(store);
  store.transaction = (work) => {
    if (counts.counting) counts.units++;
    return transaction(work);
  };
  return { store, counts };
}

describe("hub - a fleet at once", () => {
  it("hub - a restart with 30 nodes reads no node on its own and checks their reach in no unit of its own", async () => {
    const { store, counts } = countingStore();
    const h = await startHarness({
      files: {
        ...nodes(...NODES),
        "nodes/far.yaml": nodeYaml("far", { transport: "ssh", ssh: { host: "far.example.net" } }),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: NODES,
          resources: [file("conf", "v1")],
        }),
      },
      store: async () => store,
    });
    await h.commit();
    await h.settle();
    expect((await h.intent(`app@${NODES[29]}`)).status).toBe("converged");
    await h.stopHub();
    counts.counting = true;
    await h.startHub();
    counts.counting = false;
    // Every node was asked for a report and answered (its last report is this start's).
    for (const node of NODES) expect((await store.nodes.get(node))!.lastReportAt).toBeDefined();
    expect(counts.nodeReads).toBe(0);
    // The reports' units and the reach check of the one node this hub does not reach: a few, not
    // one or more per node.
    expect(counts.units).toBeLessThan(NODES.length / 2);
    const [degraded] = await store.conditions.list({ type: "TransportDegraded", status: "open" });
    expect(degraded).toMatchObject({ subject: "far", reason: "TransportNotEnabled" });
  });
});
