import { Command, Option } from "commander";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";

type PlanFormat = "text" | "markdown" | "json";

/** `steward plan`: the plan between two revisions of a local clone; exit 1 when a revision is invalid. */
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
    .action(async (path: string, options: { from?: string; to: string; format: PlanFormat }) => {
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
        const format: PlanFormat = globals().json ? "json" : options.format;
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
          io.stdout((format === "markdown" ? renderPlanMarkdown : renderPlanText)(result.plan!, heading));
        }
        exit(result.invalid ? EXIT.problems : EXIT.ok);
      } finally {
        repository.close();
      }
    });
}
