/**
 * `/revisions/:sha` for a browser — what a commit status links to: the commit (sha, message,
 * author), and per assignment it changed the rollout's progress as its commit status words it
 * ("3/10 nodes at generation 7", progress.ts), a bar of its instances' states, the policy it rolls
 * out by, what holds the rest, and the failing instances with their condition, node and attempt.
 * The model is `steward describe revision`'s (story.ts); a large rollout is summarised by state,
 * with the instances that need attention listed one by one.
 */
import type { Rollout } from "../../../model/generated.js";
import type { AssignmentProgress } from "../../progress.js";
import type { ConditionRecord } from "../../records.js";
import { DISPLAY_STATES, type DisplayState } from "../../states.js";
import type { StoreReads } from "../../store/store.js";
import type { RevisionStory } from "../../story.js";
import { type Html, html, path } from "../html.js";
import {
  count,
  facts,
  link,
  type Page,
  type PageContext,
  plural,
  revisionLink,
  STATE_ORDER,
  stateBadge,
  stateBar,
  stateCell,
  stateChip,
  storyPage,
  symbol as sym,
  when,
} from "../layout.js";
import type { RolloutControl } from "../rollout.js";
import { conditionsSection } from "./conditions.js";

/** Rollouts of at most this many instances list every one; larger ones list what needs attention. */
const LIST_ALL = 50;
/** At most this many instances that need attention are listed per assignment. */
const LIST_ATTENTION = 100;

const PROGRESS_WORDS: Readonly<Record<AssignmentProgress["state"], [string, string, string]>> = {
  pending: ["t-progress", "…", "pending"],
  success: ["t-ok", "✓", "success"],
  failure: ["t-failure", "✗", "failure"],
  error: ["t-failure", "✗", "error"],
  superseded: ["t-muted", "·", "superseded"],
};

function progressBadge(state: AssignmentProgress["state"]): Html {
  const [tone, symbol, words] = PROGRESS_WORDS[state];
  return html`<span class="badge ${tone}">${sym(symbol)} ${words}</span>`;
}

/** The rollout policy in words. */
function policyWords(policy: Rollout | undefined): string {
  if (!policy) return "";
  const parts: string[] = [];
  if (policy.stage === "observe") parts.push("observe only: compared, nothing dispatched");
  if (policy.canary) {
    const who = policy.canary.nodes?.length
      ? policy.canary.nodes.join(", ")
      : plural(policy.canary.count ?? 1, "node");
    parts.push(`canary ${who} first${policy.canary.soak ? `, soaking ${policy.canary.soak}` : ""}`);
  }
  parts.push(policy.maxInFlight !== undefined ? `at most ${policy.maxInFlight} in flight` : "all at once");
  parts.push(`pauses after more than ${policy.maxFailures ?? 0} failed`);
  return parts.join("; ");
}

type Row = RevisionStory["instances"][number];

/** The attention a state asks for, for the order of a list: failures first. */
function attention(state: DisplayState): number {
  return ["failure", "attention", "progress", "muted", "ok"].indexOf(DISPLAY_STATES[state].tone);
}

async function assignmentSection(
  store: StoreReads,
  story: RevisionStory,
  progress: AssignmentProgress,
  rows: readonly Row[],
  ctx: PageContext,
  rollout: RolloutControl | undefined,
): Promise<Html> {
  const states: Partial<Record<DisplayState, number>> = {};
  for (const row of rows) states[row.state] = (states[row.state] ?? 0) + 1;
  const first = rows[0] ? await store.desired.instance(rows[0].instance) : undefined;
  const byInstance = new Map(progress.instances.map((i) => [i.instance, i]));
  // What holds the held ones, in the hub's words (the same for most of them: the canary, a batch).
  const holds = new Map<string, number>();
  for (const row of rows)
    if (row.state === "held" || row.state === "waiting") {
      const message = (await store.intents.get(row.instance, row.generation))?.message ?? row.status;
      holds.set(message, (holds.get(message) ?? 0) + 1);
    }
  const listed =
    rows.length <= LIST_ALL
      ? [...rows]
      : rows
          .filter(
            (r) => DISPLAY_STATES[r.state].tone === "failure" || DISPLAY_STATES[r.state].tone === "attention",
          )
          .sort((a, b) => attention(a.state) - attention(b.state))
          .slice(0, LIST_ATTENTION);
  // What stops each listed one at this generation, as its commit status names it.
  const stopping = new Map<string, ConditionRecord[]>();
  for (const row of listed)
    stopping.set(
      row.instance,
      (await store.conditions.openOf("instance", row.instance)).filter(
        (c) => c.generation === undefined || c.generation === row.generation,
      ),
    );
  const actions = await rolloutActions(story.sha, progress, ctx, rollout);
  const filterLink = (state: DisplayState) =>
    path(
      [],
      new URLSearchParams([
        ["assignment", progress.assignment],
        ["state", state],
      ]),
    );
  return html`<section class="panel" id="assignment-${progress.assignment}">
<h2>${progress.assignment} ${progressBadge(progress.state)} <span class="count">${progress.description}</span></h2>
${stateBar(states, rows.length)}
<ul class="chips" aria-label="instances by state">${STATE_ORDER.filter((s) => states[s]).map((s) =>
    stateChip(s, states[s]!, filterLink(s)),
  )}</ul>
${facts([
  ["rollout", policyWords(first?.rollout)],
  [
    "failed",
    progress.failure
      ? html`<b>${progress.failure.condition}</b>${progress.failure.node ? html` on ${link(["nodes", progress.failure.node])}` : ""}${progress.failure.attemptId ? html` (attempt ${link(["attempts", progress.failure.attemptId])})` : ""}: <span class="msg">${progress.failure.message}</span>`
      : undefined,
  ],
  [
    "held",
    holds.size > 0
      ? html`${[...holds].map(([message, n]) => html`<div>${count(n)}: <span class="msg">${message}</span></div>`)}`
      : undefined,
  ],
  ["superseded by", progress.supersededBy ? revisionLink(progress.supersededBy) : undefined],
  [
    "not reachable",
    progress.unreachable > 0
      ? `${plural(progress.unreachable, "instance")} on nodes whose transport this hub does not run`
      : undefined,
  ],
])}
${actions}
${
  listed.length === 0
    ? ""
    : html`${rows.length > LIST_ALL ? html`<h2>Needing attention <span class="count">${count(listed.length)} of ${count(rows.length)}; the others are counted by state above</span></h2>` : ""}
<table><thead><tr><th>node</th><th>state</th><th>status</th><th>condition</th><th>attempt</th><th>superseded by</th></tr></thead><tbody>${listed.map(
        (row) => {
          const entry = byInstance.get(row.instance);
          return html`<tr><td>${link(["nodes", entry?.node ?? row.instance.slice(row.instance.lastIndexOf("@") + 1)])}</td><td>${stateCell(row, { pinned: true })} ${stateBadge(row.state, entry?.holdReason ? `(${entry.holdReason})` : undefined)}</td><td>${row.status}</td><td>${(stopping.get(row.instance) ?? []).map((c, i) => html`${i > 0 ? ", " : ""}${link(["conditions", c.id], c.type)}`)}</td><td>${row.attemptId ? link(["attempts", row.attemptId]) : ""}</td><td>${entry?.supersededBy ? html`generation ${entry.supersededBy.generation} of ${revisionLink(entry.supersededBy.revision)}` : ""}</td></tr>`;
        },
      )}</tbody></table>`
}
</section>`;
}

