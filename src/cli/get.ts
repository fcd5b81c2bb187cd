/**
 * `steward get nodes|assignments|instances|intents [--json]`: what the hub knows, as tables (or
 * JSON). Reads the hub database directly; works while a hub runs.
 */
import { Command, Option } from "commander";
import { UsageError } from "../model/errors.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";

export const GET_KINDS = ["nodes", "assignments", "instances", "intents"] as const;
export type GetKind = (typeof GET_KINDS)[number];

export function getCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  return new Command("get")
    .description("show nodes, assignments, instances or intents as the hub knows them")
    .argument("<kind>", GET_KINDS.join(" | "))
    .option("--json", "machine-readable output")
    .addOption(new Option("--all", "intents: include superseded and retired generations"))
    .action(async (kind: string, options: { json?: boolean; all?: boolean }) => {
      const singular = kind.endsWith("s") ? kind : `${kind}s`;
      if (!GET_KINDS.includes(singular as GetKind))
        throw new UsageError(`cannot get "${kind}": choose one of ${GET_KINDS.join(", ")}`);
      const { statePaths, openHubStore } = await import("./hub-state.js");
      const views = await import("../hub/views.js");
      const { renderTable, ago } = await import("./table.js");
      const store = await openHubStore(statePaths(io, globals()));
      const json = options.json || globals().json;
      const now = new Date();
      try {
        switch (singular as GetKind) {
          case "nodes": {
            const rows = views.nodeViews(store);
            if (json) return io.stdout(`${JSON.stringify(rows, null, 2)}\n`);
            io.stdout(
              renderTable(
                ["NAME", "TRANSPORT", "CONVERGED", "DRAINING", "HEARTBEAT", "REPORT", "CONDITIONS"],
                rows.map((n) => [
                  n.declared ? n.name : `${n.name} (removed)`,
                  n.transport,
                  `${n.converged}/${n.instances}`,
                  n.draining ? `yes${n.drainReason ? ` (${n.drainReason})` : ""}` : "no",
                  ago(n.lastHeartbeatAt, now),
                  ago(n.lastReportAt, now),
                  n.openConditions.join(",") || "-",
                ]),
              ),
            );
            break;
          }
          case "assignments": {
            const rows = views.assignmentViews(store);
            if (json) return io.stdout(`${JSON.stringify(rows, null, 2)}\n`);
            io.stdout(
              renderTable(
                ["NAME", "STAGE", "CONVERGED", "FAILING", "HELD"],
                rows.map((a) => [a.name, a.stage, `${a.converged}/${a.instances}`, a.failing, a.held]),
              ),
            );
            break;
          }
          case "instances": {
            const rows = views.instanceViews(store);
            if (json) return io.stdout(`${JSON.stringify(rows, null, 2)}\n`);
            io.stdout(
              renderTable(
                ["INSTANCE", "GEN", "OBSERVED", "STATUS", "CONVERGED", "CONDITIONS", "MESSAGE"],
                rows.map((i) => [
                  i.instance,
                  i.generation,
                  i.observedGeneration ?? "-",
                  i.holdReason ? `${i.status} (${i.holdReason})` : i.status,
                  i.converged ? "yes" : "no",
                  i.openConditions.join(",") || "-",
                  truncate(i.message ?? "", 80),
                ]),
              ),
            );
            break;
          }
          case "intents": {
            const rows = views.intentViews(store, { all: options.all ?? false });
            if (json) return io.stdout(`${JSON.stringify(rows, null, 2)}\n`);
            io.stdout(
              renderTable(
                ["INSTANCE", "GEN", "STATUS", "OUTCOME", "CLASS", "FAILURES", "ATTEMPT", "MESSAGE"],
                rows.map((i) => [
                  i.instanceKey,
                  i.generation,
                  i.holdReason ? `${i.status} (${i.holdReason})` : i.status,
                  i.outcome ?? "-",
                  i.failureClass ?? "-",
                  i.failures,
                  i.lastAttemptId ?? "-",
                  truncate(i.message ?? "", 70),
                ]),
              ),
            );
            break;
          }
        }
        exit(EXIT.ok);
      } finally {
        store.close();
      }
    });
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
