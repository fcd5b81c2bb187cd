/**
 * Diagnostics: what is wrong with a fleet repository, where, and how to fix it. Formatted like a
 * compiler (text), as GitHub workflow annotations, or as JSON.
 */

export type Severity = "error" | "warning";

/** One finding about the repository, pointing at file:line:column (1-based; 0 = the whole file). */
export interface Diagnostic {
  severity: Severity;
  /** Stable rule id, e.g. `yaml/syntax`, `schema/pattern`, `node/undeclared`. */
  code: string;
  /** Path relative to the repository root, with `/` separators. */
  file: string;
  line: number;
  column: number;
  message: string;
  /** How to fix it, as an imperative sentence. */
  fix?: string;
}

/** Orders diagnostics by file, line and column so output is stable. */
export function sortDiagnostics(list: Diagnostic[]): Diagnostic[] {
  return [...list].sort(
    (a, b) =>
      (a.file < b.file ? -1 : a.file > b.file ? 1 : 0) ||
      a.line - b.line ||
      a.column - b.column ||
      (a.code < b.code ? -1 : 1),
  );
}

export function hasErrors(list: readonly Diagnostic[]): boolean {
  return list.some((d) => d.severity === "error");
}

function location(d: Diagnostic): string {
  if (d.line <= 0) return d.file;
  return `${d.file}:${d.line}:${d.column}`;
}

/**
 * Compiler-style text: `file:line:col: error: message [code]`, the source line with a caret under
 * the column, and the fix. `readLine` returns the text of a line of a file when it is known.
 */
export function formatText(
  list: readonly Diagnostic[],
  readLine?: (file: string, line: number) => string | undefined,
): string {
  const out: string[] = [];
  for (const d of list) {
    out.push(`${location(d)}: ${d.severity}: ${d.message} [${d.code}]`);
    const text = d.line > 0 ? readLine?.(d.file, d.line) : undefined;
    if (text !== undefined) {
      const gutter = String(d.line).padStart(5);
      const shown = text.length > 160 ? `${text.slice(0, 157)}...` : text;
      out.push(`${gutter} | ${shown}`);
      if (d.column > 0 && d.column <= 160) out.push(`${" ".repeat(5)} | ${" ".repeat(d.column - 1)}^`);
    }
    if (d.fix) out.push(`      fix: ${d.fix}`);
  }
  return out.join("\n");
}

/** Escapes a value for a GitHub workflow command (`::error file=...::message`). */
function escapeData(value: string): string {
  return value.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
}

function escapeProperty(value: string): string {
  return escapeData(value).replace(/:/g, "%3A").replace(/,/g, "%2C");
}

/**
 * GitHub Actions annotations, one line each, so the pull request shows every finding at its line.
 * `prefix` is prepended to file paths (the fleet repo's path inside the workspace).
 */
export function formatGithub(list: readonly Diagnostic[], prefix = ""): string {
  return list
    .map((d) => {
      const props = [`file=${escapeProperty(prefix + d.file)}`];
      if (d.line > 0) props.push(`line=${d.line}`, `col=${d.column}`);
      props.push(`title=${escapeProperty(`steward ${d.code}`)}`);
      const text = d.fix ? `${d.message}. Fix: ${d.fix}` : d.message;
      return `::${d.severity} ${props.join(",")}::${escapeData(text)}`;
    })
    .join("\n");
}

/** `1 node`, `2 nodes`. */
export function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/** A one-line summary: `2 errors, 1 warning in 3 files`. */
export function summarize(list: readonly Diagnostic[], filesRead: number): string {
  const errors = list.filter((d) => d.severity === "error").length;
  const warnings = list.length - errors;
  return `${plural(errors, "error")}, ${plural(warnings, "warning")} in ${plural(filesRead, "file")}`;
}
