/**
 * `/nodes/:name`: the story `steward describe node` tells (story.ts) — transport, labels, whether
 * it is drained and by whom, when it was last heard from, its instances, attempts and conditions —
 * and, for a signed-in operator, drain and undrain (operator.ts, as `steward drain` does).
 */
import type { NodeStory } from "../../story.js";
import { type Html, html, path } from "../html.js";
import {
  actionForm,
  errorLine,
  facts,
  link,
  type Page,
  type PageContext,
  signInHint,
  stateBadge,
  stateCell,
  storyPage,
  when,
} from "../layout.js";
import { attemptsTable } from "./attempts.js";
import { conditionsSection } from "./conditions.js";

function drainActions(story: NodeStory, ctx: PageContext): Html {
  if (!story.declared) return html``;
  if (!ctx.session) return signInHint(ctx, story.draining ? "undrain this node" : "drain this node");
  const base = path(["nodes", story.name]);
  return html`<div class="actions">${
    story.draining
      ? actionForm(ctx.session, `${base}/undrain`, "Undrain", { label: `Undrain node ${story.name}` })
      : actionForm(ctx.session, `${base}/drain`, "Drain", {
          danger: true,
          label: `Drain node ${story.name}`,
          fields: html`<label for="drain-reason">why (shown with the node)<input id="drain-reason" name="reason" size="40" placeholder="kernel upgrade"></label>`,
        })
  }</div><p class="hint">${story.draining ? "Undraining resumes dispatches: the node converges to the current generation." : "Draining stops new dispatches to this node and keeps its desired state; to stop its services, write state: stopped in Git."}</p>`;
}

/** The node page; `render` reads the story again for each live refresh. */
export function nodePage(
  story: NodeStory,
  render: () => Promise<NodeStory | undefined>,
  ctx: PageContext,
): Page {
  const body = (
    s: NodeStory,
  ) => html`<h1><span class="kind">node</span>${s.name}${s.draining ? html` ${stateBadge("drained")}` : ""}${s.declared ? "" : html` <span class="badge t-muted">no longer declared</span>`}</h1>
<p class="sub">${s.transport} · ${Object.entries(s.labels).map(([k, v], i) => html`${i > 0 ? " " : ""}<a class="mono" href="${path([], new URLSearchParams({ label: `${k}=${v}` }))}">${k}=${v}</a>`)}</p>
<section class="panel">${facts([
    ["transport", s.transport],
    [
      "revision",
      s.revision ? html`declared at ${link(["revisions", s.revision], s.revision.slice(0, 12))}` : undefined,
    ],
    [
      "drained",
      s.draining
        ? html`since ${when(s.drainedAt, ctx.now)}${s.drainedBy ? html` by <b>${s.drainedBy}</b>` : ""}${s.drainReason ? html`: <span class="msg">${s.drainReason}</span>` : ""}`
        : "no",
    ],
    ["last heartbeat", when(s.lastHeartbeatAt, ctx.now)],
    ["last report", when(s.lastReportAt, ctx.now)],
  ])}${drainActions(s, ctx)}</section>
<section class="panel"><h2>Instances <span class="count">${s.instances.length}</span></h2><table><thead><tr><th>assignment</th><th>state</th><th>generation</th><th>observed</th><th>why</th></tr></thead><tbody>${s.instances.map(
    (i) =>
      html`<tr><td>${link(["instances", i.instance], i.assignment)}</td><td>${stateCell(i)} ${stateBadge(i.state, i.state === "held" && i.holdReason ? `(${i.holdReason})` : undefined)}</td><td>${i.generation}</td><td>${i.observedGeneration ?? ""}</td><td class="msg">${[i.reason, i.message].filter(Boolean).join(": ")}${errorLine(i.errorLine)}</td></tr>`,
  )}</tbody></table></section>
${conditionsSection(s.conditions, ctx.now)}
<section class="panel"><h2>Attempts <span class="count">newest first</span></h2>${attemptsTable(s.attempts, ctx.now)}</section>`;
  return storyPage({
    title: `node ${story.name}`,
    section: "fleet",
    read: render,
    body,
    gone: "This node is no longer known to the hub.",
    refresh: ["instance", "condition", "node", "resync"],
    events: new URLSearchParams({ scope: "node", id: story.name }),
  });
}
