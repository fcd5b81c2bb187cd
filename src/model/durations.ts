/**
 * The bounds of every duration field of a fleet document. A duration is a string (`30s`), so JSON
 * Schema cannot bound it; this table does, and each field's schema description names the same
 * bounds (a test holds the two equal, and the README's table). Without bounds `0s` makes a hub
 * spin and `99999999999999999999999d` overflows every timer.
 */
import { parseDuration } from "./duration.js";
import { type Finding, formatPath } from "./findings.js";
import type { DocumentKind } from "./schema.js";

/** One duration field: where it is (`*` for every item of a list) and its bounds, inclusive. */
export interface DurationField {
  kind: DocumentKind;
  path: readonly string[];
  min: string;
  max: string;
}

/** Every duration field, with its bounds. */
export const DURATION_FIELDS: readonly DurationField[] = [
  { kind: "Fleet", path: ["spec", "heartbeat", "interval"], min: "1s", max: "1h" },
  { kind: "Fleet", path: ["spec", "budget", "within"], min: "1s", max: "30d" },
  { kind: "Assignment", path: ["spec", "budget", "within"], min: "1s", max: "30d" },
  { kind: "Assignment", path: ["spec", "rollout", "canary", "soak"], min: "0s", max: "7d" },
  { kind: "Assignment", path: ["spec", "resources", "*", "timeout"], min: "100ms", max: "24h" },
  { kind: "Assignment", path: ["spec", "resources", "*", "stopTimeout"], min: "0s", max: "1h" },
  { kind: "Assignment", path: ["spec", "probes", "*", "interval"], min: "1s", max: "24h" },
  { kind: "Assignment", path: ["spec", "probes", "*", "timeout"], min: "100ms", max: "1h" },
];

const DURATION = /^[0-9]+(ms|s|m|h|d)$/;

/** The fields of each kind, with their bounds in milliseconds. */
const BY_KIND = new Map<DocumentKind, { field: DurationField; minMs: number; maxMs: number }[]>();
for (const field of DURATION_FIELDS) {
  const list = BY_KIND.get(field.kind) ?? [];
  list.push({ field, minMs: parseDuration(field.min), maxMs: parseDuration(field.max) });
  BY_KIND.set(field.kind, list);
}

/**
 * Findings for the durations of a document of `kind` that are outside their bounds. Values that
 * are not durations at all are the schema's to report.
 */
export function durationFindings(kind: DocumentKind, value: unknown): Finding[] {
  const findings: Finding[] = [];
  // Runs for every document of a fleet: one path stack, copied only for a finding.
  const path: (string | number)[] = [];
  for (const bounded of BY_KIND.get(kind) ?? []) visit(value, 0, bounded, path, findings);
  return findings;
}

function visit(
  at: unknown,
  depth: number,
  bounded: { field: DurationField; minMs: number; maxMs: number },
  path: (string | number)[],
  findings: Finding[],
): void {
  const { field, minMs, maxMs } = bounded;
  if (depth === field.path.length) {
    if (typeof at !== "string" || !DURATION.test(at)) return;
    const ms = parseDuration(at);
    if (ms >= minMs && ms <= maxMs) return;
    findings.push({
      severity: "error",
      code: "duration/range",
      path: [...path],
      message: `${formatPath(path)} must be from ${field.min} to ${field.max} (got ${JSON.stringify(at)})`,
      fix: `use a duration from ${field.min} to ${field.max}`,
    });
    return;
  }
  if (at === null || typeof at !== "object") return;
  const segment = field.path[depth]!;
  if (segment === "*") {
    if (!Array.isArray(at)) return;
    for (let i = 0; i < at.length; i++) {
      path.push(i);
      visit(at[i], depth + 1, bounded, path, findings);
      path.pop();
    }
  } else if (!Array.isArray(at) && Object.hasOwn(at, segment)) {
    path.push(segment);
    visit((at as Record<string, unknown>)[segment], depth + 1, bounded, path, findings);
    path.pop();
  }
}
