/**
 * `steward describe instance ASSIGNMENT@NODE | node NAME | revision REV | condition ID | attempt ID
 * [-o json|yaml|wide] [--watch]`: the whole story of one object, from the hub's database — the
 * model is src/hub/story.ts (the web view renders the same one); this file only renders it as text.
 * A revision is anything the hub's copy of the fleet repository resolves: a sha or its prefix, a
 * branch, a tag, `HEAD`, `~N`, `^N`.
 */
import { Command } from "commander";
import { stringify } from "yaml";
import type { PauseNote } from "../hub/progress.js";
import { DISPLAY_STATES, skipWords } from "../hub/states.js";
import type { StoreReads } from "../hub/store/store.js";
import type {
  AttemptStory,
  ConditionStory,
  InstanceStory,
  IntentStory,
  NodeStory,
  ObservedStory,
  RevisionStory,
  Story,
} from "../hub/story.js";
import { NotFoundError, UsageError } from "../model/errors.js";
import type { Palette } from "./colour.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";
import { ago, renderTable, until } from "./table.js";

export const DESCRIBE_KINDS = ["instance", "node", "revision", "condition", "attempt"] as const;
export type DescribeKind = (typeof DESCRIBE_KINDS)[number];

const INDENT = "    ";

function indent(text: string, by = INDENT): string {
  return text
    .replace(/\s+$/, "")
    .split("\n")
    .map((line) => (line || by.trim() ? `${by}${line}`.trimEnd() : line))
    .join("\n");
}

function when(iso: string | undefined, now: Date): string {
  return iso ? `${iso} (${ago(iso, now)})` : "never";
}

function field(label: string, value: string | number | undefined): string {
  return value === undefined || value === "" ? "" : `${`${label}:`.padEnd(13)}${value}\n`;
}

function stateWords(state: keyof typeof DISPLAY_STATES, colours: Palette): string {
  const info = DISPLAY_STATES[state];
  return colours.state(state, `${info.symbol} ${info.label}`);
}

function renderObserved(observed: ObservedStory | undefined, now: Date): string {
  if (!observed) return "Observed:    no report yet\n";
  let text = `Observed:    report taken ${when(observed.takenAt, now)}: generation ${observed.generation} applied completely, ${observed.state}${observed.version ? `, version ${observed.version}` : ""}\n`;
  text += `${INDENT}${observed.converged ? "converged" : `not converged: ${observed.summary}`}\n`;
  for (const r of observed.resources) {
    const why = r.blockedBy ? `blocked by ${r.blockedBy}` : [r.reason, r.message].filter(Boolean).join(": ");
    const counters =
      r.consecutiveFailures > 0
        ? ` [${r.consecutiveFailures} failure${r.consecutiveFailures === 1 ? "" : "s"} in a row, ${r.everApplied ? "applied before" : "never applied"}]`
        : "";
    text += `${INDENT}${r.status.padEnd(8)} ${r.kind} ${r.name}${why ? `: ${why}` : ""}${counters}\n`;
    if (r.diff?.length) text += `${indent(r.diff.join("\n"), `${INDENT}${INDENT}  `)}\n`;
    if (r.errorLine) text += `${INDENT}${INDENT}  error: ${r.errorLine}\n`;
    if (r.evidence) text += `${indent(r.evidence, `${INDENT}${INDENT}  | `)}\n`;
  }
  for (const p of observed.probes)
    text += `${INDENT}probe ${p.ok ? "ok    " : "fails "} ${p.name} (${p.kind})${p.message ? `: ${p.message}` : ""} at ${p.at}\n`;
  return text;
}

