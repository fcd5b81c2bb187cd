/**
 * `/`: the fleet at a glance — the answer `steward status` gives (answer.ts), how many instances
 * are in each state, a bar per assignment, the grid of nodes × assignments (grid.ts: alike nodes
 * grouped in a large fleet, never cut), and the open conditions, newest first. The filters are in
 * the URL, so a view can be shared. Cells change live, from the feed's events; the rest is
 * fetched again when an event says it changed.
 */
import { fleetStatus } from "../../answer.js";
import type { FleetFeed } from "../../fleet-feed.js";
import type { ConditionRecord, NodeRecord } from "../../records.js";
import { DISPLAY_STATES, type DisplayState } from "../../states.js";
import type { StoreReads } from "../../store/store.js";
import type { InstanceView } from "../../views.js";
import {
  type FleetFilters,
  type FleetGrid,
  filtered,
  filterQuery,
  fleetGrid,
  type GridRow,
  parseFilters,
} from "../grid.js";
import { type Html, html, path } from "../html.js";
import {
  count,
  type Page,
  type PageContext,
  plural,
  type Region,
  regionElement,
  revisionLink,
  STATE_ORDER,
  stateBar,
  stateCell,
  stateChip,
  symbol,
  when,
} from "../layout.js";
import { conditionItem, newestFirst, typeChips } from "./conditions.js";

/** Open conditions listed on the fleet page; the rest are one link away. */
const CONDITIONS_SHOWN = 10;
/** Nodes named in a grouped row; more are counted, and the filters find them. */
const MEMBERS_SHOWN = 1000;

const ANSWERS = {
  right: ["✓", "right"],
  converging: ["…", "converging"],
  "not-right": ["✗", "not right"],
} as const;

/** The filters as they are, with `changes` made: a link that narrows or widens the view. */
function withFilters(filters: FleetFilters, changes: Partial<FleetFilters>): string {
  return path([], filterQuery({ ...filters, page: 1, ...changes }));
}

async function answerBanner(
  store: StoreReads,
  views: readonly InstanceView[],
  open: readonly ConditionRecord[],
  ctx: PageContext,
): Promise<Html> {
  const status = fleetStatus(views, open);
  const [mark, word] = ANSWERS[status.answer];
  const notCounted = [
    status.observeOnly.length > 0 ? `${count(status.observeOnly.length)} observe-only` : "",
    status.drained.length > 0 ? `${count(status.drained.length)} drained` : "",
    status.skipped.length > 0 ? `${count(status.skipped.length)} skipped` : "",
  ].filter(Boolean);
  const head = await store.desired.latestRevision();
  return html`<div class="answer a-${status.answer}" role="status">
<span class="big" aria-hidden="true">${mark}</span>
<div><strong>${word}</strong>
<p>${status.conditions.length === 0 ? "no open conditions" : plural(status.conditions.length, "open condition")} · ${count(status.converged)}/${count(status.counted)} instances converged${notCounted.length > 0 ? ` · not counted: ${notCounted.join(", ")}` : ""}${status.failing.length > 0 ? ` · ${count(status.failing.length)} failing within budget` : ""}</p>
${head ? html`<p>at ${revisionLink(head.sha)} <span class="msg">${head.message.split("\n", 1)[0]}</span> · synced ${when(head.syncedAt, ctx.now)}</p>` : html`<p>no revision synced yet</p>`}
</div></div>`;
}

function totals(chosen: readonly InstanceView[], filters: FleetFilters): Html {
  const counts: Partial<Record<DisplayState, number>> = {};
  for (const view of chosen) counts[view.state] = (counts[view.state] ?? 0) + 1;
  return html`<ul class="chips" aria-label="instances by state">${STATE_ORDER.filter((s) => counts[s]).map(
    (state) => {
      const info = DISPLAY_STATES[state];
      const on = filters.states.includes(state);
      const toggled = on ? filters.states.filter((s) => s !== state) : [...filters.states, state];
      return stateChip(state, counts[state]!, withFilters(filters, { states: toggled }), {
        current: on,
        title: on ? `stop showing only ${info.label}` : `show only ${info.label}`,
      });
    },
  )}</ul>`;
}

