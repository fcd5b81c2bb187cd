/**
 * How a command prints its result: `-o json|yaml|wide` (and `--json`, the short form of `-o json`)
 * on every command that prints one. JSON and YAML carry the same plain value; text is for people
 * and `wide` is text that never truncates (and may add columns). Commands add the options with
 * `addOutputOptions`, read the choice with `outputFormat` and print with `printResult`.
 */
import { type Command, Option } from "commander";
import type { CliIo, GlobalOptions } from "./io.js";

/** What a command's result is printed as. */
export type OutputFormat = "text" | "wide" | "json" | "yaml";

/** The options `addOutputOptions` adds. */
export interface OutputOptions {
  output?: "json" | "yaml" | "wide";
  json?: boolean;
}

/** Adds `-o, --output json|yaml|wide` and `--json` to `command`. */
export function addOutputOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        "-o, --output <format>",
        "print the result as json, yaml, or wide text (never truncated)",
      ).choices(["json", "yaml", "wide"]),
    )
    .option("--json", "the same as -o json");
}

/** The format asked for: `-o` wins over `--json` (the command's or the global one); text otherwise. */
export function outputFormat(options: OutputOptions, globals: Pick<GlobalOptions, "json">): OutputFormat {
  if (options.output) return options.output;
  return options.json || globals.json ? "json" : "text";
}

/** True for the formats a script reads. */
export function isMachine(format: OutputFormat): format is "json" | "yaml" {
  return format === "json" || format === "yaml";
}

/** `value` as JSON or YAML text, ending with a newline. */
export async function serialise(value: unknown, format: "json" | "yaml"): Promise<string> {
  if (format === "json") return `${JSON.stringify(value, null, 2)}\n`;
  const { stringify } = await import("yaml");
  // A plain copy first: YAML would otherwise write `undefined` fields and class instances its own way.
  return stringify(JSON.parse(JSON.stringify(value ?? null)), { lineWidth: 0 });
}

/** Prints `value` as the format asks: JSON or YAML as it is, else `text(wide)`. */
export async function printResult(
  io: CliIo,
  format: OutputFormat,
  value: unknown,
  text: (wide: boolean) => string,
): Promise<void> {
  io.stdout(isMachine(format) ? await serialise(value, format) : text(format === "wide"));
}

/** `text` cut to `max` characters with an ellipsis, unless `wide`. */
export function clip(text: string, max: number, wide: boolean): string {
  return wide || text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
