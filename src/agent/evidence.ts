import { errorLine } from "../model/error-line.js";

/**
 * Evidence is bounded: the last lines of what a process printed, never a whole log. The line that
 * names the error (see errorLine) is kept even when it falls before them — a Node crash prints a
 * dozen frames after it — followed by `…` where lines were left out.
 */
export function tail(text: string, maxLines = 20, maxChars = 2000): string {
  const trimmed = text.replace(/\s+$/, "");
  const lines = trimmed.split("\n");
  let out = lines.slice(-maxLines).join("\n");
  if (out.length > maxChars) out = `…${out.slice(out.length - maxChars + 1)}`;
  const named = errorLine(trimmed);
  if (named && !out.includes(named)) {
    const kept = lines.slice(-(maxLines - 2)).join("\n");
    const room = Math.max(0, maxChars - named.length - 3);
    out = `${named.slice(0, maxChars)}\n…\n${kept.length > room ? kept.slice(kept.length - room) : kept}`;
  }
  return out;
}

/** Standard output and error of a run, labelled, each bounded. */
export function runEvidence(result: {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}): string {
  const parts = [result.signal ? `killed by ${result.signal}` : `exit code ${result.exitCode}`];
  if (result.stdout.trim()) parts.push(`stdout:\n${tail(result.stdout, 10, 1000)}`);
  if (result.stderr.trim()) parts.push(`stderr:\n${tail(result.stderr, 10, 1000)}`);
  return parts.join("\n");
}
