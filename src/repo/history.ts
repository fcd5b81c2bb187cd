/**
 * An assignment's generations, newest first, for `steward history` and the hub's API. Each row has
 * the revision that produced it, when, and the spec hash. The hub adds what happened to each
 * generation (outcome, failure class, correlation id) through an `AttemptLookup` over its attempts
 * table; without one, `attempt` is null.
 */
import type { GenerationStore, HistoryEntry } from "./store.js";

/** What the hub knows about the latest attempt at a generation. */
export interface AttemptSummary {
  /** e.g. `converged`, `failed`, `in-flight`, `ambiguous`. */
  outcome: string;
  failureClass?: "transient" | "permanent" | "ambiguous" | "waiting";
  /** The attempt's ULID, as found in logs, reports, conditions and commit statuses. */
  correlationId: string;
}

/** The seam for the hub: the latest attempt at an instance's generation, if any. */
export type AttemptLookup = (instanceKey: string, generation: number) => Promise<AttemptSummary | undefined>;

/** A generation with what the hub knows of its attempts (null until the hub supplies a lookup). */
export interface HistoryRow extends HistoryEntry {
  attempt: AttemptSummary | null;
}

/** Generations of `assignment` (on `node` only, if given), newest first, with their attempts. */
export async function assignmentHistory(
  store: GenerationStore,
  query: { assignment: string; node?: string; limit?: number },
  lookup?: AttemptLookup,
): Promise<HistoryRow[]> {
  const rows: HistoryRow[] = [];
  for (const entry of await store.history(query))
    rows.push({ ...entry, attempt: (await lookup?.(entry.instanceKey, entry.generation)) ?? null });
  return rows;
}

/** Rows as aligned text columns: instance, generation, revision, time, hash, state, subject. */
export function renderHistoryText(rows: readonly HistoryRow[]): string {
  const header = ["INSTANCE", "GEN", "REVISION", "TIME", "HASH", "STATE", "ATTEMPT", "SUBJECT"];
  const table = rows.map((row) => [
    row.instanceKey,
    String(row.generation),
    row.revision.sha.slice(0, 12),
    row.createdAt.replace(/\.\d{3}Z$/, "Z"),
    row.hash.replace(/^sha256:/, "").slice(0, 12),
    row.current ? "current" : row.retiredAt ? "retired" : "",
    row.attempt
      ? `${row.attempt.outcome}${row.attempt.failureClass ? `/${row.attempt.failureClass}` : ""} ${row.attempt.correlationId}`
      : "-",
    row.revision.message.split("\n", 1)[0] ?? "",
  ]);
  const widths = header.map((title, i) => Math.max(title.length, ...table.map((cells) => cells[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return `${[line(header), ...table.map(line)].join("\n")}\n`;
}
