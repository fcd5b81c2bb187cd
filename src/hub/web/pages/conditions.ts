/**
 * Conditions on the web: one condition as a list entry (fleet page, node and instance pages, the
 * conditions page), `/conditions` — open ones newest first, by type, or the recently resolved —
 * and `/conditions/:id`, the story `steward describe condition` tells (story.ts), with its task and
 * the actions on it.
 */
import { stringify } from "yaml";
import type { ConditionRecord, TaskRecord } from "../../records.js";
import type { StoreReads } from "../../store/store.js";
import type { ConditionStory, ConditionStoryOf } from "../../story.js";
import { type Html, html, path } from "../html.js";
import {
  count,
  evidence,
  facts,
  link,
  type Page,
  type PageContext,
  plural,
  revisionLink,
  storyPage,
  when,
} from "../layout.js";
import { attemptsTable } from "./attempts.js";
import { taskActions } from "./tasks.js";

/** A link to a condition's subject: the node, instance or revision it is about. */
export function subjectLink(c: Pick<ConditionRecord, "subjectKind" | "subject">): Html {
  if (c.subjectKind === "instance") return html`instance ${link(["instances", c.subject])}`;
  if (c.subjectKind === "node") return html`node ${link(["nodes", c.subject])}`;
  if (c.subjectKind === "revision") return html`revision ${revisionLink(c.subject)}`;
  if (c.subjectKind === "rollout") {
    const at = c.subject.lastIndexOf("@");
    return html`rollout of ${c.subject.slice(0, at)} at ${revisionLink(c.subject.slice(at + 1))}`;
  }
  return html`${c.subjectKind} ${c.subject}`;
}

/**
 * One condition as an entry of a list: type, subject, since when, the message, the attempt, and
 * (a story's condition) the task a person can act on.
 */
export function conditionItem(c: ConditionRecord & { task?: TaskRecord }, now: Date): Html {
  const task = c.task && (c.task.status === "open" || c.task.status === "claimed") ? c.task : undefined;
  return html`<li data-condition="${c.id}">
<div><a class="ctype" href="${path(["conditions", c.id])}">${c.type}</a> on ${subjectLink(c)} <span class="soft small">· ${c.reason} · since ${when(c.since, now)}${c.status === "resolved" ? html` · resolved ${when(c.resolvedAt, now)}` : ""}</span></div>
<div class="msg">${c.message}</div>
${c.attemptId ? html`<div class="small soft">attempt ${link(["attempts", c.attemptId])}${c.tried.length > 1 ? html` · ${plural(c.tried.length, "attempt")} tried` : ""}</div>` : ""}
${task ? html`<div class="small">needs a person: <a href="/tasks#task-${task.id}">task ${task.id}</a> (${task.status}${task.claimedBy ? ` by ${task.claimedBy}` : ""})</div>` : ""}
</li>`;
}

/** Newest first: a person looks for what just went wrong. */
export function newestFirst(conditions: readonly ConditionRecord[]): ConditionRecord[] {
  return [...conditions].sort((a, b) =>
    a.openedAt === b.openedAt ? (a.id < b.id ? 1 : -1) : a.openedAt < b.openedAt ? 1 : -1,
  );
}

/** How many conditions of each type, as links to the list of that type. */
export function typeChips(conditions: readonly ConditionRecord[]): Html {
  const byType = new Map<string, number>();
  for (const c of conditions) byType.set(c.type, (byType.get(c.type) ?? 0) + 1);
  return html`<ul class="chips">${[...byType].map(
    ([type, n]) =>
      html`<li><a class="chip t-failure" href="${path(["conditions"], new URLSearchParams({ type }))}">${type} <b>${count(n)}</b></a></li>`,
  )}</ul>`;
}

/** A story's conditions: open ones in full, the recently resolved ones as a list. */
export function conditionsSection(
  conditions: { open: ConditionStory[]; recent: ConditionStory[] },
  now: Date,
): Html {
  return html`<section class="panel"><h2>Conditions <span class="count">${conditions.open.length} open</span></h2>
${conditions.open.length === 0 ? html`<p class="soft">No open condition.</p>` : html`<ol class="conditions">${newestFirst(conditions.open).map((c) => conditionItem(c, now))}</ol>`}
${conditions.recent.length > 0 ? html`<details id="resolved-conditions"><summary>${plural(conditions.recent.length, "recently resolved condition")}</summary><ol class="conditions">${conditions.recent.map((c) => conditionItem(c, now))}</ol></details>` : ""}
</section>`;
}

const PAGE_SIZE = 100;

