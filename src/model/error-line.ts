/**
 * The one line of a process's output that says what went wrong, for places that have room for one
 * line (`steward up`'s failure lines, a commit status's description, a table cell).
 *
 * The rule:
 *  1. the first line that names an error: it starts (after an optional `Uncaught `) with an error's
 *     name and a colon — `Error:`, `TypeError:`, `ValueError:`, `java.io.IOException:`,
 *     `RangeError [ERR_X]:` — or with `error:`, `fatal:`, `panic:` or `E:` (git, apt, Go, compilers);
 *  2. else the last line that is not a stack frame and not the runtime's decoration: frames are
 *     indented (Node's `    at ...`, Python's `  File "...", line 3`, Go's tab), decoration is a
 *     blank line, a line of punctuation (`^`, `}`), Node's `node:events:502` and `Node.js v20.1.0`,
 *     Python's `Traceback (most recent call last):`, and the labels `stdout:` and `stderr:` of
 *     steward's own evidence.
 *
 * Rule 1 comes first because runtimes print their own first lines before the error (Node's
 * `node:events:502` and the source line it threw at); rule 2 finds what a shell script or a tool
 * printed last before it gave up (`cat: /x: No such file or directory` under `set -e`).
 */

const NAMES_AN_ERROR =
  /^(?:Uncaught\s+)?(?:[A-Za-z_$][\w$]*\.)*(?:[A-Z][\w$]*)?(?:Error|Exception)(?:\s*\[[^\]]*\])?:\s*\S|^(?:error|fatal|panic|E)(?:\[[^\]]*\])?:\s*\S/;

const DECORATION = [
  /^\s*$/,
  /^\s/,
  /^[\s^~}{)(\][,;.-]+$/,
  /^node:[\w/]+:\d+$/,
  /^\[eval\]:\d+$/,
  /^Node\.js v\d/,
  /^Traceback \(most recent call last\):$/,
  /^(?:stdout|stderr):$/,
];

/** The line of `text` that names the error (see the module's rule), trimmed; undefined when there is none. */
export function errorLine(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const lines = text.split(/\r?\n/);
  const named = lines.find((line) => NAMES_AN_ERROR.test(line.trim()) && !/^\s/.test(line));
  if (named) return named.trim();
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!;
    if (!DECORATION.some((pattern) => pattern.test(line))) return line.trim();
  }
  return undefined;
}
