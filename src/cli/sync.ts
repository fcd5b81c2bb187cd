import { existsSync } from "node:fs";
import { Command } from "commander";
import { UsageError } from "../model/errors.js";
import type { SyncOutcome } from "../repo/syncer.js";
import type { HubFile } from "./hub-state.js";
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

/** The outcome as `-o json|yaml` prints it: what the sync did, and who did it. */
export type SyncReport = SyncOutcome &
  ({ syncedBy: "hub"; hub: { pid: number; url: string } } | { syncedBy: "command" });

/**
 * Refuses to ask the running `hub` for a sync of another repository or branch than the one it
 * tracks: it would sync its own and the user would read that as theirs. `asked.repo` is `--repo`
 * as given, `asked.location` the same resolved as the syncer describes it.
 */
export function assertHubTracks(
  hub: HubFile,
  asked: { repo?: { given: string; location: string }; branch?: string },
): void {
  const who = `the hub running on this state directory (pid ${hub.pid})`;
  if (asked.repo !== undefined && hub.repo !== undefined && asked.repo.location !== hub.repo)
    throw new UsageError(
      `--repo ${JSON.stringify(asked.repo.given)} is not the repository ${who} tracks (${hub.repo}): leave --repo out to sync that one, or give this one its own --state DIR`,
    );
  if (asked.branch !== undefined && hub.branch !== undefined && asked.branch !== hub.branch)
    throw new UsageError(
      `--branch ${JSON.stringify(asked.branch)} is not the branch ${who} tracks (${hub.branch}): leave --branch out, or give this branch its own --state DIR`,
    );
}

/**
 * `steward sync`: with a hub running on the state directory, that hub syncs now and the command
 * says what it did; without one (or with one recorded that is gone) the command syncs into
 * `<state>/hub.db` itself. Exit 0 when applied or up to date, 1 when invalid or refused.
 */
export function syncCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  const command = new Command("sync")
    .description(
      "fetch the fleet repository's tracked branch and turn new commits into generations (through the running hub, if there is one)",
    )
    .option(
      "--repo <path|url>",
      "the fleet repository: a local clone or an http(s) URL (default: the running hub's, else the last one synced, else .)",
    )
    .option("--branch <name>", "the tracked branch", "main")
    .option("--accept-rewrite", "adopt a force-pushed branch instead of refusing it")
    .addHelpText(
      "after",
      "\nWith a hub running on the state directory (it records itself in <state>/hub.json), that hub syncs at once and its outcome is printed.\nCredentials for HTTP remotes come from STEWARD_GIT_TOKEN, or STEWARD_GIT_USERNAME and STEWARD_GIT_PASSWORD.",
    );
  return addOutputOptions(command).action(async (options: SyncCommandOptions, self: Command) => {
    const { statePaths, findRunningHub, syncThroughHub } = await import("./hub-state.js");
    const { credentialsFromEnv, describeLocation, FleetRepository, parseLocation } = await import(
      "../repo/git.js"
    );
    const paths = statePaths(io, globals());
    const format = outputFormat(options, globals());
    const acceptRewrite = options.acceptRewrite === true;
    const finish = async (report: SyncReport, note: string) => {
      const text = await renderSyncOutcome(report);
      await printResult(io, format, report, () => `${text}${note}`);
      exit(report.kind === "applied" || report.kind === "up-to-date" ? EXIT.ok : EXIT.problems);
    };

    const presence = await findRunningHub(paths);
    if (presence.kind === "running") {
      const { hub } = presence;
      const repo = options.repo;
      assertHubTracks(hub, {
        ...(repo !== undefined
          ? { repo: { given: repo, location: describeLocation(parseLocation(repo, io.cwd)) } }
          : {}),
        ...(self.getOptionValueSource("branch") === "cli" ? { branch: options.branch } : {}),
      });
      const outcome = await syncThroughHub(hub, { acceptRewrite });
      return finish(
        { ...outcome, syncedBy: "hub", hub: { pid: hub.pid, url: hub.url } },
        `(synced by the running hub, pid ${hub.pid} at ${hub.url})\n`,
      );
    }
    if (presence.kind === "gone")
      io.stderr(
        `steward: warning: the hub recorded in ${paths.hubFile} (pid ${presence.hub.pid}) is gone: ${presence.why}; syncing here instead\n`,
      );

    const { openStateStore } = await import("./hub-state.js");
    const { Syncer } = await import("../repo/syncer.js");
    if (!existsSync(paths.db)) {
      // A first sync: a repository that is not one is said before the state directory is made.
      FleetRepository.open(parseLocation(options.repo ?? ".", io.cwd), { cacheDir: paths.git }).close();
    }
    const hubStore = await openStateStore(paths);
    try {
      const store = hubStore.generations;
      const source = parseLocation(
        options.repo ?? (await store.syncState(options.branch))?.source ?? ".",
        io.cwd,
      );
      const credentials = credentialsFromEnv(io.env);
      const syncer = new Syncer({
        store,
        source,
        branch: options.branch,
        cacheDir: paths.git,
        ...(credentials ? { credentials } : {}),
      });
      try {
        const outcome = await syncer.sync({ acceptRewrite });
        await finish({ ...outcome, syncedBy: "command" }, "");
      } finally {
        syncer.close();
      }
    } finally {
      await hubStore.close();
    }
  });
}
