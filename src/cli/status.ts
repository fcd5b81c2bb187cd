/**
 * `steward status [-o json|yaml|wide]`: the fleet's answer (src/hub/answer.ts) — right (exit 0),
 * converging (exit 3: work in flight, failures within budget, each with its retries and next retry)
 * or not right (exit 1: the open conditions, since when, why, what was tried and who can resolve
 * them). It is never right while an instance it counts is unconverged. `--watch` keeps printing each change (status-watch.ts); `--nats URL` reads the conditions the hub
 * mirrors to the bus instead of the local database; `--revision SHA` shows a commit's statuses.
 */
import { Command } from "commander";
import type { FleetAnswer, FleetStatus } from "../hub/answer.js";
import type { ConditionRecord, RevisionRecord } from "../hub/records.js";
import { DISPLAY_STATES } from "../hub/states.js";
import type { StatusRecord } from "../hub/store/store.js";
import type { InstanceView } from "../hub/views.js";
import { UsageError } from "../model/errors.js";
import { NATS_VIEWER_FLAGS, type NatsHubFlags, natsConnectionFromFlags } from "../transport/nats/flags.js";
import type { Palette } from "./colour.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, clip, type OutputOptions, outputFormat, printResult } from "./output.js";
import type { ConditionChangeSeen, ConditionSource } from "./status-watch.js";
import { ago, renderTable, until } from "./table.js";

const ANSWER_WORDS: Record<FleetAnswer, string> = {
  right: "right",
  converging: "converging",
  "not-right": "not right",
};

