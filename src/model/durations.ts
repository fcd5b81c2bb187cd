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

const BY_KIND = new Map<DocumentKind, readonly DurationField[]>();
for (const field of DURATION_FIELDS) BY_KIND.set(field.kind, [...(BY_KIND.get(field.kind) ?? []), field]);

/**
 * Findings for the durations of a document of `kind` that are outside their bounds. Values that
 * are not durations at all are the schema's to report.
 */
export function durationFindings(kind: DocumentKind, value: unknown): Finding[] {
  const findings: Finding[] = [];
  for (const field of BY_KIND.get(kind) ?? []) {
    const visit = (at: unknown, depth: number, path: (string | number)[]) => {
      if (depth === field.path.length) {
        if (typeof at === "string" && DURATION.test(at)) {
          const ms = parseDuration(at);
          if (ms < parseDuration(field.min) || ms > parseDuration(field.max))
            findings.push({
              severity: "error",
              code: "duration/range",
              path,
              message: `${formatPath(path)} must be from ${field.min} to ${field.max} (got ${JSON.stringify(at)})`,
              fix: `use a duration from ${field.min} to ${field.max}`,
            });
        }
        return;
      }
      if (at === null || typeof at !== "object") return;
      const segment = field.path[depth]!;
      if (segment === "*") {
        if (Array.isArray(at)) for (const [i, item] of at.entries()) visit(item, depth + 1, [...path, i]);
      } else if (!Array.isArray(at) && Object.hasOwn(at, segment))
        visit((at as Record<string, unknown>)[segment], depth + 1, [...path, segment]);
    };
    visit(value, 0, []);
  }
  return findings;
}
