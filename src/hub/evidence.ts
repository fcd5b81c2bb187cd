/**
 * The line that says why an attempt failed, from the evidence the agent sent with its result: what
 * `steward up`'s failure lines, a failure status's description and `steward status` show when they
 * have room for one line. The rule for picking the line is errorLine's (src/model/error-line.ts).
 */
import { errorLine } from "../model/error-line.js";
import type { AttemptRecord } from "./records.js";

/** One resource's part of a failed attempt's evidence, as the hub records it (attempts.ts, from a result). */
interface ResourceEvidence {
  name?: string;
  action?: string;
  message?: string;
  evidence?: string;
}

/**
 * `resource: line` for the first failed resource of `attempt` whose evidence names an error, or
 * undefined when there is no evidence (a lost attempt, a failure that printed nothing).
 */
export function attemptErrorLine(attempt: Pick<AttemptRecord, "evidence"> | undefined): string | undefined {
  if (!Array.isArray(attempt?.evidence)) return undefined;
  for (const entry of attempt.evidence as ResourceEvidence[]) {
    if (entry.action !== undefined && entry.action !== "failed") continue;
    const line = errorLine(entry.evidence);
    if (line) return entry.name ? `${entry.name}: ${line}` : line;
  }
  return undefined;
}
