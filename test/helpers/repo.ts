/** Temporary fleet repositories for tests: real files in a temp directory, removed after the file's tests. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll } from "vitest";

/** Writes `files` (path → content) into `dir`, creating directories. */
export function writeFiles(dir: string, files: Record<string, string | Uint8Array>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
}

/** A new temp directory holding `files`; every such directory is removed after the test file. */
export function tempRepo(files: Record<string, string | Uint8Array> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "steward-test-"));
  created.push(dir);
  writeFiles(dir, files);
  return dir;
}

const created: string[] = [];
afterAll(() => {
  for (const dir of created.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A Node document. */
export function nodeYaml(
  name: string,
  options: { labels?: Record<string, string>; roots?: string[]; vars?: Record<string, string> } = {},
): string {
  const labels = Object.entries(options.labels ?? {})
    .map(([k, v]) => `\n    ${k}: ${JSON.stringify(v)}`)
    .join("");
  const vars = Object.entries(options.vars ?? {})
    .map(([k, v]) => `\n    ${k}: ${JSON.stringify(v)}`)
    .join("");
  return `apiVersion: steward.dev/v1
kind: Node
metadata:
  name: ${name}${labels ? `\n  labels:${labels}` : ""}
spec:
  transport: local
  roots: [${(options.roots ?? ["/srv"]).join(", ")}]${vars ? `\n  vars:${vars}` : ""}
`;
}