/** `/conditions[?type=T][&status=resolved][&page=N]`. */
export function conditionsPage(store: StoreReads, ctx: PageContext): Page {
  const type = ctx.url.searchParams.get("type") ?? undefined;
  const resolved = ctx.url.searchParams.get("status") === "resolved";
  const pageNumber = Math.max(1, Number.parseInt(ctx.url.searchParams.get("page") ?? "1", 10) || 1);
  const render = async () => {
    const open = await store.conditions.list({ status: "open" });
    const listed = (
      resolved
        ? (await store.conditions.list({ status: "resolved" })).sort((a, b) =>
            (a.resolvedAt ?? "") < (b.resolvedAt ?? "") ? 1 : -1,
          )
        : newestFirst(open)
    ).filter((c) => !type || c.type === type);
    const pages = Math.max(1, Math.ceil(listed.length / PAGE_SIZE));
    const page = Math.min(pageNumber, pages);
    const query = (changes: Record<string, string | undefined>) => {
      const q = new URLSearchParams(ctx.url.searchParams);
      for (const [key, value] of Object.entries(changes))
        if (value === undefined) q.delete(key);
        else q.set(key, value);
      return path(["conditions"], q);
    };
    return html`<h1>${resolved ? "Resolved conditions" : "Open conditions"}${type ? html` <span class="kind">of type ${type}</span>` : ""}</h1>
<p class="sub">${resolved ? html`Resolved by observation (or, for a human procedure, by who did it), newest first. <a href="${query({ status: undefined, page: undefined })}">Open ones</a>` : html`Each stays open until observation shows it resolved; newest first. <a href="${query({ status: "resolved", page: undefined })}">Recently resolved</a>`}${type ? html` · <a href="${query({ type: undefined, page: undefined })}">every type</a>` : ""}</p>
${resolved ? "" : typeChips(open)}
<section class="panel">
${listed.length === 0 ? html`<p class="soft">None.</p>` : html`<ol class="conditions">${listed.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE).map((c) => conditionItem(c, ctx.now))}</ol>`}
${pages > 1 ? html`<p class="pager">${page > 1 ? html`<a href="${query({ page: String(page - 1) })}">← newer</a>` : ""} page ${page} of ${pages} ${page < pages ? html`<a href="${query({ page: String(page + 1) })}">older →</a>` : ""}</p>` : ""}
</section>`;
  };
  return {
    title: resolved ? "Resolved conditions" : "Conditions",
    section: "conditions",
    parts: [{ name: "main", refresh: ["condition", "resync"], render }],
    events: new URLSearchParams({ scope: "conditions" }),
  };
}

/** `/conditions/:id`: the story of one condition. */
export function conditionPage(
  story: ConditionStoryOf,
  render: () => Promise<ConditionStoryOf | undefined>,
  ctx: PageContext,
): Page {
  const body = (s: ConditionStoryOf) => {
    const c = s.condition;
    return html`<h1><span class="kind">condition</span>${c.type} <span class="badge ${c.status === "open" ? "t-failure" : "t-ok"}">${c.status === "open" ? "✗ open" : "✓ resolved"}</span></h1>
<p class="sub">on ${subjectLink(c)} · <span class="mono">${c.id}</span></p>
<section class="panel">${facts([
      ["reason", c.reason],
      ["message", html`<span class="msg">${c.message}</span>`],
      ["since", when(c.since, ctx.now)],
      ["last observed", when(c.lastObserved, ctx.now)],
      ["opened", when(c.openedAt, ctx.now)],
      [
        "resolved",
        c.resolvedAt
          ? html`${when(c.resolvedAt, ctx.now)}${c.resolution ? html`: ${c.resolution}` : ""}`
          : undefined,
      ],
      ["node", c.node ? link(["nodes", c.node]) : undefined],
      ["assignment", c.assignment],
      ["revision", c.revision ? revisionLink(c.revision) : undefined],
      ["generation", c.generation],
      ["attempt", c.attemptId ? link(["attempts", c.attemptId]) : undefined],
      ["who can resolve it", c.resolver],
      ["procedure", c.procedure ? html`<span class="msg">${c.procedure}</span>` : undefined],
    ])}
${Object.keys(c.evidence).length > 0 ? evidence(stringify(c.evidence, { lineWidth: 0 }), { id: "condition-evidence", open: true }) : ""}
</section>
${c.task ? html`<section class="panel"><h2>Task</h2>${taskActions(c.task, c, ctx)}</section>` : ""}
<section class="panel"><h2>History</h2>${
      c.history.length === 0
        ? html`<p class="soft">None.</p>`
        : html`<table><thead><tr><th>when</th><th>event</th><th>reason</th><th>message</th></tr></thead><tbody>${c.history.map(
            (e) =>
              html`<tr><td>${when(e.at, ctx.now)}</td><td>${e.event}</td><td>${e.reason}</td><td class="msg">${e.message}${e.attemptId ? html` (attempt ${link(["attempts", e.attemptId])})` : ""}</td></tr>`,
          )}</tbody></table>`
    }</section>
<section class="panel"><h2>Attempts tried <span class="count">${s.attempts.length}</span></h2>${attemptsTable(s.attempts, ctx.now)}</section>`;
  };
  return storyPage({
    title: `${story.condition.type} on ${story.condition.subject}`,
    section: "conditions",
    read: render,
    body,
    gone: "This condition is gone.",
    refresh: ["condition", "task", "resync"],
    events: new URLSearchParams({ scope: "condition", id: story.condition.id }),
  });
}
