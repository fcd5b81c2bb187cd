/**
 * `/instances/:assignment@:node`: the story `steward describe instance` tells (story.ts) — how it
 * stands, what should be (generation, hash, revision, resources, policy), what the latest report
 * saw of each resource with the line of its evidence that names the error and the evidence itself,
 * the attempts, the conditions and the intent history.
 */
import { DISPLAY_STATES } from "../../states.js";
import type { InstanceStory, ObservedStory } from "../../story.js";
import { type Html, html } from "../html.js";
import {
  duration,
  errorLine,
  evidence,
  facts,
  link,
  type Page,
  type PageContext,
  plural,
  revisionLink,
  stateBadge,
  stateCell,
  storyPage,
  symbol,
  when,
} from "../layout.js";
import { attemptsTable } from "./attempts.js";
import { conditionsSection } from "./conditions.js";

const RESOURCE_TONE: Readonly<Record<string, string>> = {
  ok: "t-ok",
  drifted: "t-attention",
  waiting: "t-attention",
  failed: "t-failure",
  stuck: "t-failure",
  blocked: "t-muted",
  interrupted: "t-failure",
};

const RESOURCE_SYMBOL: Readonly<Record<string, string>> = {
  ok: "✓",
  drifted: "~",
  waiting: "↻",
  failed: "✗",
  stuck: "✗",
  blocked: "-",
  interrupted: "!",
};

function resourceBadge(status: string): Html {
  return html`<span class="badge ${RESOURCE_TONE[status] ?? "t-muted"}">${symbol(RESOURCE_SYMBOL[status] ?? "?")} ${status}</span>`;
}

function observedSection(observed: ObservedStory | undefined, ctx: PageContext): Html {
  if (!observed)
    return html`<section class="panel"><h2>Observed</h2><p class="soft">No report yet.</p></section>`;
  return html`<section class="panel"><h2>Observed <span class="count">report taken ${when(observed.takenAt, ctx.now)}</span></h2>
${facts([
  ["generation applied", observed.generation],
  ["state", observed.state],
  ["version", observed.version],
  [
    "compared",
    observed.converged
      ? html`<span class="badge t-ok">✓ converged</span>`
      : html`<span class="msg">not converged: ${observed.summary}</span>`,
  ],
])}
<table><thead><tr><th>resource</th><th>status</th><th>why</th><th>counters</th></tr></thead><tbody>${observed.resources.map(
    (r, i) => html`<tr>
<td><b>${r.kind}</b> ${r.name}</td>
<td>${resourceBadge(r.status)}${r.failureClass ? html` <span class="soft small">${r.failureClass}</span>` : ""}</td>
<td class="msg">${r.blockedBy ? `blocked by ${r.blockedBy}` : [r.reason, r.message].filter(Boolean).join(": ")}${errorLine(r.errorLine)}${r.diff?.length ? evidence(r.diff.join("\n"), { id: `diff-${i}`, label: "what differs" }) : ""}${evidence(r.evidence, { id: `evidence-${i}`, open: r.status !== "ok" })}</td>
<td class="small soft">${r.consecutiveFailures > 0 ? `${plural(r.consecutiveFailures, "failure")} in a row, ${r.everApplied ? "applied before" : "never applied"}` : r.everApplied ? "applied" : ""}</td>
</tr>`,
  )}</tbody></table>
${
  observed.probes.length > 0
    ? html`<h2>Probes</h2><table><thead><tr><th>probe</th><th>result</th><th>message</th><th>at</th></tr></thead><tbody>${observed.probes.map(
        (p) =>
          html`<tr><td>${p.name} <span class="soft">${p.kind}</span></td><td>${p.ok ? html`<span class="badge t-ok">✓ passes</span>` : html`<span class="badge t-failure">✗ fails</span>`}</td><td class="msg">${p.message}${evidence(p.evidence)}</td><td>${when(p.at, ctx.now)}</td></tr>`,
      )}</tbody></table>`
    : ""
}
</section>`;
}

