/**
 * The commit-status flags of the commands that run a hub (`steward hub`, `steward up`). They
 * override steward.yaml's `spec.status`; parse them with `effectiveStatusSettings` (src/status/settings.ts).
 * There is deliberately no flag for a token: a token on the command line ends up in shell history
 * and process listings, so `--status-token` only explains what to do instead.
 */
import { type Command, Option } from "commander";
import { UsageError } from "../model/errors.js";

/** Adds the status flags to `command`. */
export function addStatusFlags(command: Command): Command {
  return command
    .addOption(
      new Option("--status <type>", "where commit statuses go, replacing steward.yaml's providers").choices([
        "gitnotes",
        "github",
        "gitlab",
        "gitea",
        "none",
      ]),
    )
    .option("--status-repo <repo>", "OWNER/REPO (github, gitea) or project id or path (gitlab)")
    .option("--status-url <url>", "API base URL: GitHub Enterprise, or the GitLab / Gitea instance")
    .option(
      "--status-token-env <name>",
      "environment variable holding the forge token (default GITHUB_TOKEN, GITLAB_TOKEN or GITEA_TOKEN)",
    )
    .option(
      "--status-app-id <id>",
      "post to GitHub as this App (with --status-app-installation and --status-app-key-env)",
    )
    .option("--status-app-installation <id>", "the GitHub App's installation id")
    .option("--status-app-key-env <name>", "environment variable holding the GitHub App's PEM private key")
    .option("--public-url <url>", "the hub's public URL: statuses link to <url>/revisions/<sha>")
    .addOption(
      new Option("--status-token <token>").hideHelp().argParser(() => {
        throw new UsageError(
          "tokens are not taken from the command line: put it in an environment variable and pass --status-token-env NAME",
        );
      }),
    );
}