function renderAttempts(attempts: readonly AttemptStory[], now: Date): string {
  if (attempts.length === 0) return "Attempts:    none\n";
  let text = "Attempts (newest first):\n";
  for (const a of attempts) {
    const klass = [a.failureClass, a.reason].filter(Boolean).join(", ");
    text += `${INDENT}${a.id}  ${a.instance} generation ${a.generation}  ${a.status}${klass ? ` (${klass})` : ""}  created ${ago(a.createdAt, now)}${a.finishedAt ? `, finished ${ago(a.finishedAt, now)}` : ""}\n`;
    if (a.message) text += `${INDENT}${INDENT}${a.message}\n`;
    if (a.errorLine) text += `${INDENT}${INDENT}error: ${a.errorLine}\n`;
  }
  return text;
}

function renderCondition(c: ConditionStory, now: Date): string {
  let text = `${INDENT}${c.type} (${c.status}) ${c.id} on ${c.subjectKind} ${c.subject}\n`;
  const row = (label: string, value: string | undefined) =>
    value ? `${INDENT}${INDENT}${`${label}:`.padEnd(11)}${value}\n` : "";
  text += row("since", when(c.since, now));
  text += row("observed", when(c.lastObserved, now));
  text += row("reason", c.reason);
  text += row("message", c.message);
  text += row("attempt", c.attemptId);
  text += row("tried", c.tried.join(", "));
  text += row("resolver", c.resolver);
  text += row("procedure", c.procedure);
  if (c.resolvedAt)
    text += row("resolved", `${when(c.resolvedAt, now)}${c.resolution ? `: ${c.resolution}` : ""}`);
  if (c.task)
    text += row(
      "task",
      `${c.task.id} ${c.task.status}${c.task.claimedBy ? `, claimed by ${c.task.claimedBy}` : ""}${c.task.resolvedBy ? `, resolved by ${c.task.resolvedBy}: ${c.task.action ?? ""}` : ""}`,
    );
  if (Object.keys(c.evidence).length > 0)
    text += `${INDENT}${INDENT}evidence:\n${indent(stringify(c.evidence, { lineWidth: 0 }), `${INDENT}${INDENT}  `)}\n`;
  if (c.history.length > 0) {
    text += `${INDENT}${INDENT}history:\n`;
    for (const e of c.history)
      text += `${INDENT}${INDENT}  ${e.at} ${e.event} ${e.reason}${e.attemptId ? ` (attempt ${e.attemptId})` : ""}: ${e.message}\n`;
  }
  return text;
}

function renderConditionsOf(
  conditions: { open: ConditionStory[]; recent: ConditionStory[] },
  now: Date,
): string {
  let text =
    conditions.open.length === 0
      ? "Conditions:  none open\n"
      : `Conditions (open):\n${conditions.open.map((c) => renderCondition(c, now)).join("")}`;
  if (conditions.recent.length > 0)
    text += `Conditions (recently resolved):\n${conditions.recent.map((c) => renderCondition(c, now)).join("")}`;
  return text;
}

function renderHistory(history: readonly IntentStory[], now: Date, colours: Palette): string {
  if (history.length === 0) return "History:     none\n";
  return `History (newest generation first):\n${indent(
    renderTable(
      ["GEN", "STATE", "OUTCOME", "CLASS", "FAILURES", "ATTEMPT", "REVISION", "UPDATED"],
      history.map((i) => [
        i.generation,
        colours.state(i.state, DISPLAY_STATES[i.state].label),
        i.outcome ?? "-",
        i.failureClass ?? "-",
        i.failures,
        i.lastAttemptId ?? "-",
        i.revision.slice(0, 12),
        ago(i.updatedAt, now),
      ]),
    ),
  )}\n`;
}