/** How `steward status` (and `steward up`) words an answer and prints what it rests on. */
export interface StatusRendering {
  now: Date;
  /** Never truncate. */
  wide?: boolean;
  colours?: Palette;
  /** Said after the answer, in parentheses (`steward up`: how long it took, or that it timed out). */
  context?: string;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/** The first line of an answer: `converging: no open conditions; 0/2 instances converged`. */
export function answerLine(status: FleetStatus, colours?: Palette, context?: string): string {
  const word = ANSWER_WORDS[status.answer];
  const conditions =
    status.conditions.length === 0
      ? "no open conditions"
      : plural(status.conditions.length, "open condition");
  const notCounted = [
    status.observeOnly.length > 0 ? `${status.states["observe-only"]} observe-only` : "",
    status.drained.length > 0 ? `${status.drained.length} drained` : "",
    status.skipped.length > 0 ? `${status.skipped.length} skipped` : "",
  ].filter(Boolean);
  return `${colours ? colours.answer(status.answer, word) : word}: ${conditions}; ${status.converged}/${status.counted} instances converged${notCounted.length > 0 ? ` (not counted: ${notCounted.join(", ")})` : ""}${context ? ` (${context})` : ""}`;
}

/**
 * One instance in a list of `steward status` and `steward up`: name, state, and why — for a failed
 * attempt the line of its evidence that names the error, and within budget the retries out of the
 * budget and when the next one is.
 */
export function instanceLine(instance: InstanceView, rendering: StatusRendering): string {
  const colours = rendering.colours;
  const state = colours ? colours.state(instance.state) : DISPLAY_STATES[instance.state].label;
  const parts: string[] = [];
  if (instance.state === "failing")
    parts.push(
      `retry ${instance.failures}/${instance.budget.attempts}, next ${instance.nextAttemptAt ? `at ${instance.nextAttemptAt} (${until(instance.nextAttemptAt, rendering.now)})` : "not scheduled"}`,
    );
  const failed = DISPLAY_STATES[instance.state].weight === "not-right" || instance.state === "failing";
  if (failed) {
    const why = [instance.reason, instance.message].filter(Boolean).join(": ");
    if (why) parts.push(why);
    if (instance.errorLine && !instance.message?.includes(instance.errorLine)) parts.push(instance.errorLine);
  } else if (instance.message) parts.push(instance.message);
  if (instance.lastAttemptId && instance.state !== "converged")
    parts.push(`attempt ${instance.lastAttemptId}`);
  return `  ${instance.instance}  ${state}${parts.length > 0 ? `  ${parts.join("; ")}` : ""}`;
}

/**
 * The text of `steward status`: the answer, the open conditions, then what is in progress, what is
 * failing within budget (reason, retries out of the budget, when the next one is), and what is not
 * counted (observe-only differences, drained and skipped nodes).
 */
export function renderFleetStatus(status: FleetStatus, rendering: StatusRendering): string {
  let text = `${answerLine(status, rendering.colours, rendering.context)}\n`;
  if (status.conditions.length > 0)
    text += renderConditions(status.conditions, rendering.now, rendering.wide);
  const section = (title: string, instances: readonly InstanceView[]) => {
    if (instances.length === 0) return;
    text += `${title}:\n${instances.map((i) => instanceLine(i, rendering)).join("\n")}\n`;
  };
  section("failed", status.failed);
  section("failing within budget", status.failing);
  section("in progress", status.inProgress);
  section(
    "observe-only (compared, not delivered)",
    status.observeOnly.filter((i) => !i.converged),
  );
  section("drained (not counted)", status.drained);
  section("skipped (not counted)", status.skipped);
  return text;
}

/** What `steward status -o json` prints: the answer, what it rests on, and the intents by status. */
export function statusDocument(status: FleetStatus, intents: Record<string, number>) {
  const { answer, ...rest } = status;
  return { answer, ok: answer === "right", ...rest, intents };
}

/** The exit code of an answer: 0 right, 3 converging, 1 not right. */
export function answerExit(answer: FleetAnswer): number {
  return answer === "right" ? EXIT.ok : answer === "converging" ? EXIT.converging : EXIT.problems;
}

/**
 * The table of conditions: type, subject, since, reason, attempt and message (`wide`: not cut);
 * `columns` adds the id (for `steward describe condition ID`) and the status (open or resolved).
 */
export function renderConditions(
  conditions: readonly ConditionRecord[],
  now: Date,
  wide = false,
  columns: { id?: boolean; status?: boolean } = {},
): string {
  return renderTable(
    [
      ...(columns.id ? ["ID"] : []),
      "TYPE",
      ...(columns.status ? ["STATUS"] : []),
      "SUBJECT",
      "SINCE",
      "REASON",
      "ATTEMPT",
      "MESSAGE",
    ],
    conditions.map((c) => [
      ...(columns.id ? [c.id] : []),
      c.type,
      ...(columns.status ? [c.status] : []),
      `${c.subjectKind} ${c.subject}`,
      ago(c.since, now),
      c.reason,
      c.attemptId ?? "",
      clip(c.message, 100, wide),
    ]),
  );
}

/** What the commit statuses of one revision say, from the hub's own records. */
export interface RevisionStatusView {
  revision: { sha: string; message: string; outcome: string; supersededBy?: string };
  /** The fleet context's state; `unknown` while no status was computed yet. */
  fleet: string;
  statuses: {
    context: string;
    state: string;
    description: string;
    targetUrl?: string;
    provider: string;
    /** `posted`, `not posted yet`, or the last error writing it. */
    delivery: string;
  }[];
}

/** Builds the view of `steward status --revision`: every context, per status provider. */
export function revisionStatusView(revision: RevisionRecord, records: StatusRecord[]): RevisionStatusView {
  const statuses = records.map((record) => {
    const posted = record.posted;
    const same =
      posted !== undefined &&
      posted.state === record.desired.state &&
      posted.description === record.desired.description;
    const delivery = same
      ? `posted ${record.postedAt ?? ""}`.trim()
      : record.lastError
        ? `not posted (${record.failures} failed: ${record.lastError})`
        : "not posted yet";
    return {
      context: record.desired.context,
      state: record.desired.state,
      description: record.desired.description,
      ...(record.desired.targetUrl ? { targetUrl: record.desired.targetUrl } : {}),
      provider: record.provider,
      delivery,
    };
  });
  const fleet = statuses.find((s) => s.context === "steward/fleet")?.state ?? "unknown";
  return {
    revision: {
      sha: revision.sha,
      message: revision.message.split("\n")[0] ?? "",
      outcome: revision.outcome,
      ...(revision.supersededBy ? { supersededBy: revision.supersededBy } : {}),
    },
    fleet,
    statuses,
  };
}

export function renderRevisionStatus(view: RevisionStatusView): string {
  const head = `revision ${view.revision.sha.slice(0, 12)} "${view.revision.message}": ${view.revision.outcome}${
    view.revision.supersededBy ? ` (superseded by ${view.revision.supersededBy.slice(0, 12)})` : ""
  }; steward/fleet is ${view.fleet}\n`;
  if (view.statuses.length === 0) return `${head}no commit statuses recorded for it yet\n`;
  return `${head}${renderTable(
    ["CONTEXT", "STATE", "DESCRIPTION", "PROVIDER", "DELIVERY"],
    view.statuses.map((s) => [s.context, s.state, s.description, s.provider, s.delivery]),
  )}`;
}

interface StatusOptions extends NatsHubFlags, OutputOptions {
  revision?: string;
  watch?: boolean;
}

/** The exit code of `steward status --revision`: 0 success, 1 failure or error, 3 pending. */
export function revisionExit(fleet: string): number {
  if (fleet === "success") return EXIT.ok;
  if (fleet === "failure" || fleet === "error") return EXIT.problems;
  return EXIT.converging;
}

export function statusCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const command = new Command("status")
    .description(
      "is the fleet right? exit 0 right, 3 converging, 1 not right (open conditions); with --revision what a commit's statuses say (0 success, 1 failure or error, 3 pending)",
    )
    .option("--revision <sha>", "show the commit statuses of this revision (a full or abbreviated sha)")
    .option(
      "--watch",
      "print the open conditions, then each change as it happens until Ctrl-C (exit 0 if none is open then); " +
        "with --nats the server pushes changes, without it the local hub's database is read every second",
    );
  addOutputOptions(command);
  for (const [flag, help] of NATS_VIEWER_FLAGS) command.option(flag, help);
  return command.action(async (options: StatusOptions) => {
    const format = outputFormat(options, globals());
    const json = format === "json" || format === "yaml";
    if (options.revision !== undefined && (options.watch || options.nats))
      throw new UsageError("--revision shows one commit's statuses: leave out --watch and --nats");
    const connection = natsConnectionFromFlags(options, io.cwd);
    if (options.watch || connection) {
      exit(await watchStatus(io, globals(), connection, Boolean(options.watch), Boolean(json)));
      return;
    }
    const { statePaths, openHubStore } = await import("./hub-state.js");
    const store = await openHubStore(statePaths(io, globals()));
    try {
      if (options.revision !== undefined) {
        const revision = await store.desired.revisionByPrefix(options.revision);
        if (!revision)
          throw new UsageError(
            `--revision ${options.revision}: no single revision of the tracked branch starts with it — give more of the sha (see \`steward history\`)`,
          );
        const view = revisionStatusView(revision, await store.statuses.forRevision(revision.sha));
        await printResult(io, format, view, () => renderRevisionStatus(view));
        exit(revisionExit(view.fleet));
        return;
      }
      const { fleetStatus } = await import("../hub/answer.js");
      const { instanceViews } = await import("../hub/views.js");
      const { palette } = await import("./colour.js");
      const status = fleetStatus(await instanceViews(store), await store.conditions.list({ status: "open" }));
      await printResult(io, format, statusDocument(status, await store.intents.countsByStatus()), (wide) =>
        renderFleetStatus(status, { now: new Date(), wide, colours: palette(io) }),
      );
      exit(answerExit(status.answer));
    } finally {
      await store.close();
    }
  });
}

