/**
 * The fleet page's grid as data: nodes (rows) × assignments (columns), each cell one instance's
 * view, chosen by the filters in the page's URL. Pure: views and nodes in, grid out.
 *
 * A large fleet is summarised, never cut: above `groupAbove` nodes, nodes whose rows are the same
 * (every cell the same state and generation) are one row that lists them, so ten thousand instances
 * that mostly agree are a handful of rows, and what differs — a failing node, a canary — stands on
 * its own row. Rows that need attention come first. Only if the rows are still more than a page
 * holds are they split into pages, and the page says so.
 */
import { DISPLAY_STATES, type DisplayState, type DisplayStateInfo } from "../states.js";
import type { InstanceView } from "../views.js";

/** What the fleet page shows, as its URL says (`?label=role=web&assignment=base&state=failing&node=web`). */
export interface FleetFilters {
  /** `key=value` pairs a node's labels must all have. */
  labels: [string, string][];
  /** Assignments to show (any of them); empty: all. */
  assignments: string[];
  /** Display states to show (any of them); empty: all. */
  states: DisplayState[];
  /** A part of the node's name. */
  node: string;
  /** 1-based page of rows. */
  page: number;
  /** `none`: one row per node even in a large fleet (then paged). */
  group: "auto" | "none";
}

/** Reads the filters from a URL's query; what does not parse is ignored. */
export function parseFilters(query: URLSearchParams): FleetFilters {
  const labels: [string, string][] = [];
  for (const label of query.getAll("label")) {
    const at = label.indexOf("=");
    if (at > 0) labels.push([label.slice(0, at), label.slice(at + 1)]);
  }
  const states = query.getAll("state").filter((s): s is DisplayState => Object.hasOwn(DISPLAY_STATES, s));
  const page = Number.parseInt(query.get("page") ?? "1", 10);
  return {
    labels,
    assignments: query.getAll("assignment").filter((a) => a !== ""),
    states,
    node: (query.get("node") ?? "").trim(),
    page: Number.isFinite(page) && page >= 1 ? page : 1,
    group: query.get("group") === "none" ? "none" : "auto",
  };
}

/** The query that gives `filters` back (defaults left out), for links and forms. */
export function filterQuery(filters: FleetFilters): URLSearchParams {
  const query = new URLSearchParams();
  if (filters.node) query.set("node", filters.node);
  for (const [key, value] of filters.labels) query.append("label", `${key}=${value}`);
  for (const assignment of filters.assignments) query.append("assignment", assignment);
  for (const state of filters.states) query.append("state", state);
  if (filters.group === "none") query.set("group", "none");
  if (filters.page > 1) query.set("page", String(filters.page));
  return query;
}

/** Whether any filter narrows what is shown. */
export function filtered(filters: FleetFilters): boolean {
  return (
    filters.labels.length > 0 || filters.assignments.length > 0 || filters.states.length > 0 || !!filters.node
  );
}

/** One cell: an instance, and whether the filters chose it (the others are shown faintly, for context). */
export interface GridCell {
  view: InstanceView;
  chosen: boolean;
}

/** One row: one node, or several whose rows are the same (`nodes.length > 1`). */
export interface GridRow {
  nodes: string[];
  /** One per column; undefined where the assignment is not placed on the node. */
  cells: (GridCell | undefined)[];
}

/** The grid the fleet page draws, with what it rests on. */
export interface FleetGrid {
  columns: string[];
  rows: GridRow[];
  /** Rows before paging, and the pages. */
  totalRows: number;
  page: number;
  pages: number;
  /** Whether alike nodes were grouped. */
  grouped: boolean;
  /** Nodes with at least one chosen instance. */
  nodeCount: number;
  /** The instances the filters chose. */
  chosen: InstanceView[];
}

/** When rows are grouped and paged. */
export interface GridLimits {
  /** More nodes than this, and alike rows are grouped. */
  groupAbove: number;
  rowsPerPage: number;
}

