/**
 * `steward status [--json]`: the open conditions — what is not right, since when, why, what was
 * tried and who can resolve it. Exits 0 only when there are none: the fleet is right, not just up.
 */
import { Command } from "commander";
import type { ConditionRecord } from "../hub/records.js";
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

export function statusCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  return new Command("status")
    .description("list open conditions; exit 0 only when there are none")
    .option("--json", "machine-readable output")
    .action(async (options: { json?: boolean }) => {
      const { statePaths, openHubStore } = await import("./hub-state.js");
      const store = await openHubStore(statePaths(io, globals()));
      try {
        const conditions = store.conditions({ status: "open" });
        const counts = store.intentCountsByStatus();
        if (options.json || globals().json)
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
