import { describe, expect, it } from "vitest";
import type { DisplayState } from "../../src/hub/states.js";
import type { InstanceView } from "../../src/hub/views.js";
import { filterQuery, fleetGrid, parseFilters } from "../../src/hub/web/grid.js";

function view(assignment: string, node: string, state: DisplayState, generation = 1): InstanceView {
  return {
    instance: `${assignment}@${node}`,
    assignment,
    node,
    generation,
    status: state === "converged" ? "converged" : "pending",
    state,
    converged: state === "converged",
    failures: 0,
    budget: { attempts: 5, withinMs: 1_800_000 },
    openConditions: [],
    retired: false,
  };
}

const node = (i: number) => `node-${String(i).padStart(4, "0")}`;

/** `count` nodes, each with base converged and web in the state `webState(i)` gives. */
function fleet(count: number, webState: (i: number) => DisplayState, webGeneration = (_i: number) => 2) {
  const views: InstanceView[] = [];
  for (let i = 0; i < count; i++) {
    views.push(view("base", node(i), "converged"));
    views.push(view("web", node(i), webState(i), webGeneration(i)));
  }
  return views;
}

const labels = (n: string) => ({ region: Number(n.slice(5)) % 2 === 0 ? "eu" : "us" });
const query = (text: string) => parseFilters(new URLSearchParams(text));

describe("hub - the fleet grid", () => {
  it("web - a small fleet has one row per node, in the nodes' order, and a column per assignment", () => {
    const grid = fleetGrid(
      fleet(3, (i) => (i === 1 ? "blocked" : "converged")),
      labels,
      query(""),
    );
    expect(grid.grouped).toBe(false);
    expect(grid.columns).toEqual(["base", "web"]);
    expect(grid.rows.map((r) => r.nodes)).toEqual([[node(0)], [node(1)], [node(2)]]);
    expect(grid.rows[1]!.cells.map((c) => c?.view.state)).toEqual(["converged", "blocked"]);
    expect(grid.chosen).toHaveLength(6);
  });

  it("web - a large fleet is summarised, not cut: alike nodes are one row, what differs stands alone, failures first", () => {
    const views = fleet(2500, (i) => (i % 500 === 7 ? "blocked" : i < 5 ? "converged" : "held"));
    const grid = fleetGrid(views, labels, query(""));
    expect(grid.grouped).toBe(true);
    expect(grid.nodeCount).toBe(2500);
    // Every node is in exactly one row.
    expect(grid.rows.flatMap((r) => r.nodes).sort()).toEqual(Array.from({ length: 2500 }, (_, i) => node(i)));
    expect(grid.rows.map((r) => [r.nodes.length, r.cells[1]!.view.state])).toEqual([
      [5, "blocked"],
      [2490, "held"],
      [5, "converged"],
    ]);
    expect(grid.pages).toBe(1);
  });

  it("web - rows that differ by generation are not grouped together", () => {
    const grid = fleetGrid(
      fleet(
        200,
        () => "converged",
        (i) => (i < 100 ? 1 : 2),
      ),
      labels,
      query(""),
    );
    expect(grid.rows.map((r) => [r.nodes.length, r.cells[1]!.view.generation])).toEqual([
      [100, 1],
      [100, 2],
    ]);
  });

  it("web - when rows are still more than a page holds they are paged, and the page is clamped", () => {
    const views = fleet(
      300,
      () => "converged",
      (i) => i,
    );
    const limits = { groupAbove: 100, rowsPerPage: 120 };
    const first = fleetGrid(views, labels, query(""), limits);
    expect([first.totalRows, first.pages, first.rows.length]).toEqual([300, 3, 120]);
    const last = fleetGrid(views, labels, query("page=9"), limits);
    expect([last.page, last.rows.length]).toEqual([3, 60]);
  });

  it("web - filters choose instances by label, node name, assignment and state; the rest of a row is shown faintly", () => {
    const views = fleet(6, (i) => (i === 2 || i === 3 ? "failing" : "converged"));
    const byState = fleetGrid(views, labels, query("state=failing"));
    expect(byState.rows.map((r) => r.nodes[0])).toEqual([node(2), node(3)]);
    expect(byState.columns).toEqual(["web"]);
    expect(byState.chosen.map((v) => v.instance)).toEqual([`web@${node(2)}`, `web@${node(3)}`]);
    const byLabel = fleetGrid(views, labels, query("label=region=eu&assignment=base"));
    expect(byLabel.rows.map((r) => r.nodes[0])).toEqual([node(0), node(2), node(4)]);
    expect(byLabel.rows[0]!.cells.map((c) => c?.chosen)).toEqual([true]);
    const byName = fleetGrid(views, labels, query("node=0005"));
    expect(byName.rows.map((r) => r.nodes[0])).toEqual([node(5)]);
    const mixed = fleetGrid(views, labels, query("state=failing&state=converged&assignment=web"));
    expect(mixed.chosen).toHaveLength(6);
  });

  it("web - the filters survive a round trip through the URL, unknown states are dropped", () => {
    const filters = query(
      "node=web&label=role=web&label=zone=a=b&assignment=base&state=held&state=nonsense&group=none&page=2",
    );
    expect(filters).toEqual({
      node: "web",
      labels: [
        ["role", "web"],
        ["zone", "a=b"],
      ],
      assignments: ["base"],
      states: ["held"],
      group: "none",
      page: 2,
    });
    expect(parseFilters(filterQuery(filters))).toEqual(filters);
    expect(filterQuery(query("")).toString()).toBe("");
  });

  it("web - group=none keeps one row per node even in a large fleet", () => {
    const grid = fleetGrid(
      fleet(150, () => "converged"),
      labels,
      query("group=none"),
    );
    expect([grid.grouped, grid.totalRows]).toEqual([false, 150]);
  });
});
