/**
 * `steward status [--json]`: the open conditions — what is not right, since when, why, what was
 * tried and who can resolve it. Exits 0 only when there are none: the fleet is right, not just up.
 */
import { Command } from "commander";
import type { ConditionRecord, RevisionRecord } from "../hub/records.js";
import { UsageError } from "../model/errors.js";
import type { StatusRecord } from "../status/records.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
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
  const rows = conditions.map((c) => [
    c.type,
    `${c.subjectKind} ${c.subject}`,
    ago(c.since, now),
    c.reason,
    c.attemptId ?? "",
    c.message.length > 100 ? `${c.message.slice(0, 99)}…` : c.message,
  ]);
  return `${conditions.length} open condition${conditions.length === 1 ? "" : "s"} (${summary})\n${renderTable(
    ["TYPE", "SUBJECT", "SINCE", "REASON", "ATTEMPT", "MESSAGE"],
    rows,
  )}`;
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

export function statusCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  return new Command("status")
    .description(
      "list open conditions (exit 0 only when there are none), or with --revision what a commit's statuses say",
    )
    .option("--json", "machine-readable output")
    .option("--revision <sha>", "show the commit statuses of this revision (a full or abbreviated sha)")
    .action(async (options: { json?: boolean; revision?: string }) => {
      const { statePaths, openHubStore } = await import("./hub-state.js");
      const store = await openHubStore(statePaths(io, globals()));
      const json = options.json || globals().json;
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
