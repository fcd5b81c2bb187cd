/**
 * The plan between two commits of a repository: what `steward plan --from --to` prints and what
 * the GitHub Action posts on a pull request (base → head). Loads both trees with the same loader
 * as the syncer; an invalid revision yields its diagnostics instead of a plan.
 */
import type { Diagnostic } from "../model/diagnostics.js";
import type { AnalysisCache } from "../model/load.js";
import { subject } from "./commits.js";
import type { FleetRepository } from "./git.js";
import { type Plan, planChange } from "./plan.js";

/** A commit as a plan names it. */
export interface RevisionRef {
  sha: string;
  subject: string;
}

/** The plan between two commits, or why there is none. */
export interface RevisionPlan {
  /** Absent when `to` has no parent and no `from` was given: the plan starts from an empty fleet. */
  from?: RevisionRef;
  to: RevisionRef;
  /** Present when both revisions are valid. */
  plan?: Plan;
  /** The first invalid revision and why (with `invalidFrom: "empty"`, only ever `to`). */
  invalid?: { side: "from" | "to"; sha: string; diagnostics: Diagnostic[] };
  /** With `invalidFrom: "empty"`: `from` was invalid, and the plan starts from an empty fleet. */
  invalidFrom?: { sha: string; diagnostics: Diagnostic[] };
  /** Warnings of `to` when it is valid (its errors and warnings are in `invalid` otherwise). */
  warnings?: Diagnostic[];
}

/** How `planRevisions` treats an invalid `from` revision. */
export interface PlanRevisionsOptions {
  /**
   * `stop` (the default): the invalid `from` is the answer, `to` is not loaded. `empty`: it is
   * recorded in `invalidFrom` and `to` is still checked and planned against an empty fleet, so a
   * broken base does not hide what is right or wrong with the change (the GitHub Action's case).
   */
  invalidFrom?: "stop" | "empty";
}

/** Plans `from` → `to` (commit-ishes); `from` defaults to the first parent of `to`. */
export async function planRevisions(
  repository: FleetRepository,
  from: string | undefined,
  to: string,
  options: PlanRevisionsOptions = {},
): Promise<RevisionPlan> {
  const toOid = await repository.resolve(to);
  const toCommit = repository.commit(toOid);
  const fromOid = from !== undefined ? await repository.resolve(from) : toCommit.parents[0];
  const result: RevisionPlan = { to: { sha: toOid, subject: subject(toCommit.message) } };
  // Both loads share one analysis cache: files unchanged between the revisions are parsed once.
  const cache: AnalysisCache = new Map();
  let before: Awaited<ReturnType<FleetRepository["load"]>> | undefined;
  if (fromOid) {
    result.from = { sha: fromOid, subject: subject(repository.commit(fromOid).message) };
    before = await repository.load(fromOid, cache);
    if (!before.ok) {
      if (options.invalidFrom !== "empty") {
        result.invalid = { side: "from", sha: fromOid, diagnostics: before.diagnostics };
        return result;
      }
      result.invalidFrom = { sha: fromOid, diagnostics: before.diagnostics };
      before = undefined;
    }
  }
  const after = await repository.load(toOid, cache);
  if (!after.ok || !after.desired) {
    result.invalid = { side: "to", sha: toOid, diagnostics: after.diagnostics };
    return result;
  }
  if (after.diagnostics.length > 0) result.warnings = after.diagnostics;
  result.plan = planChange(before?.desired, after.desired);
  return result;
}
