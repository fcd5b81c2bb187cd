import { Command, Option } from "commander";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";

type PlanFormat = "text" | "markdown" | "json";

/** The warning `plan` gives when the clone holds changes no commit has: they are not in the plan. */
export function uncommittedWarning(
  path: string,
  changes: { changed: string[]; untracked: string[] },
): string {
  const paths = [...changes.changed, ...changes.untracked];
  if (paths.length === 0) return "";
  return `steward: warning: the working tree ${path} has uncommitted changes that are not in this plan (${paths.slice(0, 5).join(", ")}${paths.length > 5 ? `, +${paths.length - 5} more` : ""}): plan compares commits — commit them to plan them\n`;
}

/**
 * `steward plan`: the plan between two revisions of a local clone, naming both; warns (on stderr)
 * about uncommitted changes, which no plan includes. Exit 1 when a revision is invalid.
 */
export function planCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  return new Command("plan")
    .description(
      "show what a change does: per node, instances added, retired or given a new generation, the diff, and the rollout",
    )
    .argument("[path]", "a local clone of the fleet repository", ".")
    .option("--from <rev>", "the revision before (default: the parent of --to)")
    .option("--to <rev>", "the revision after", "HEAD")
    .addOption(
      new Option("--format <format>", "output format").choices(["text", "markdown", "json"]).default("text"),
    )
    .addOption(new Option("-o, --output <format>", "-o json is --format json").choices(["json"]))
    .option("--json", "the same as --format json")
    .action(
      async (
        path: string,
        options: { from?: string; to: string; format: PlanFormat; output?: "json"; json?: boolean },
      ) => {
        const { FleetRepository, parseLocation } = await import("../repo/git.js");
        const { planRevisions } = await import("../repo/plan-revisions.js");
        const location = parseLocation(path, io.cwd);
        if (location.kind !== "path") {
          const { UsageError } = await import("../model/errors.js");
          throw new UsageError(`steward plan reads a local clone: clone ${location.url} and give its path`);
        }
        const repository = FleetRepository.open(location);
        try {
          const result = await planRevisions(repository, options.from, options.to);
          const format: PlanFormat =
            options.output || options.json || globals().json ? "json" : options.format;
          if (repository.gitdir !== location.path) {
            const { workingTreeChanges } = await import("../repo/git.js");
            io.stderr(uncommittedWarning(path, await workingTreeChanges(location.path, repository.gitdir)));
          }
          if (format === "json") io.stdout(`${JSON.stringify(result, null, 2)}\n`);
          else if (result.invalid) {
            const { formatGithub, formatText } = await import("../model/diagnostics.js");
            const where = `${result.invalid.side === "to" ? "--to" : "--from"} revision ${result.invalid.sha.slice(0, 12)}`;
            io.stdout(
              format === "markdown"
                ? `### steward plan: ${where} is invalid\n\n\`\`\`\n${formatText(result.invalid.diagnostics)}\n\`\`\`\n`
                : `${formatText(result.invalid.diagnostics)}\n${where} is invalid: no plan\n`,
            );
            if (io.env.GITHUB_ACTIONS === "true") io.stderr(`${formatGithub(result.invalid.diagnostics)}\n`);
          } else {
            const { renderPlanMarkdown, renderPlanText } = await import("../repo/plan-render.js");
            const heading = { ...(result.from ? { from: result.from } : {}), to: result.to };
            if (format === "markdown") io.stdout(renderPlanMarkdown(result.plan!, heading));
            else {
              const { colourDiff, palette } = await import("./colour.js");
              io.stdout(colourDiff(renderPlanText(result.plan!, heading), palette(io)));
            }
          }
          exit(result.invalid ? EXIT.problems : EXIT.ok);
        } finally {
          repository.close();
        }
      },
    );
}
