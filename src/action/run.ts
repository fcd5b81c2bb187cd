/**
 * The GitHub Action's work, with the functions the CLI uses: the head is loaded and validated by
 * the loader of `steward validate`, the plan from base to head is `steward plan`'s
 * (`planRevisions`, `renderPlanMarkdown`). The results go where a runner looks for them:
 * annotations in the log at each finding's file and line, the report in the job summary, outputs
 * in GITHUB_OUTPUT, the plan as JSON in a file, and optionally one pull request comment.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { formatGithub, formatText } from "../model/diagnostics.js";
import { RepoError } from "../repo/errors.js";
import { FleetRepository } from "../repo/git.js";
import { renderPlanText } from "../repo/plan-render.js";
import { planRevisions, type RevisionPlan } from "../repo/plan-revisions.js";
import { COMMENT_LIMIT_CHARS, CommentError, commentMarker, upsertComment } from "./comment.js";
import { type ActionContext, ActionInputError } from "./context.js";
import { changedInstances, headDiagnostics, inWorkspace, passes, renderReport } from "./report.js";
import {
  annotation,
  appendSummary,
  fitMarkdown,
  group,
  SUMMARY_LIMIT_BYTES,
  verbatim,
  writeOutputs,
} from "./workflow.js";

/** Where the Action writes its log (workflow commands are read from stdout). */
export interface ActionIo {
  stdout(text: string): void;
}

/** The outputs action.yml declares (a test holds the two lists equal). */
export const ACTION_OUTPUTS = ["valid", "changed-instances", "plan-json"] as const;

/** What a run found; the exit code is 0 exactly when `valid`. */
export interface ActionResult {
  valid: boolean;
  changedInstances: number;
  /** The plan (or why there is none) as JSON. */
  planJson: string;
  exitCode: number;
}

/** Opens the checkout and plans base → head, naming the fix when the checkout cannot serve them. */
async function planCheckout(context: ActionContext): Promise<RevisionPlan> {
  let repository: FleetRepository;
  try {
    repository = FleetRepository.open({ kind: "path", path: context.repoDir });
  } catch (error) {
    if (error instanceof RepoError)
      throw new ActionInputError(
        `${error.message}; check the repository out first (actions/checkout) and give its directory as the path input`,
      );
    throw error;
  }
  try {
    return await planRevisions(repository, context.base, context.head, { invalidFrom: "empty" });
  } catch (error) {
    // A shallow clone (actions/checkout's default depth 1) lacks the base commit.
    if (
      error instanceof RepoError &&
      (error.code === "E_REVISION_NOT_FOUND" || error.code === "E_GIT_OBJECT")
    )
      throw new ActionInputError(
        `${error.message}; the base must be in the clone: use actions/checkout with fetch-depth: 0`,
      );
    throw error;
  } finally {
    repository.close();
  }
}

/** Writes `text` to `path` whole or not at all. */
function writeAtomically(path: string, text: string): void {
  const temporary = `${path}.${randomUUID()}.tmp`;
  writeFileSync(temporary, text);
  renameSync(temporary, path);
}

/**
 * Validates the head, plans base → head and reports both. Throws ActionInputError when the checkout
 * or the revisions are missing. A comment GitHub refuses is a warning in the log, never a failed
 * check: the report is in the job summary either way.
 */
export async function runAction(context: ActionContext, io: ActionIo): Promise<ActionResult> {
  const revision = await planCheckout(context);
  const found = inWorkspace(headDiagnostics(revision), context.repoPath);
  const valid = passes(revision, context.failOnWarnings);
  const changed = changedInstances(revision.plan);

  // The log: one annotation per finding (the pull request shows each at its line), then the plan.
  if (found.length > 0) io.stdout(`${formatGithub(found)}\n`);
  if (revision.invalidFrom)
    io.stdout(
      annotation(
        "warning",
        `the base ${revision.invalidFrom.sha.slice(0, 12)} is invalid: the plan starts from an empty fleet`,
      ),
    );
  const planText = revision.plan
    ? renderPlanText(revision.plan, revision.invalidFrom ? { to: revision.to } : revision)
    : `${formatText(found)}\nhead ${revision.to.sha.slice(0, 12)} is invalid: no plan\n`;
  io.stdout(group("steward plan", verbatim(planText)));

  const report = renderReport({
    repoPath: context.repoPath,
    revision,
    baseOrigin: context.baseOrigin,
    failOnWarnings: context.failOnWarnings,
  });
  const planDir = join(context.tempDir, `steward-${randomUUID()}`);
  mkdirSync(planDir, { recursive: true });
  const planJson = join(planDir, "plan.json");
  writeAtomically(planJson, `${JSON.stringify(revision, null, 2)}\n`);
  const tooLong = "**The plan is cut here**: the whole of it is in the `plan-json` output of this step.";
  if (context.summaryFile)
    appendSummary(context.summaryFile, fitMarkdown(report, SUMMARY_LIMIT_BYTES, tooLong));
  const outputs: Record<(typeof ACTION_OUTPUTS)[number], string> = {
    valid: String(valid),
    "changed-instances": String(changed),
    "plan-json": planJson,
  };
  if (context.outputFile) writeOutputs(context.outputFile, outputs);

  if (context.comment) await comment(context, report, io);
  return { valid, changedInstances: changed, planJson, exitCode: valid ? 0 : 1 };
}

/** Posts or updates the pull request comment; says why in a warning when it cannot. */
async function comment(context: ActionContext, report: string, io: ActionIo): Promise<void> {
  const { pullRequest, repository, token } = context;
  if (!pullRequest || !repository) {
    io.stdout(annotation("notice", "comment: not a pull request event: the plan is in the job summary only"));
    return;
  }
  if (!token) {
    io.stdout(
      annotation("warning", "comment is true but github-token is empty: give a token, or set comment: false"),
    );
    return;
  }
  const marker = commentMarker(context.repoPath);
  const footer = `\n---\n<sub>steward${context.runUrl ? ` · [workflow run](${context.runUrl})` : ""}</sub>\n`;
  const room = COMMENT_LIMIT_CHARS - marker.length - footer.length - 1;
  const tooLong = "**The plan is cut here**: the whole of it is in the job summary of the workflow run.";
  // Characters and bytes differ; a byte limit equal to the character limit is always safe.
  const body = fitMarkdown(report, room, tooLong) + footer;
  try {
    const done = await upsertComment(
      { apiUrl: context.apiUrl, token, ...repository, issueNumber: pullRequest.number },
      marker,
      body,
    );
    io.stdout(`comment ${done.action}: ${done.url}\n`);
  } catch (error) {
    if (!(error instanceof CommentError)) throw error;
    io.stdout(annotation("warning", error.message));
  }
}