/** Group above 100 nodes; 200 rows a page. */
export const GRID_LIMITS: GridLimits = { groupAbove: 100, rowsPerPage: 200 };

/** How much a tone asks for attention: lower first. */
const URGENCY: Readonly<Record<DisplayStateInfo["tone"], number>> = {
  failure: 0,
  attention: 1,
  progress: 2,
  muted: 3,
  ok: 4,
};

function urgency(row: GridRow): number {
  let most = 5;
  for (const cell of row.cells)
    if (cell?.chosen) most = Math.min(most, URGENCY[DISPLAY_STATES[cell.view.state].tone]);
  return most;
}

/** Whether node `name` with `labels` is one the filters look at. */
function nodeChosen(filters: FleetFilters, name: string, labels: Readonly<Record<string, string>>): boolean {
  if (filters.node && !name.includes(filters.node)) return false;
  return filters.labels.every(([key, value]) => labels[key] === value);
}

/**
 * The grid for `filters`: `views` are the live instances, `labelsOf` a node's labels (empty for a
 * node the hub no longer declares).
 */
export function fleetGrid(
  views: readonly InstanceView[],
  labelsOf: (node: string) => Readonly<Record<string, string>>,
  filters: FleetFilters,
  limits: GridLimits = GRID_LIMITS,
): FleetGrid {
  const assignments = new Set(filters.assignments);
  const states = new Set(filters.states);
  const byNode = new Map<string, Map<string, GridCell>>();
  const columns = new Set<string>();
  const chosen: InstanceView[] = [];
  const nodeOk = new Map<string, boolean>();
  for (const view of views) {
    let ok = nodeOk.get(view.node);
    if (ok === undefined) {
      ok = nodeChosen(filters, view.node, labelsOf(view.node));
      nodeOk.set(view.node, ok);
    }
    if (!ok) continue;
    const isChosen =
      (assignments.size === 0 || assignments.has(view.assignment)) &&
      (states.size === 0 || states.has(view.state));
    let cells = byNode.get(view.node);
    if (!cells) {
      cells = new Map();
      byNode.set(view.node, cells);
    }
    cells.set(view.assignment, { view, chosen: isChosen });
    if (isChosen) {
      chosen.push(view);
      columns.add(view.assignment);
    }
  }
  const columnList = [...columns].sort();
  const rows: GridRow[] = [];
  for (const [node, cells] of [...byNode].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const rowCells = columnList.map((assignment) => cells.get(assignment));
    if (!rowCells.some((cell) => cell?.chosen)) continue;
    rows.push({ nodes: [node], cells: rowCells });
  }
  const nodeCount = rows.length;
  const grouped = filters.group === "auto" && nodeCount > limits.groupAbove;
  let shown = rows;
  if (grouped) {
    const bySignature = new Map<string, GridRow>();
    for (const row of rows) {
      const signature = row.cells
        .map((cell) => (cell ? `${cell.view.state}:${cell.view.generation}:${cell.chosen ? 1 : 0}` : "-"))
        .join("|");
      const group = bySignature.get(signature);
      if (group) group.nodes.push(row.nodes[0]!);
      else bySignature.set(signature, { nodes: [...row.nodes], cells: row.cells });
    }
    shown = [...bySignature.values()];
  }
  // Attention first; in a small fleet rows keep the nodes' order, which a person watching can follow.
  if (grouped)
    shown.sort(
      (a, b) =>
        urgency(a) - urgency(b) || b.nodes.length - a.nodes.length || (a.nodes[0]! < b.nodes[0]! ? -1 : 1),
    );
  const pages = Math.max(1, Math.ceil(shown.length / limits.rowsPerPage));
  const page = Math.min(filters.page, pages);
  return {
    columns: columnList,
    rows: shown.slice((page - 1) * limits.rowsPerPage, page * limits.rowsPerPage),
    totalRows: shown.length,
    page,
    pages,
    grouped,
    nodeCount,
    chosen,
  };
}
