import { resolve } from "node:path";
import { Command } from "commander";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

interface RollbackOptions extends OutputOptions {
  repo: string;
  to?: string;
  push?: boolean;
  branch?: string;
}

/** `steward rollback`: a revert (or --to restore) commit, optionally pushed; refusals exit 1. */
export function rollbackCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const command = new Command("rollback")
    .description(
      "undo a change with a new commit: revert REV, or restore the tree of an earlier revision with --to",
    )
    .argument("[rev]", "the commit to revert")
    .option("--to <rev>", "instead of reverting one commit, restore the whole tree of this revision")
    .option("--repo <path|url>", "a local clone, or an http(s) URL (then --push is required)", ".")
    .option("--branch <name>", "the branch to commit on (default: the checked-out one; main for a URL)")
    .option("--push", "push the commit to origin (or the URL)")
    .addHelpText(
      "after",
      "\nThe author is STEWARD_GIT_AUTHOR_NAME/STEWARD_GIT_AUTHOR_EMAIL, else git config user.name/user.email.\nCredentials for pushing come from STEWARD_GIT_TOKEN, or STEWARD_GIT_USERNAME and STEWARD_GIT_PASSWORD.",
    );
  return addOutputOptions(command).action(async (rev: string | undefined, options: RollbackOptions) => {
    const { UsageError } = await import("../model/errors.js");
    if ((rev === undefined) === (options.to === undefined))
      throw new UsageError("give either the commit to revert (steward rollback REV) or --to REV, not both");
    const { parseLocation } = await import("../repo/git.js");
    const { rollback } = await import("../repo/rollback.js");
    const request: Parameters<typeof rollback>[0] = {
      location: parseLocation(options.repo, io.cwd),
      revision: (rev ?? options.to)!,
      mode: options.to !== undefined ? "restore" : "revert",
      push: options.push === true,
      env: io.env,
      cacheDir: resolve(io.cwd, globals().state, "git"),
    };
    if (options.branch) request.branch = options.branch;
    const result = await rollback(request);
    const title = result.message.split("\n", 1)[0];
    await printResult(
      io,
      outputFormat(options, globals()),
      result,
      () =>
        `${result.commit.slice(0, 12)} ${title}\n  on ${result.branch} (was ${result.parent.slice(0, 12)}), ${result.paths.length} file${result.paths.length === 1 ? "" : "s"}: ${result.paths.join(", ")}\n  ${result.pushed ? "pushed" : "not pushed (add --push, or git push)"}\n`,
    );
    exit(EXIT.ok);
  });
}
