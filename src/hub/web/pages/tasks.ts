/**
 * `/tasks`: conditions that need judgement, as work for a person — what steward knows (the
 * condition, its evidence and procedure) and, for a signed-in operator, the forms that claim,
 * resolve (with the action taken, and the decision a task of its type takes) or decline one. The
 * actions are tasks.ts's, recorded with the operator's name as `steward tasks` records the CLI's.
 */
import type { ConditionRecord, TaskRecord } from "../../records.js";
import type { StoreReads } from "../../store/store.js";
import { listTasks, taskOutcomes } from "../../tasks.js";
import { type Html, html, path } from "../html.js";
import { actionForm, facts, link, type Page, type PageContext, plural, signInHint, when } from "../layout.js";
import { subjectLink } from "./conditions.js";

const TASK_TONE: Readonly<Record<TaskRecord["status"], string>> = {
  open: "t-attention",
  claimed: "t-progress",
  resolved: "t-ok",
  closed: "t-muted",
};

/** A task's status as a badge, with who holds it. */
export function taskBadge(task: TaskRecord): Html {
  const who =
    task.status === "claimed"
      ? ` by ${task.claimedBy}`
      : task.status === "resolved"
        ? ` by ${task.resolvedBy}`
        : "";
  return html`<span class="badge ${TASK_TONE[task.status]}">${task.status}${who}</span>`;
}

/** What a task says and, for who may act on it, its forms. */
export function taskActions(task: TaskRecord, condition: ConditionRecord, ctx: PageContext): Html {
  const session = ctx.session;
  const base = path(["tasks", task.id]);
  const live = task.status === "open" || task.status === "claimed";
  const mine = task.status === "claimed" && session !== undefined && task.claimedBy === session.operator.name;
  const outcomes = taskOutcomes(task.type);
  const summary = facts([
    ["task", html`<span class="mono">${task.id}</span> ${taskBadge(task)}`],
    ["created", when(task.createdAt, ctx.now)],
    ["claimed", task.claimedAt ? html`${when(task.claimedAt, ctx.now)} by ${task.claimedBy}` : undefined],
    [
      "resolved",
      task.resolvedAt
        ? html`${when(task.resolvedAt, ctx.now)}${task.resolvedBy ? ` by ${task.resolvedBy}` : ""}`
        : undefined,
    ],
    ["action taken", task.action ? html`<span class="msg">${task.action}</span>` : undefined],
    ["decision", task.outcome],
    ["closed", task.closedReason],
    ["procedure", condition.procedure ? html`<span class="msg">${condition.procedure}</span>` : undefined],
  ]);
  if (!live) return summary;
  if (!session) return html`${summary}${signInHint(ctx, "claim and resolve tasks")}`;
  if (task.status === "claimed" && !mine)
    return html`${summary}<p class="hint">Claimed by ${task.claimedBy}: only they can resolve or decline it.</p>`;
  const id = `resolve-${task.id}`;
  const resolveFields = html`<label for="${id}-action">what you did<textarea id="${id}-action" name="action" required placeholder="moved /srv/web aside; published the image..."></textarea></label>${
    outcomes.length > 0
      ? html`<label for="${id}-outcome">decision<select id="${id}-outcome" name="outcome" required>${outcomes.map((o) => html`<option value="${o}">${o}</option>`)}</select></label>`
      : ""
  }`;
  return html`${summary}<div class="actions">
${task.status === "open" ? actionForm(session, `${base}/claim`, "Claim", { label: `Claim task ${task.id}` }) : ""}
${actionForm(session, `${base}/resolve`, "Resolve", { fields: resolveFields, label: `Resolve task ${task.id}` })}
${mine ? actionForm(session, `${base}/decline`, "Decline", { fields: html`<label for="decline-${task.id}">why<input id="decline-${task.id}" name="note"></label>`, label: `Decline task ${task.id}` }) : ""}
</div>`;
}

/** `/tasks[?all=1]`. */
export function tasksPage(store: StoreReads, ctx: PageContext): Page {
  const all = ctx.url.searchParams.get("all") === "1";
  const render = async () => {
    const tasks = (await listTasks(store, { all })).sort((a, b) =>
      a.task.createdAt < b.task.createdAt ? 1 : -1,
    );
    return html`<h1>Tasks</h1>
<p class="sub">Conditions that need judgement. Resolving a task records what you did; its condition closes when observation shows it resolved. ${all ? html`<a href="/tasks">Open ones only</a>` : html`<a href="/tasks?all=1">With resolved and closed ones</a>`}</p>
${tasks.length === 0 ? html`<p class="panel soft">${all ? "No task." : "No open task: nothing waits for a person."}</p>` : ""}
${tasks.map(
  ({ task, condition }) => html`<section class="panel" id="task-${task.id}">
<h2>${link(["conditions", condition.id], condition.type)} on ${subjectLink(condition)} <span class="count">since ${when(condition.since, ctx.now)}</span></h2>
<p class="msg">${condition.message}</p>
${condition.tried.length > 0 ? html`<p class="small soft">${plural(condition.tried.length, "attempt")} tried, the last ${link(["attempts", condition.tried.at(-1)!])}</p>` : ""}
${taskActions(task, condition, ctx)}
</section>`,
)}`;
  };
  return {
    title: "Tasks",
    section: "tasks",
    parts: [{ name: "main", refresh: ["condition", "task", "resync"], render }],
    events: new URLSearchParams({ scope: "tasks" }),
  };
}
