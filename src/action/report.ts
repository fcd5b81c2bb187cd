/**
 * What the Action found, as Markdown for the job summary and the pull request comment: whether the
 * head is valid (and if not, every error at file:line with its fix), then the plan from base to
 * head as `steward plan --format markdown` renders it. Pure: data in, text out.
 */
import { type Diagnostic, formatText, hasErrors } from "../model/diagnostics.js";
import type { Plan } from "../repo/plan.js";
import { renderPlanMarkdown } from "../repo/plan-render.js";
import type { RevisionPlan } from "../repo/plan-revisions.js";
import type { BaseOrigin } from "./context.js";

/** What the report is about. */
export interface ReportInput {
  /** The fleet repository's path in the workspace (`""`: the workspace itself). */
  repoPath: string;
  revision: RevisionPlan;
  baseOrigin: BaseOrigin;
  failOnWarnings: boolean;
}

/** Every finding about the head: its errors and warnings when invalid, its warnings otherwise. */
export function headDiagnostics(revision: RevisionPlan): Diagnostic[] {
  return revision.invalid?.side === "to" ? revision.invalid.diagnostics : (revision.warnings ?? []);
}

/** True when the check passes: no error in the head, and no warning either with `failOnWarnings`. */
export function passes(revision: RevisionPlan, failOnWarnings: boolean): boolean {
  const found = headDiagnostics(revision);
  return revision.plan !== undefined && !hasErrors(found) && !(failOnWarnings && found.length > 0);
}

/** Instances added, retired or given a new generation. */
export function changedInstances(plan: Plan | undefined): number {
  return plan ? plan.summary.added + plan.summary.changed + plan.summary.retired : 0;
}

/** Diagnostics with file paths relative to the workspace (as annotations need them). */
export function inWorkspace(list: readonly Diagnostic[], repoPath: string): Diagnostic[] {
  return repoPath === "" ? [...list] : list.map((d) => ({ ...d, file: `${repoPath}/${d.file}` }));
}

/** A fenced block whose fence is longer than any run of backticks inside. */
function codeBlock(text: string, info = ""): string {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${info}\n${text.replace(/\n$/, "")}\n${fence}`;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function commit(ref: { sha: string; subject?: string } | undefined): string {
  if (!ref) return "an empty fleet";
  return `\`${ref.sha.slice(0, 12)}\`${ref.subject ? ` (${ref.subject.replace(/[\r\n]+/g, " ")})` : ""}`;
}

const ORIGINS: Record<BaseOrigin, string> = {
  input: "the `base` input",
  pull_request: "the pull request's base",
  merge_group: "the merge group's base",
  push: "the commit before the push",
  parent: "the head's parent",
};

/** The report as Markdown. */
export function renderReport(report: ReportInput): string {
  const { revision, repoPath } = report;
  const found = inWorkspace(headDiagnostics(revision), repoPath);
  const errors = found.filter((d) => d.severity === "error").length;
  const warnings = found.length - errors;
  const ok = passes(revision, report.failOnWarnings);
  const where = repoPath === "" ? "fleet repository" : `fleet repository \`${repoPath}\``;
  const out: string[] = [`## steward: ${where} ${ok ? "✅ valid" : "❌ invalid"}`, ""];

  if (errors > 0) {
    out.push(
      `Head ${commit(revision.to)} has ${plural(errors, "error")} and ${plural(warnings, "warning")}: nothing is planned until they are fixed. Each is annotated at its line in the pull request's files.`,
      "",
      codeBlock(formatText(found)),
    );
    return `${out.join("\n")}\n`;
  }
  out.push(
    `Head ${commit(revision.to)} is valid${warnings > 0 ? ` with ${plural(warnings, "warning")}` : ""}; compared with ${commit(revision.from)}, ${ORIGINS[report.baseOrigin]}.`,
  );
  if (warnings > 0) {
    if (report.failOnWarnings) out.push("", "Warnings fail this check (`fail-on-warnings: true`).");
    out.push("", codeBlock(formatText(found)));
  }
  if (revision.invalidFrom) {
    const count = revision.invalidFrom.diagnostics.filter((d) => d.severity === "error").length;
    out.push(
      "",
      "> [!WARNING]",
      `> The base \`${revision.invalidFrom.sha.slice(0, 12)}\` is itself invalid (${plural(count, "error")}), so the plan starts from an empty fleet: every instance of the head shows as added.`,
      "",
      "<details><summary>What is wrong with the base</summary>",
      "",
      codeBlock(formatText(inWorkspace(revision.invalidFrom.diagnostics, repoPath))),
      "",
      "</details>",
    );
  }
  const heading =
    revision.from && !revision.invalidFrom ? { from: revision.from, to: revision.to } : { to: revision.to };
  out.push("", renderPlanMarkdown(revision.plan!, heading).trimEnd());
  return `${out.join("\n")}\n`;
}