function renderInstance(story: InstanceStory, now: Date, colours: Palette): string {
  const v = story.now;
  const d = story.desired;
  const retry =
    v.state === "failing"
      ? ` — retry ${v.failures}/${v.budget.attempts}, next ${v.nextAttemptAt ? `at ${v.nextAttemptAt} (${until(v.nextAttemptAt, now)})` : "not scheduled"}`
      : "";
  let text = field("Instance", story.name);
  text += field("State", `${stateWords(v.state, colours)}${retry}`);
  text += field("Why", [v.reason, v.message].filter(Boolean).join(": "));
  text += field("Error", v.errorLine);
  text += field(
    "Desired",
    `generation ${d.generation}, ${d.state}${d.version ? `, version ${d.version}` : ""} (revision ${d.revision.slice(0, 12)}${d.revisionSubject ? ` "${d.revisionSubject}"` : ""})`,
  );
  text += `${INDENT}spec hash ${d.hash}\n`;
  text += `${INDENT}resources: ${d.resources.map((r) => `${r.kind} ${r.name}`).join(", ") || "none"}\n`;
  if (d.probes.length > 0) text += `${INDENT}probes: ${d.probes.join(", ")}\n`;
  if (d.dependsOn.length > 0) text += `${INDENT}dependsOn: ${d.dependsOn.join(", ")}\n`;
  text += `${INDENT}budget: ${d.budget.attempts} attempts within ${Math.round(d.budget.withinMs / 1000)}s\n`;
  if (d.retiredAt) text += `${INDENT}retired ${when(d.retiredAt, now)}: no longer managed, nothing deleted\n`;
  text += renderObserved(story.observed, now);
  text += renderAttempts(story.attempts, now);
  text += renderConditionsOf(story.conditions, now);
  text += renderHistory(story.history, now, colours);
  return text;
}

function renderNode(story: NodeStory, now: Date, colours: Palette): string {
  let text = field("Node", `${story.name}${story.declared ? "" : " (removed from the fleet repository)"}`);
  text += field("Transport", story.transport);
  const labels = Object.entries(story.labels).map(([k, v]) => `${k}=${v}`);
  text += field("Labels", labels.join(", ") || "none");
  text += field(
    "Draining",
    story.draining
      ? `yes, since ${when(story.drainedAt, now)} by ${story.drainedBy ?? "?"}${story.drainReason ? `: ${story.drainReason}` : ""}`
      : "no",
  );
  text += field("Heartbeat", when(story.lastHeartbeatAt, now));
  text += field("Report", when(story.lastReportAt, now));
  text +=
    story.instances.length === 0
      ? "Instances:   none\n"
      : `Instances:\n${indent(
          renderTable(
            ["INSTANCE", "GEN", "OBSERVED", "STATE", "MESSAGE"],
            story.instances.map((i) => [
              i.instance,
              i.generation,
              i.observedGeneration ?? "-",
              stateWords(i.state, colours),
              [i.message, i.errorLine].filter(Boolean).join("; "),
            ]),
          ),
        )}\n`;
  text += renderAttempts(story.attempts, now);
  text += renderConditionsOf(story.conditions, now);
  return text;
}

function renderPause(pause: PauseNote): string {
  const who = pause.by ? `by ${pause.by}: ${pause.why}` : "by its failures";
  let text = `${INDENT}${INDENT}paused ${who} (since ${pause.since})\n`;
  for (const i of pause.instances)
    text += `${INDENT}${INDENT}  caused by ${i.instance}${i.status ? ` ${i.status}` : ""}${i.reason ? ` (${i.reason})` : ""}${i.attemptId ? `, attempt ${i.attemptId}` : ""}\n`;
  return text;
}