function assignmentBars(chosen: readonly InstanceView[], filters: FleetFilters): Html {
  const byAssignment = new Map<string, InstanceView[]>();
  for (const view of chosen) {
    const list = byAssignment.get(view.assignment);
    if (list) list.push(view);
    else byAssignment.set(view.assignment, [view]);
  }
  if (byAssignment.size === 0) return html``;
  return html`<div class="bars">${[...byAssignment]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([assignment, views]) => {
      const states: Partial<Record<DisplayState, number>> = {};
      const generations = new Set<number>();
      let converged = 0;
      for (const view of views) {
        states[view.state] = (states[view.state] ?? 0) + 1;
        generations.add(view.generation);
        if (view.state === "converged") converged++;
      }
      const gens = [...generations].sort((a, b) => a - b);
      return html`<a class="name" href="${withFilters(filters, { assignments: [assignment] })}">${assignment}</a>${stateBar(states, views.length)}<span class="what">${count(converged)}/${count(views.length)} converged · generation${gens.length > 1 ? "s" : ""} ${gens.join(", ")}</span>`;
    })}</div>`;
}

function filterForm(
  nodes: readonly NodeRecord[],
  views: readonly InstanceView[],
  filters: FleetFilters,
): Html {
  const labels = new Set<string>();
  for (const node of nodes) {
    if (node.removedAt) continue;
    for (const [key, value] of Object.entries(node.spec.metadata?.labels ?? {}))
      labels.add(`${key}=${value}`);
  }
  const assignments = [...new Set(views.map((v) => v.assignment))].sort();
  const label = filters.labels[0] ? `${filters.labels[0][0]}=${filters.labels[0][1]}` : "";
  const option = (value: string, current: string, text: string = value) =>
    html`<option value="${value}"${value === current ? html` selected` : ""}>${text}</option>`;
  return html`<form class="filters" method="get" action="/" role="search" aria-label="Filter the fleet">
<label for="f-node">node name<input id="f-node" name="node" value="${filters.node}" placeholder="web-" size="14"></label>
<label for="f-label">label<select id="f-label" name="label">${option("", label, "any")}${[...labels]
    .sort()
    .slice(0, 300)
    .map((l) => option(l, label))}</select></label>
<label for="f-assignment">assignment<select id="f-assignment" name="assignment">${option("", filters.assignments[0] ?? "", "any")}${assignments.map((a) => option(a, filters.assignments[0] ?? ""))}</select></label>
<label for="f-state">state<select id="f-state" name="state">${option("", filters.states[0] ?? "", "any")}${STATE_ORDER.filter((s) => s !== "superseded" && s !== "retired").map((s) => option(s, filters.states[0] ?? "", DISPLAY_STATES[s].label))}</select></label>
<label for="f-group"><span>one row per node</span><input id="f-group" type="checkbox" name="group" value="none"${filters.group === "none" ? html` checked` : ""}></label>
<button type="submit">Show</button>${filtered(filters) || filters.group === "none" ? html` <a href="/">clear filters</a>` : ""}
</form>`;
}

function groupCell(row: GridRow, column: number, assignment: string, filters: FleetFilters): Html {
  const cell = row.cells[column];
  if (!cell) return html`<td><span class="none" aria-label="not placed">—</span></td>`;
  const info = DISPLAY_STATES[cell.view.state];
  const words = `${count(row.nodes.length)} instances of ${assignment}: ${info.label}, generation ${cell.view.generation}`;
  const href = withFilters(filters, { assignments: [assignment], states: [cell.view.state] });
  return html`<td><a class="cell t-${info.tone}${cell.chosen ? "" : " out"}" data-a="${assignment}" data-s="${cell.view.state}" href="${href}" title="${words}" aria-label="${words}">${symbol(info.symbol)}<span class="gen">${cell.view.generation}</span></a></td>`;
}

function gridRow(row: GridRow, grid: FleetGrid, filters: FleetFilters, index: number): Html {
  if (row.nodes.length === 1) {
    const node = row.nodes[0]!;
    return html`<tr><th scope="row"><a href="${path(["nodes", node])}">${node}</a></th>${row.cells.map(
      (cell) =>
        cell
          ? html`<td>${stateCell(cell.view, { chosen: cell.chosen })}</td>`
          : html`<td><span class="none" aria-label="not placed">—</span></td>`,
    )}</tr>`;
  }
  const members = row.nodes.slice(0, MEMBERS_SHOWN);
  // Every member is named for the live script (a member that changes gets a row of its own); the
  // first ones are also links.
  return html`<tr class="group" data-members="${row.nodes.join(" ")}"><th scope="row"><details id="group-${index}"><summary><b data-count="${row.nodes.length}">${count(row.nodes.length)}</b> nodes alike <span class="small">${row.nodes.slice(0, 2).join(", ")}, …</span></summary><div class="members">${members.map(
    (n) => html`<a data-n="${n}" href="${path(["nodes", n])}">${n}</a>`,
  )}${row.nodes.length > members.length ? html`<span class="soft">and ${count(row.nodes.length - members.length)} more: narrow with the filters</span>` : ""}</div></details></th>${grid.columns.map((assignment, column) => groupCell(row, column, assignment, filters))}</tr>`;
}

