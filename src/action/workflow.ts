/**
 * The files and log commands a GitHub runner reads from a step: outputs (`GITHUB_OUTPUT`), the job
 * summary (`GITHUB_STEP_SUMMARY`), and `::stop-commands::` around text the step does not control.
 * Formats follow "Workflow commands for GitHub Actions" in GitHub's documentation.
 */
import { randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";

/** GitHub refuses a step summary over 1 MiB (and then shows none of it). */
export const SUMMARY_LIMIT_BYTES = 1024 * 1024;

/**
 * Appends outputs to the GITHUB_OUTPUT file, each as `name<<DELIMITER`, value, `DELIMITER`: safe
 * for values with newlines. One write, so a failure never leaves half an output behind.
 */
export function writeOutputs(file: string, outputs: Record<string, string>): void {
  const delimiter = `ghadelimiter_${randomUUID()}`;
  let text = "";
  for (const [name, value] of Object.entries(outputs)) {
    // A value cannot hold a random delimiter unless someone crafted it to end the heredoc early.
    if (value.includes(delimiter)) throw new Error(`output ${name} contains the delimiter ${delimiter}`);
    text += `${name}<<${delimiter}\n${value}\n${delimiter}\n`;
  }
  appendFileSync(file, text);
}

/** Appends Markdown to the job summary file (several steps of a job each add theirs). */
export function appendSummary(file: string, markdown: string): void {
  appendFileSync(file, markdown.endsWith("\n") ? markdown : `${markdown}\n`);
}

/**
 * `text` wrapped so the runner takes none of its lines for workflow commands: a fleet file's
 * content shown in a diff might contain `::error::` or `::add-mask::`.
 */
export function verbatim(text: string): string {
  const token = randomUUID();
  return `::stop-commands::${token}\n${text.endsWith("\n") ? text : `${text}\n`}::${token}::\n`;
}

/** An annotation without a file (`::warning::message`), its message escaped as the runner expects. */
export function annotation(severity: "error" | "warning" | "notice", message: string): string {
  return `::${severity}::${message.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A")}\n`;
}

/** A log group the runner folds: `::group::title` ... `::endgroup::`. */
export function group(title: string, body: string): string {
  return `::group::${title.replace(/[\r\n]/g, " ")}\n${body.endsWith("\n") ? body : `${body}\n`}::endgroup::\n`;
}

/**
 * Cuts Markdown to at most `limit` bytes (UTF-8) at a line boundary, closes a code fence left open
 * and ends with `note`; returns `markdown` itself when it fits.
 */
export function fitMarkdown(markdown: string, limit: number, note: string): string {
  if (Buffer.byteLength(markdown) <= limit) return markdown;
  // Room for the note, a closing fence and the newlines around them.
  const budget = limit - Buffer.byteLength(note) - 16;
  const kept: string[] = [];
  let size = 0;
  let fence: string | undefined;
  for (const line of markdown.split("\n")) {
    const bytes = Buffer.byteLength(line) + 1;
    if (size + bytes > budget) break;
    kept.push(line);
    size += bytes;
    // Kept with its indentation: a fence inside a list item closes only at the item's indent.
    const opener = /^(\s*`{3,})/.exec(line)?.[1];
    if (opener) fence = fence === undefined ? opener : undefined;
  }
  if (fence !== undefined) kept.push(fence);
  return `${kept.join("\n")}\n\n${note}\n`;
}