function renderRevision(story: RevisionStory, now: Date, colours: Palette): string {
  let text = field("Revision", `${story.sha} (${story.branch}, #${story.seq})`);
  text += field("Subject", story.subject);
  text += field("Author", `${story.author}, committed ${when(story.committedAt, now)}`);
  text += field("Synced", `${when(story.syncedAt, now)}: ${story.outcome}`);
  text += field("Superseded", story.supersededBy ? `by ${story.supersededBy}` : undefined);
  text += field("Changed", story.changedAssignments.join(", ") || "no assignment");
  for (const d of story.diagnostics)
    text += `${INDENT}${d.severity} ${d.file}:${d.line}:${d.column}: ${d.message} [${d.code}]\n`;
  if (story.progress) {
    text += field("Progress", `${story.progress.state}: ${story.progress.description}`);
    text += field(
      "Carried",
      story.progress.carriedForwardBy
        ? `forward by ${story.progress.carriedForwardBy} (a newer revision: statuses still pending here ended, naming it)`
        : undefined,
    );
    for (const a of story.progress.assignments) {
      text += `${INDENT}${a.assignment}: ${a.state}: ${a.description}\n`;
      if (a.pause) text += renderPause(a.pause);
      for (const m of a.skipped)
        text += `${INDENT}${INDENT}skipped ${m.instance}: ${skipWords(m.skip)} (it holds no in-flight slot and counts as no failure)\n`;
    }
  }
  text +=
    story.instances.length === 0
      ? "Instances:   none at this revision\n"
      : `Instances (at the generation this revision gave them):\n${indent(
          renderTable(
            ["INSTANCE", "GEN", "STATE", "ATTEMPT"],
            story.instances.map((i) => [
              i.instance,
              i.generation,
              stateWords(i.state, colours),
              i.attemptId ?? "-",
            ]),
          ),
        )}\n`;
  text += renderConditionsOf(story.conditions, now);
  return text;
}

/** The text of a story, as `steward describe` prints it (nothing truncated). */
export function renderStory(story: Story, now: Date, colours: Palette): string {
  switch (story.kind) {
    case "instance":
      return renderInstance(story, now, colours);
    case "node":
      return renderNode(story, now, colours);
    case "revision":
      return renderRevision(story, now, colours);
    case "condition":
      return `Condition:\n${renderCondition(story.condition, now)}${renderAttempts(story.attempts, now)}`;
    case "attempt": {
      const a = story.attempt;
      let text = field("Attempt", a.id);
      text += field("Instance", `${a.instance}, generation ${a.generation}`);
      text += field(
        "Outcome",
        `${a.status}${a.failureClass ? ` (${a.failureClass}, ${a.reason ?? "?"})` : ""}`,
      );
      text += field("Created", when(a.createdAt, now));
      text += field("Dispatched", a.dispatchedAt ? when(a.dispatchedAt, now) : undefined);
      text += field(
        "Finished",
        a.finishedAt
          ? `${when(a.finishedAt, now)}${a.settledBy ? `, settled by ${a.settledBy}` : ""}`
          : undefined,
      );
      text += field("Message", a.message);
      text += field("Error", a.errorLine);
      if (a.evidence !== undefined) text += `Evidence:\n${indent(stringify(a.evidence, { lineWidth: 0 }))}\n`;
      if (story.intent)
        text += field(
          "Intent",
          `${DISPLAY_STATES[story.intent.state].label} (${story.intent.status}), ${story.intent.failures} failures counted`,
        );
      text += renderConditionsOf(
        {
          open: story.conditions.filter((c) => c.status === "open"),
          recent: story.conditions.filter((c) => c.status !== "open"),
        },
        now,
      );
      return text;
    }
  }
}

/** Finds an id by its full value or its last characters (as `steward tasks` does), among `ids`. */
function byIdOrSuffix(id: string, ids: readonly string[]): string | undefined {
  const wanted = id.toUpperCase();
  if (ids.includes(wanted)) return wanted;
  const matches = ids.filter((candidate) => candidate.endsWith(wanted));
  return matches.length === 1 ? matches[0] : undefined;
}

/** The full sha that `revision` names in the hub's copy of the fleet repository, or by prefix among synced revisions. */
export async function resolveRevision(
  store: StoreReads,
  gitCache: string,
  cwd: string,
  revision: string,
): Promise<string> {
  const synced = await store.desired.revisionByPrefix(revision);
  if (synced && /^[0-9a-f]{4,40}$/i.test(revision)) return synced.sha;
  const branch = (await store.desired.latestRevision())?.branch ?? "main";
  const source = (await store.desired.syncState(branch))?.source;
  if (!source)
    throw new NotFoundError(
      `no revision "${revision}": the hub has synced no fleet repository yet — run \`steward sync\``,
    );
  const { FleetRepository, parseLocation } = await import("../repo/git.js");
  const { RevisionNotFoundError } = await import("../repo/errors.js");
  const repository = FleetRepository.open(parseLocation(source, cwd), { cacheDir: gitCache });
  try {
    let sha: string;
    try {
      sha = await repository.resolve(revision);
    } catch (error) {
      if (error instanceof RevisionNotFoundError) throw new NotFoundError(error.message);
      throw error;
    }
    if (!(await store.desired.revision(sha)))
      throw new NotFoundError(
        `revision "${revision}" is ${sha.slice(0, 12)} in ${source}, which this hub has not synced — run \`steward sync\``,
      );
    return sha;
  } finally {
    repository.close();
  }
}