function gridTable(grid: FleetGrid, filters: FleetFilters): Html {
  if (grid.rows.length === 0)
    return html`<p class="soft">${filtered(filters) ? "No instance matches these filters." : "No instance yet: the hub has not synced a revision that places an assignment on a node."}</p>`;
  const first = (grid.page - 1) * (grid.totalRows > 0 ? Math.ceil(grid.totalRows / grid.pages) : 0);
  return html`<p class="soft small">${plural(grid.nodeCount, "node")} × ${plural(grid.columns.length, "assignment")}${grid.grouped ? html` · nodes whose rows are the same are one row (<a href="${withFilters(filters, { group: "none" })}">one row per node</a>); failures first` : ""}</p>
<div class="grid-wrap" tabindex="0" aria-label="fleet grid"><table class="grid" data-grid>
<thead><tr><th scope="col">node</th>${grid.columns.map((a) => html`<th scope="col" class="col"><a href="${withFilters(filters, { assignments: [a] })}">${a}</a></th>`)}</tr></thead>
<tbody>${grid.rows.map((row, i) => gridRow(row, grid, filters, first + i))}</tbody>
</table></div>
${grid.pages > 1 ? html`<p class="pager">${grid.page > 1 ? html`<a href="${path([], filterQuery({ ...filters, page: grid.page - 1 }))}">← previous</a>` : ""} rows ${count(first + 1)}–${count(first + grid.rows.length)} of ${count(grid.totalRows)} ${grid.page < grid.pages ? html`<a href="${path([], filterQuery({ ...filters, page: grid.page + 1 }))}">next →</a>` : ""}</p>` : ""}`;
}

function conditionsAside(open: readonly ConditionRecord[], ctx: PageContext): Html {
  const newest = newestFirst(open);
  return html`<section class="panel"><h2>Open conditions <span class="count">${count(open.length)}, newest first</span></h2>
${open.length === 0 ? html`<p class="soft">None: nothing steward owns is known to be wrong.</p>` : html`${typeChips(open)}<ol class="conditions">${newest.slice(0, CONDITIONS_SHOWN).map((c) => conditionItem(c, ctx.now))}</ol>${open.length > CONDITIONS_SHOWN ? html`<p><a href="/conditions">all ${count(open.length)} open conditions →</a></p>` : ""}`}
</section>`;
}

/** `compute` run at most once, when first asked for (a page may need it in several parts, or not at all). */
function once<T>(compute: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => {
    value ??= compute();
    return value;
  };
}

/** The fleet page for the filters in `ctx.url`. */
export async function fleetPage(store: StoreReads, feed: FleetFeed, ctx: PageContext): Promise<Page> {
  const filters = parseFilters(ctx.url.searchParams);
  const nodes = once(() => store.nodes.list());
  const grid = once(async () => {
    const labelsOf = new Map((await nodes()).map((n) => [n.name, n.spec.metadata?.labels ?? {}]));
    return fleetGrid(await feed.instances(), (node) => labelsOf.get(node) ?? {}, filters);
  });
  const gridRegion: Region = {
    name: "grid",
    refresh: ["resync"],
    render: async () => gridTable(await grid(), filters),
  };
  const events = new URLSearchParams(filterQuery({ ...filters, states: [], page: 1, group: "auto" }));
  events.set("scope", "fleet");
  return {
    title: "Fleet",
    section: "fleet",
    mainClass: "fleet",
    parts: [
      {
        name: "summary",
        refresh: ["instance", "condition", "revision", "resync"],
        delayMs: 300,
        render: async () => {
          const views = await feed.instances();
          const chosen = filtered(filters) ? (await grid()).chosen : views;
          return html`${await answerBanner(store, views, await store.conditions.list({ status: "open" }), ctx)}
<section class="panel"><h2>${filtered(filters) ? html`Shown <span class="count">${plural(chosen.length, "instance")} of ${count(views.length)}</span>` : html`Instances <span class="count">${count(views.length)}</span>`}</h2>${totals(chosen, filters)}
${assignmentBars(chosen, filters)}</section>`;
        },
      },
      html`<section class="panel"><h2>Nodes × assignments</h2>${filterForm(await nodes(), await feed.instances(), filters)}
<p id="stale" class="notice" hidden><b>0</b> changes to instances this page does not show yet: <a href="">reload</a> to see them.</p>
${await regionElement(gridRegion)}</section>`,
      {
        name: "conditions",
        className: "side",
        refresh: ["condition", "resync"],
        delayMs: 500,
        render: async () => conditionsAside(await store.conditions.list({ status: "open" }), ctx),
      },
    ],
    embedded: [gridRegion],
    events,
  };
}
