/**
 * `steward status [--json]`: the open conditions — what is not right, since when, why, what was
 * tried and who can resolve it. Exits 0 only when there are none: the fleet is right, not just up.
 * `--watch` keeps printing each change (status-watch.ts); `--nats URL` reads the conditions the hub
 * mirrors to the bus instead of the local database; `--revision SHA` shows a commit's statuses.
 */
import { Command } from "commander";
import type { ConditionRecord, RevisionRecord } from "../hub/records.js";
import { UsageError } from "../model/errors.js";
import type { StatusRecord } from "../status/records.js";
import { NATS_VIEWER_FLAGS, type NatsHubFlags, natsConnectionFromFlags } from "../transport/nats/flags.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import type { ConditionChangeSeen, ConditionSource } from "./status-watch.js";
import { ago, renderTable } from "./table.js";

/** The text `steward status` prints for these conditions. */
export function renderStatus(
  conditions: ConditionRecord[],
  counts: Record<string, number>,
  now: Date,
): string {
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const converged = counts.converged ?? 0;
  const summary = `${converged}/${total - (counts.superseded ?? 0) - (counts.retired ?? 0)} intents converged`;
  if (conditions.length === 0) return `no open conditions: the fleet is right (${summary})\n`;
  return `${conditions.length} open condition${conditions.length === 1 ? "" : "s"} (${summary})\n${renderConditions(conditions, now)}`;
}

/** The table of conditions: type, subject, since, reason, attempt and message. */
export function renderConditions(conditions: readonly ConditionRecord[], now: Date): string {
  return renderTable(
    ["TYPE", "SUBJECT", "SINCE", "REASON", "ATTEMPT", "MESSAGE"],
    conditions.map((c) => [
      c.type,
      `${c.subjectKind} ${c.subject}`,
      ago(c.since, now),
      c.reason,
      c.attemptId ?? "",
      c.message.length > 100 ? `${c.message.slice(0, 99)}…` : c.message,
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

interface StatusOptions extends NatsHubFlags {
  json?: boolean;
  revision?: string;
  watch?: boolean;
}

export function statusCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const command = new Command("status")
    .description(
      "list open conditions (exit 0 only when there are none), or with --revision what a commit's statuses say",
    )
    .option("--json", "machine-readable output")
    .option("--revision <sha>", "show the commit statuses of this revision (a full or abbreviated sha)")
    .option(
      "--watch",
      "print the open conditions, then each change as it happens until Ctrl-C (exit 0 if none is open then); " +
        "with --nats the server pushes changes, without it the local hub's database is read every second",
    );
  for (const [flag, help] of NATS_VIEWER_FLAGS) command.option(flag, help);
  return command.action(async (options: StatusOptions) => {
    const json = options.json || globals().json;
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
        const revision = store.revisionByPrefix(options.revision);
        if (!revision)
          throw new UsageError(
            `--revision ${options.revision}: no single revision of the tracked branch starts with it — give more of the sha (see \`steward history\`)`,
          );
        const { StatusRecords } = await import("../status/records.js");
        const view = revisionStatusView(revision, new StatusRecords(store.db).forRevision(revision.sha));
        io.stdout(json ? `${JSON.stringify(view, null, 2)}\n` : renderRevisionStatus(view));
        exit(view.fleet === "success" ? EXIT.ok : EXIT.problems);
        return;
      }
      const conditions = store.conditions({ status: "open" });
      const counts = store.intentCountsByStatus();
      if (json)
        io.stdout(
          `${JSON.stringify({ ok: conditions.length === 0, intents: counts, conditions }, null, 2)}\n`,
        );
      else io.stdout(renderStatus(conditions, counts, new Date()));
      exit(conditions.length === 0 ? EXIT.ok : EXIT.problems);
    } finally {
      store.close();
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