function nowSection(story: InstanceStory, ctx: PageContext): Html {
  const now = story.now;
  const failing = now.state === "failing";
  return html`<section class="panel">${facts([
    [
      "state",
      html`${stateCell(now)} ${stateBadge(now.state, now.state === "held" && now.holdReason ? `(${now.holdReason})` : undefined)}`,
    ],
    [
      "why",
      now.reason || now.message
        ? html`<span class="msg">${[now.reason, now.message].filter(Boolean).join(": ")}</span>`
        : undefined,
    ],
    ["error", now.errorLine ? errorLine(now.errorLine) : undefined],
    [
      "budget",
      failing || now.failures > 0
        ? `${now.failures} of ${now.budget.attempts} failures spent (the budget: ${now.budget.attempts} within ${duration(now.budget.withinMs)})`
        : undefined,
    ],
    ["next attempt", now.nextAttemptAt ? when(now.nextAttemptAt, ctx.now) : undefined],
    ["last attempt", now.lastAttemptId ? link(["attempts", now.lastAttemptId]) : undefined],
    ["open conditions", now.openConditions.join(", ")],
  ])}</section>`;
}

function desiredSection(story: InstanceStory): Html {
  const d = story.desired;
  return html`<section class="panel"><h2>Desired <span class="count">generation ${d.generation}</span></h2>${facts(
    [
      [
        "revision",
        html`${revisionLink(d.revision)}${d.revisionSubject ? html` <span class="msg">${d.revisionSubject}</span>` : ""}`,
      ],
      ["spec hash", html`<span class="mono">${d.hash.slice(0, 16)}</span>`],
      ["state", d.state],
      ["version", d.version],
      ["retired", d.retiredAt],
      ["resources", d.resources.map((r, i) => html`${i > 0 ? ", " : ""}${r.kind} ${r.name}`)],
      ["probes", d.probes.join(", ")],
      ["depends on", d.dependsOn.join(", ")],
      ["budget", `${d.budget.attempts} attempts within ${duration(d.budget.withinMs)}`],
    ],
  )}</section>`;
}

function historySection(story: InstanceStory, ctx: PageContext): Html {
  return html`<section class="panel"><h2>History <span class="count">${plural(story.history.length, "generation")}</span></h2><table><thead><tr><th>generation</th><th>revision</th><th>state</th><th>outcome</th><th>failures</th><th>last attempt</th><th>updated</th></tr></thead><tbody>${story.history.map(
    (h) =>
      html`<tr><td>${h.generation}</td><td>${revisionLink(h.revision)}</td><td>${stateBadge(h.state)}</td><td>${h.outcome}${h.failureClass ? html` <span class="soft small">${h.failureClass}</span>` : ""}</td><td>${h.failures}</td><td>${h.lastAttemptId ? link(["attempts", h.lastAttemptId]) : ""}</td><td>${when(h.updatedAt, ctx.now)}</td></tr>`,
  )}</tbody></table></section>`;
}

/** The instance page; `render` reads the story again for each live refresh. */
export function instancePage(
  story: InstanceStory,
  render: () => Promise<InstanceStory | undefined>,
  ctx: PageContext,
): Page {
  const body = (
    s: InstanceStory,
  ) => html`<h1><span class="kind">instance</span>${s.assignment}@${link(["nodes", s.node])}</h1>
<p class="sub">${DISPLAY_STATES[s.now.state].label} · generation ${s.desired.generation}${s.observed ? ` · observed ${s.observed.generation}` : ""} · <a href="/?assignment=${encodeURIComponent(s.assignment)}">every node of ${s.assignment}</a></p>
${nowSection(s, ctx)}
${observedSection(s.observed, ctx)}
${conditionsSection(s.conditions, ctx.now)}
<section class="panel"><h2>Attempts <span class="count">newest first</span></h2>${attemptsTable(s.attempts, ctx.now)}</section>
${desiredSection(s)}
${historySection(s, ctx)}`;
  return storyPage({
    title: story.name,
    section: "fleet",
    read: render,
    body,
    gone: "This instance is no longer known to the hub.",
    refresh: ["instance", "condition", "node", "resync"],
    events: new URLSearchParams({ scope: "instance", id: story.name }),
  });
}