/** The story of `kind NAME` from the store, or a NotFoundError that says how to find one. */
export async function readStory(
  store: StoreReads,
  kind: DescribeKind,
  name: string,
  where: { gitCache: string; cwd: string },
): Promise<Story> {
  const stories = await import("../hub/story.js");
  switch (kind) {
    case "instance": {
      const story = await stories.instanceStory(store, name);
      if (story) return story;
      const known = (await store.desired.instances()).map((i) => i.key);
      throw new NotFoundError(
        `no instance "${name}"${name.includes("@") ? "" : " (instances are named ASSIGNMENT@NODE)"}: \`steward get instances\` lists ${known.length} (${known.slice(0, 5).join(", ")}${known.length > 5 ? ", ..." : ""})`,
      );
    }
    case "node": {
      const story = await stories.nodeStory(store, name);
      if (story) return story;
      const known = (await store.nodes.list()).map((n) => n.name);
      throw new NotFoundError(
        `no node "${name}" (known: ${known.join(", ") || "none"}): check the name, or sync the fleet repo first`,
      );
    }
    case "revision": {
      const sha = await resolveRevision(store, where.gitCache, where.cwd, name);
      return (await stories.revisionStory(store, sha))!;
    }
    case "condition": {
      const id = byIdOrSuffix(
        name,
        (await store.conditions.list()).map((c) => c.id),
      );
      const story = id ? await stories.conditionStoryOf(store, id) : undefined;
      if (story) return story;
      throw new NotFoundError(`no condition "${name}": \`steward get conditions\` lists them with their ids`);
    }
    case "attempt": {
      const story = await stories.attemptStoryOf(store, name.toUpperCase());
      if (story) return story;
      throw new NotFoundError(`no attempt "${name}": \`steward get attempts\` lists them with their ids`);
    }
  }
}

export function describeCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const command = new Command("describe")
    .description(
      "the whole story of one object: desired, observed with evidence, attempts, conditions, history",
    )
    .argument("<kind>", DESCRIBE_KINDS.join(" | "))
    .argument(
      "<name>",
      "ASSIGNMENT@NODE, a node, a revision (sha, branch, tag, HEAD~N), or a condition or attempt id",
    )
    .option("--watch", "print it again whenever it changes, until Ctrl-C");
  addOutputOptions(command);
  return command.action(async (kind: string, name: string, options: OutputOptions & { watch?: boolean }) => {
    if (!DESCRIBE_KINDS.includes(kind as DescribeKind))
      throw new UsageError(`cannot describe "${kind}": choose one of ${DESCRIBE_KINDS.join(", ")}`);
    const format = outputFormat(options, globals());
    const { statePaths, openHubStore } = await import("./hub-state.js");
    const { palette } = await import("./colour.js");
    const paths = statePaths(io, globals());
    const store = await openHubStore(paths);
    const colours = palette(io);
    try {
      const read = () => readStory(store, kind as DescribeKind, name, { gitCache: paths.git, cwd: io.cwd });
      const render = (story: Story) => renderStory(story, new Date(), colours);
      if (options.watch) {
        const { watchRendering } = await import("./status-watch.js");
        await watchRendering(io, read, render, { format });
      } else {
        const story = await read();
        await printResult(io, format, story, () => render(story));
      }
      exit(EXIT.ok);
    } finally {
      await store.close();
    }
  });
}