/**
 * Pause or resume, for a signed-in operator, a rollout still under way: `steward rollout
 * pause|resume` in the web view (nothing without a RolloutControl, rollout.ts).
 */
async function rolloutActions(
  sha: string,
  progress: AssignmentProgress,
  ctx: PageContext,
  rollout: RolloutControl | undefined,
): Promise<Html> {
  if (!rollout || progress.state === "superseded" || progress.state === "success") return html``;
  if (!ctx.session) return html``;
  const paused = await rollout.paused(sha, progress.assignment);
  const action = path(["revisions", sha, "rollout", progress.assignment, paused ? "resume" : "pause"]);
  return html`<div class="actions"><form method="post" action="${action}"><input type="hidden" name="csrf" value="${ctx.session.csrf}"><label for="why-${progress.assignment}">why<input id="why-${progress.assignment}" name="reason" required></label><button type="submit">${paused ? "Resume rollout" : "Pause rollout"}</button></form></div>`;
}

/** The revision page; `read` reads the story again for each live refresh. */
export function revisionPage(
  store: StoreReads,
  story: RevisionStory,
  read: () => Promise<RevisionStory | undefined>,
  ctx: PageContext,
  rollout?: RolloutControl,
): Page {
  const body = async (s: RevisionStory) => {
    const rows = new Map<string, Row[]>();
    for (const row of s.instances) {
      const assignment = row.instance.slice(0, row.instance.lastIndexOf("@"));
      rows.set(assignment, [...(rows.get(assignment) ?? []), row]);
    }
    const rest = s.message.slice(s.subject.length).trim();
    const outcome =
      s.progress?.state ??
      (s.outcome === "invalid" ? "error" : s.outcome === "superseded" ? "superseded" : "pending");
    return html`<h1><span class="kind">revision</span><span class="msg">${s.subject}</span></h1>
<p class="sub"><span class="sha">${s.sha}</span> · ${s.author} · committed ${when(s.committedAt, ctx.now)} · synced ${when(s.syncedAt, ctx.now)} on ${s.branch}</p>
<section class="panel">${facts([
      ["progress", html`${progressBadge(outcome)} ${s.progress?.description ?? ""}`],
      ["message", rest ? html`<pre>${rest}</pre>` : undefined],
      [
        "changed",
        s.changedAssignments.length > 0
          ? s.changedAssignments.map((a, i) => html`${i > 0 ? ", " : ""}<a href="#assignment-${a}">${a}</a>`)
          : "no assignment",
      ],
      ["superseded by", s.supersededBy ? revisionLink(s.supersededBy) : undefined],
      [
        "problems",
        s.progress?.errors?.length
          ? html`<ul>${s.progress.errors.map((e) => html`<li class="mono">${e}</li>`)}</ul>`
          : undefined,
      ],
    ])}</section>
<div class="cards">${await Promise.all((s.progress?.assignments ?? []).map((a) => assignmentSection(store, s, a, rows.get(a.assignment) ?? [], ctx, rollout)))}</div>
${conditionsSection(s.conditions, ctx.now)}`;
  };
  return storyPage({
    title: `${story.sha.slice(0, 12)} ${story.subject}`,
    section: "other",
    read,
    body,
    gone: "This revision is gone.",
    refresh: ["instance", "condition", "revision", "resync"],
    delayMs: 1500,
    events: new URLSearchParams({ scope: "revision", id: story.sha }),
  });
}
