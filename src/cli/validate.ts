import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { Command, Option } from "commander";
import { formatGithub, formatText, plural, summarize } from "../model/diagnostics.js";
import { EnvironmentError } from "../model/errors.js";
import { directorySource, type LoadResult, loadRepo } from "../model/load.js";
import { EXIT } from "./io.js";
import type { CommandFactory } from "./program.js";

export type ValidateFormat = "text" | "json" | "github";

/** Loads the fleet repo at `path` (a directory), refusing a path that is not one. */
export async function validateDirectory(path: string): Promise<LoadResult> {
  if (!existsSync(path) || !statSync(path).isDirectory())
    throw new EnvironmentError(`${path} is not a directory: give the path of a fleet repository`);
  return loadRepo(directorySource(path));
}

/** Renders a load result in one of the formats; returns the text for stdout. */
export function renderValidation(result: LoadResult, format: ValidateFormat): string {
  if (format === "json") {
    return `${JSON.stringify(
      {
        valid: result.ok,
        files: result.filesRead,
        nodes: result.desired?.nodes.size ?? null,
        assignments: result.desired?.assignments.size ?? null,
        instances: result.desired?.instances.size ?? null,
        diagnostics: result.diagnostics,
      },
      null,
      2,
    )}\n`;
  }
  if (format === "github")
    return result.diagnostics.length > 0 ? `${formatGithub(result.diagnostics)}\n` : "";
  const lines: string[] = [];
  if (result.diagnostics.length > 0) lines.push(formatText(result.diagnostics, result.lineOf), "");
  const summary = summarize(result.diagnostics, result.filesRead);
  if (result.ok && result.desired) {
    const d = result.desired;
    lines.push(
      `valid: ${plural(d.nodes.size, "node")}, ${plural(d.assignments.size, "assignment")}, ${plural(d.instances.size, "instance")} (${summary})`,
    );
  } else lines.push(`invalid: ${summary}`);
  return `${lines.join("\n")}\n`;
}

/**
 * `steward validate [PATH] [--format text|json|github]`: loads the fleet repository at PATH as the
 * syncer would and prints every diagnostic. Exit 0 when there is no error (warnings allowed), 1 when
 * there is one, 2 when PATH is not a directory.
 */
export const validateCommand: CommandFactory = (io, globals, exit) =>
  new Command("validate")
    .summary("check a fleet repository: YAML, JSON Schema and cross-document rules, with file:line:column")
    .description(
      "Check a fleet repository as the syncer would: every YAML file is parsed, each document is checked " +
        "against its JSON Schema, then across documents (nodes, names, dependsOn, paths and roots, sources), " +
        "and every instance is rendered. Each problem is printed with file:line:column and its fix. " +
        "Exit 0: valid (warnings allowed); 1: errors found; 2: PATH is not a directory.",
    )
    .argument("[path]", "fleet repository directory", ".")
    .addOption(
      new Option("--format <format>", "output format").choices(["text", "json", "github"]).default("text"),
    )
    .addOption(new Option("-o, --output <format>", "-o json is --format json").choices(["json"]))
    .option("--json", "the same as --format json")
    .action(async (path: string, options: { format: ValidateFormat; output?: "json"; json?: boolean }) => {
      const format = options.output || options.json || globals().json ? "json" : options.format;
      const result = await validateDirectory(resolve(io.cwd, path));
      io.stdout(renderValidation(result, format));
      exit(result.ok ? EXIT.ok : EXIT.problems);
    });
