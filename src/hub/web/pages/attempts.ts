/**
 * Attempts on the web: a table of attempts (instance, node and condition pages) and
 * `/attempts/:id`, the story `steward describe attempt` tells (story.ts): outcome, failure class,
 * the evidence of each failed resource, the intent at its generation and the conditions citing it.
 */
import type { AttemptStory, AttemptStoryOf } from "../../story.js";
import { type Html, html } from "../html.js";
import {
  errorLine,
  evidence,
  facts,
  link,
  type Page,
  type PageContext,
  stateBadge,
  storyPage,
  symbol,
  when,
} from "../layout.js";

const TONE_OF_ATTEMPT: Readonly<Record<AttemptStory["status"], string>> = {
  queued: "t-progress",
  dispatched: "t-progress",
  succeeded: "t-ok",
  failed: "t-failure",
  ambiguous: "t-attention",
  lost: "t-attention",
  cancelled: "t-muted",
  superseded: "t-muted",
};

const SYMBOL_OF_ATTEMPT: Readonly<Record<AttemptStory["status"], string>> = {
  queued: "…",
  dispatched: "…",
  succeeded: "✓",
  failed: "✗",
  ambiguous: "?",
  lost: "?",
  cancelled: "·",
  superseded: "·",
};

/** An attempt's outcome as a badge (symbol and words, never colour alone). */
export function attemptBadge(status: AttemptStory["status"]): Html {
  return html`<span class="badge ${TONE_OF_ATTEMPT[status]}">${symbol(SYMBOL_OF_ATTEMPT[status])} ${status}</span>`;
}

/** Attempts, newest first, each with its id linked. */
export function attemptsTable(attempts: readonly AttemptStory[], now: Date): Html {
  if (attempts.length === 0) return html`<p class="soft">None.</p>`;
  return html`<table><thead><tr><th>attempt</th><th>instance</th><th>generation</th><th>outcome</th><th>why</th><th>created</th><th>finished</th></tr></thead><tbody>${attempts.map(
    (a) => html`<tr>
<td class="mono">${link(["attempts", a.id])}</td>
<td>${link(["instances", a.instance])}</td>
<td>${a.generation}</td>
<td>${attemptBadge(a.status)}${a.failureClass ? html` <span class="soft small">${a.failureClass}</span>` : ""}</td>
<td class="msg">${[a.reason, a.message].filter(Boolean).join(": ")}${errorLine(a.errorLine)}</td>
<td>${when(a.createdAt, now)}</td>
<td>${a.finishedAt ? when(a.finishedAt, now) : ""}</td>
</tr>`,
  )}</tbody></table>`;
}

/** One failed resource of an attempt, as the agent sent it. */
interface ResourceEvidence {
  name?: string;
  kind?: string;
  action?: string;
  failureClass?: string;
  reason?: string;
  message?: string;
  blockedBy?: string;
  evidence?: string;
}

function resourceEvidence(list: unknown): ResourceEvidence[] {
  return Array.isArray(list)
    ? list.filter((e): e is ResourceEvidence => typeof e === "object" && e !== null)
    : [];
}

/** `/attempts/:id`. */
export function attemptPage(
  story: AttemptStoryOf,
  render: () => Promise<AttemptStoryOf | undefined>,
  ctx: PageContext,
): Page {
  const body = (s: AttemptStoryOf) => {
    const a = s.attempt;
    const resources = resourceEvidence(a.evidence);
    return html`<h1><span class="kind">attempt</span><span class="mono">${a.id}</span> ${attemptBadge(a.status)}</h1>
<p class="sub">of ${link(["instances", a.instance])} at generation ${a.generation}</p>
<section class="panel">${facts([
      ["failure class", a.failureClass],
      ["reason", a.reason],
      ["message", a.message ? html`<span class="msg">${a.message}</span>` : undefined],
      ["created", when(a.createdAt, ctx.now)],
      ["dispatched", a.dispatchedAt ? when(a.dispatchedAt, ctx.now) : undefined],
      ["finished", a.finishedAt ? when(a.finishedAt, ctx.now) : undefined],
      ["settled by", a.settledBy],
    ])}${errorLine(a.errorLine)}</section>
${
  resources.length > 0
    ? html`<section class="panel"><h2>Failed resources</h2>${resources.map(
        (
          r,
          i,
        ) => html`<div><b>${r.kind} ${r.name}</b> <span class="soft">${r.action}${r.failureClass ? ` · ${r.failureClass}` : ""}</span>
<div class="msg">${r.blockedBy ? `blocked by ${r.blockedBy}` : [r.reason, r.message].filter(Boolean).join(": ")}</div>
${evidence(r.evidence, { id: `attempt-evidence-${i}`, open: true })}</div>`,
      )}</section>`
    : ""
}
${
  s.intent
    ? html`<section class="panel"><h2>Intent at generation ${s.intent.generation}</h2>${facts([
        ["state", stateBadge(s.intent.state)],
        ["status", s.intent.status],
        ["outcome", s.intent.outcome],
        ["failures", s.intent.failures],
        ["message", s.intent.message ? html`<span class="msg">${s.intent.message}</span>` : undefined],
      ])}</section>`
    : ""
}
<section class="panel"><h2>Conditions citing it <span class="count">${s.conditions.length}</span></h2>${
      s.conditions.length === 0
        ? html`<p class="soft">None.</p>`
        : html`<ul>${s.conditions.map((c) => html`<li>${link(["conditions", c.id], c.type)} (${c.status}): <span class="msg">${c.message}</span></li>`)}</ul>`
    }</section>`;
  };
  return storyPage({
    title: `attempt ${story.attempt.id}`,
    section: "other",
    read: render,
    body,
    gone: "This attempt is gone.",
    refresh: ["instance", "condition", "resync"],
    events: new URLSearchParams({ scope: "instance", id: story.attempt.instance }),
  });
}
