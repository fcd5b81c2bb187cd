import { resolve } from "node:path";
import { Command } from "commander";
import type { SyncOutcome } from "../repo/syncer.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

interface SyncCommandOptions extends OutputOptions {
  repo?: string;
  branch: string;
  acceptRewrite?: boolean;
}

/** One line (and, for an invalid revision, its diagnostics) describing a sync outcome. */
export async function renderSyncOutcome(outcome: SyncOutcome): Promise<string> {
  const short = (sha: string) => sha.slice(0, 12);
  switch (outcome.kind) {
    case "up-to-date":
      return `up to date: ${outcome.branch} at ${short(outcome.head)}${outcome.lastGood && outcome.lastGood !== outcome.head ? ` (serving ${short(outcome.lastGood)})` : ""}\n`;
    case "applied": {
      const subject = outcome.revision.message.split("\n", 1)[0];
      const generations = outcome.generations.map((g) => `${g.instanceKey}→${g.generation}`);
      const shown =
        generations.length > 10
          ? [...generations.slice(0, 10), `+${generations.length - 10} more`]
          : generations;
      const parts = [
        `${outcome.generations.length} new generation${outcome.generations.length === 1 ? "" : "s"}${shown.length ? ` (${shown.join(", ")})` : ""}`,
        `${outcome.retired.length} retired`,
        `${outcome.unchanged} unchanged`,
      ];
      if (outcome.superseded.length > 0) parts.push(`${outcome.superseded.length} superseded`);
      const signer = outcome.signer ? `, signed by ${outcome.signer}` : "";
      return `applied ${short(outcome.head)} "${subject}"${signer}: ${parts.join(", ")}\n`;
    }
    case "invalid": {
      const { formatText } = await import("../model/diagnostics.js");
      const errors = outcome.diagnostics.filter((d) => d.severity === "error").length;
      const serving = outcome.lastGood ? `still serving ${short(outcome.lastGood)}` : "nothing synced yet";
      return `${formatText(outcome.diagnostics)}\ninvalid ${short(outcome.head)}: ${errors} error${errors === 1 ? "" : "s"}; nothing advanced, ${serving}\n`;
    }
    case "refused":
      return `refused ${short(outcome.head)}: ${outcome.event.message}\n`;
  }
}

/** `steward sync`: one sync into `<state>/hub.db`; exit 0 when applied or up to date, 1 when invalid or refused. */
export function syncCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  const command = new Command("sync")
    .description("fetch the fleet repository's tracked branch and turn new commits into generations")
    .option(
      "--repo <path|url>",
      "the fleet repository: a local clone or an http(s) URL (default: the last one synced, else .)",
    )
    .option("--branch <name>", "the tracked branch", "main")
    .option("--accept-rewrite", "adopt a force-pushed branch instead of refusing it")
    .addHelpText(
      "after",
      "\nCredentials for HTTP remotes come from STEWARD_GIT_TOKEN, or STEWARD_GIT_USERNAME and STEWARD_GIT_PASSWORD.",
    );
  return addOutputOptions(command).action(async (options: SyncCommandOptions) => {
    const { openGenerationStore } = await import("../hub/store/generations.js");
    const { credentialsFromEnv, parseLocation } = await import("../repo/git.js");
    const { Syncer } = await import("../repo/syncer.js");
    const state = resolve(io.cwd, globals().state);
    const { store, close } = openGenerationStore(state);
    try {
      const source = parseLocation(options.repo ?? store.syncState(options.branch)?.source ?? ".", io.cwd);
      const credentials = credentialsFromEnv(io.env);
      const syncer = new Syncer({
        store,
        source,
        branch: options.branch,
        cacheDir: resolve(state, "git"),
        ...(credentials ? { credentials } : {}),
      });
      try {
        const outcome = await syncer.sync({ acceptRewrite: options.acceptRewrite === true });
        const text = await renderSyncOutcome(outcome);
        await printResult(io, outputFormat(options, globals()), outcome, () => text);
        exit(outcome.kind === "applied" || outcome.kind === "up-to-date" ? EXIT.ok : EXIT.problems);
      } finally {
        syncer.close();
      }
    } finally {
      close();
    }
  });
}