/**
 * The open conditions from the bus (--nats) or the local hub; with --watch, then every change until
 * SIGINT or SIGTERM. Returns the exit code: 0 when nothing is open at the end.
 */
async function watchStatus(
  io: CliIo,
  globals: GlobalOptions,
  connection: ReturnType<typeof natsConnectionFromFlags>,
  watch: boolean,
  json: boolean,
): Promise<number> {
  const { OpenConditions, renderChange, renderOpen, watchBus, watchDatabase } = await import(
    "./status-watch.js"
  );
  const view = new OpenConditions();
  // Changes that arrive before the first screen is printed wait for it.
  let pending: ConditionChangeSeen[] | undefined = [];
  const print = (changes: ConditionChangeSeen[]) => {
    if (pending) {
      pending.push(...changes);
      return;
    }
    for (const change of changes)
      io.stdout(
        json
          ? `${JSON.stringify({ event: change.kind, at: new Date().toISOString(), open: change.open, condition: change.condition })}\n`
          : renderChange(change, new Date()),
      );
  };
  const closers: (() => Promise<void> | void)[] = [];
  try {
    let source: ConditionSource;
    let where: string;
    if (connection) {
      const { connectNats } = await import("../transport/nats/connect.js");
      const { identities } = await import("../transport/nats/subjects.js");
      const nc = await connectNats({ ...connection, identity: identities.viewer });
      closers.push(() => nc.close());
      source = await watchBus(nc, view, print);
      where = `KV steward-conditions on ${connection.servers}`;
    } else {
      const { statePaths, openHubStore } = await import("./hub-state.js");
      const paths = statePaths(io, globals);
      const store = await openHubStore(paths);
      closers.push(() => store.close());
      source = watchDatabase(store, view, print);
      where = `the hub database in ${paths.dir} (read every second)`;
    }
    closers.unshift(() => source.stop());
    await source.initialized;
    const open = view.list();
    io.stdout(
      json
        ? `${JSON.stringify({ event: "open", ok: open.length === 0, open: open.length, conditions: open })}\n`
        : renderOpen(open, new Date()),
    );
    const waiting = pending;
    pending = undefined;
    print(waiting);
    if (watch) {
      io.stderr(`watching ${where}; Ctrl-C to stop\n`);
      const { untilSignal } = await import("./hub.js");
      await untilSignal();
    }
    return view.size === 0 ? EXIT.ok : EXIT.problems;
  } finally {
    for (const close of closers) await close();
  }
}
