/**
 * The corpus of broken fleet repositories (test/fixtures/broken/<case>/): each holds one mistake, and
 * `steward validate` must report exactly that mistake at its file:line:column with its rule code —
 * no crash, no cascade of follow-on errors — and exit 1 (0 when the mistake is only a warning).
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Diagnostic } from "../../src/model/diagnostics.js";
import { MAX_YAML_BYTES } from "../../src/model/yaml.js";
import { repoRoot, runBin, runCli } from "../helpers/cli.js";

const fixtures = join(repoRoot, "test/fixtures/broken");

type Expected = [file: string, line: number, column: number, code: string, severity?: "warning"];

/** Case directory → the one diagnostic it must produce. */
const corpus: Record<string, Expected> = {
  "alias-bomb": ["assignments/lol.yaml", 1, 1, "yaml/aliases"],
  "bad-duration": ["assignments/web.yaml", 13, 13, "schema/pattern"],
  "bad-enum": ["nodes/web-1.yaml", 8, 14, "schema/enum"],
  "bad-max-in-flight": ["assignments/web.yaml", 12, 18, "schema/invalid"],
  "binary-file": ["nodes/blob.yaml", 2, 9, "file/binary"],
  "canary-not-placed": ["assignments/web.yaml", 13, 15, "rollout/canary-node"],
  "content-and-source": ["assignments/web.yaml", 8, 7, "schema/exclusive"],
  "depends-on-cycle-assignments": ["assignments/api.yaml", 7, 14, "depends-on/cycle"],
  "depends-on-cycle-resources": ["assignments/web.yaml", 11, 18, "depends-on/cycle"],
  "depends-on-not-placed": ["assignments/web.yaml", 7, 15, "depends-on/not-placed", "warning"],
  "depends-on-unknown": ["assignments/web.yaml", 7, 15, "depends-on/unknown"],
  "document-is-list": ["assignments/web.yaml", 1, 1, "document/not-a-mapping"],
  "dot-dot-path": ["assignments/web.yaml", 9, 13, "path/dot-segments"],
  "duplicate-assignment": ["assignments/web.yaml", 4, 9, "name/duplicate"],
  "duplicate-key": ["assignments/web.yaml", 11, 7, "yaml/duplicate-key"],
  "duplicate-node": ["nodes/web-1.yaml", 4, 9, "name/duplicate"],
  "duplicate-probe-name": ["assignments/web.yaml", 16, 13, "probe/duplicate"],
  "duplicate-resource-name": ["assignments/web.yaml", 13, 13, "resource/duplicate"],
  "empty-file": ["nodes/empty.yaml", 1, 1, "file/empty"],
  "fleet-outside-steward-yaml": ["fleet.yaml", 2, 7, "fleet/location"],
  "image-without-registry-format": ["assignments/web.yaml", 10, 14, "schema/pattern"],
  "invalid-name": ["assignments/web.yaml", 4, 9, "schema/pattern"],
  "missing-api-version": ["assignments/web.yaml", 2, 1, "document/api-version"],
  "missing-required-field": ["nodes/web-1.yaml", 7, 1, "schema/required"],
  "missing-source": ["assignments/web.yaml", 10, 15, "source/missing"],
  "mode-as-number": ["assignments/web.yaml", 10, 13, "schema/type"],
  "no-placement": ["assignments/web.yaml", 5, 1, "schema/required"],
  "non-utf8": ["nodes/web-2.yaml", 7, 8, "file/encoding"],
  "outside-roots": ["assignments/web.yaml", 9, 13, "path/outside-roots"],
  "relative-path": ["assignments/web.yaml", 9, 13, "schema/pattern"],
  "resource-depends-on-unknown": ["assignments/web.yaml", 14, 19, "depends-on/unknown"],
  "restart-on-unknown": ["assignments/web.yaml", 15, 19, "restart-on/unknown"],
  "root-with-dot-segments": ["nodes/web-1.yaml", 9, 17, "path/dot-segments"],
  "same-path-one-assignment": ["assignments/web.yaml", 11, 7, "resource/conflict"],
  "same-path-two-assignments": ["assignments/b-site.yaml", 10, 7, "resource/conflict"],
  "second-document-invalid": ["nodes/web-2.yaml", 19, 3, "schema/unknown-field"],
  "selector-no-match": ["assignments/web.yaml", 8, 7, "selector/no-match", "warning"],
  "source-dot-dot": ["assignments/web.yaml", 10, 15, "source/path"],
  "ssh-without-ssh": ["nodes/web-1.yaml", 8, 14, "node/ssh-missing"],
  "symlink-target-outside-roots": ["assignments/web.yaml", 10, 15, "path/outside-roots"],
  "template-undefined": ["assignments/web.yaml", 10, 16, "template/undefined"],
  "template-unknown-variable": ["assignments/web.yaml", 10, 16, "template/undefined"],
  "two-fleet-documents": ["steward.yaml", 9, 7, "fleet/duplicate"],
  "undeclared-node": ["assignments/web.yaml", 6, 18, "node/undeclared"],
  "unknown-api-version": ["assignments/web.yaml", 1, 13, "document/api-version"],
  "unknown-field": ["assignments/web.yaml", 10, 7, "schema/unknown-field"],
  "unknown-kind": ["assignments/web.yaml", 2, 7, "document/kind"],
  "unknown-resource-kind": ["assignments/web.yaml", 8, 13, "schema/enum"],
  utf16: ["nodes/web-2.yaml", 1, 1, "file/encoding"],
  "yaml-syntax": ["assignments/web.yaml", 7, 3, "yaml/syntax"],
  "yaml-tab-indent": ["assignments/web.yaml", 4, 1, "yaml/syntax"],
};

/** Messages that must name the likely intended value. */
const suggestions: Record<string, string> = {
  "bad-enum": 'did you mean "ssh"?',
  "unknown-kind": 'did you mean "Assignment"?',
  "unknown-field": 'did you mean "mode"?',
  "unknown-resource-kind": 'did you mean "file"?',
  "undeclared-node": 'did you mean "web-1"?',
  "resource-depends-on-unknown": 'did you mean "web-dir"?',
  "restart-on-unknown": 'did you mean "config"?',
};

interface JsonOutput {
  valid: boolean;
  diagnostics: Diagnostic[];
}

function located(d: Diagnostic): Expected {
  return d.severity === "warning"
    ? [d.file, d.line, d.column, d.code, "warning"]
    : [d.file, d.line, d.column, d.code];
}

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A copy of the `undeclared-node` case's node in a temp dir, plus `files`, for generated cases. */
function generatedRepo(files: Record<string, string | Uint8Array>): string {
  const dir = mkdtempSync(join(tmpdir(), "steward-broken-"));
  scratch.push(dir);
  cpSync(join(fixtures, "undeclared-node/nodes"), join(dir, "nodes"), { recursive: true });
  for (const [path, content] of Object.entries(files)) writeFileSync(join(dir, path), content);
  return dir;
}

describe("validate - broken repositories", () => {
  it("validate - the corpus has at least 30 distinct mistakes", () => {
    expect(Object.keys(corpus).length).toBeGreaterThanOrEqual(30);
    expect(new Set(Object.values(corpus).map((e) => e[3])).size).toBeGreaterThanOrEqual(20);
  });

  it.each(Object.entries(corpus))(
    "validate - %s is reported at its file:line:column",
    async (name, expected) => {
      const run = await runCli(["validate", join(fixtures, name), "--format", "json"]);
      expect(run.stderr).toBe("");
      const output = JSON.parse(run.stdout) as JsonOutput;
      expect(output.diagnostics.map(located)).toEqual([expected]);
      expect(run.code).toBe(expected[4] === "warning" ? 0 : 1);
      expect(output.valid).toBe(expected[4] === "warning");
      const diagnostic = output.diagnostics[0]!;
      expect(diagnostic.message.length).toBeGreaterThan(10);
      expect(diagnostic.fix, `${name} says how to fix it`).toBeTruthy();
      if (suggestions[name]) expect(diagnostic.message).toContain(suggestions[name]);
    },
  );

  it("validate - a file over the size limit is refused without being parsed", async () => {
    const huge = `# ${"x".repeat(MAX_YAML_BYTES)}\napiVersion: steward.dev/v1\n`;
    const dir = generatedRepo({ "nodes/huge.yaml": huge });
    const run = await runCli(["validate", dir, "--format", "json"]);
    expect(run.code).toBe(1);
    expect((JSON.parse(run.stdout) as JsonOutput).diagnostics.map(located)).toEqual([
      ["nodes/huge.yaml", 1, 1, "file/too-large"],
    ]);
  });

  it("validate - nesting deep enough to exhaust the parser's stack is a diagnostic, not a crash", async () => {
    const dir = generatedRepo({ "nodes/deep.yaml": `a: ${"[".repeat(200_000)}${"]".repeat(200_000)}\n` });
    const run = await runCli(["validate", dir, "--format", "json"]);
    expect(run.code).toBe(1);
    expect((JSON.parse(run.stdout) as JsonOutput).diagnostics.map(located)).toEqual([
      ["nodes/deep.yaml", 1, 1, "yaml/too-deep"],
    ]);
  });

  it.each([
    [
      "undeclared-node",
      'assignments/web.yaml:6:18: error: node "web-2" is not declared (did you mean "web-1"?)',
    ],
    ["yaml-syntax", "assignments/web.yaml:7:3: error: "],
    ["binary-file", "nodes/blob.yaml:2:9: error: file contains a NUL byte"],
    ["mode-as-number", 'fix: quote it: mode: "0644" (YAML reads 0644 as the number 644)'],
  ])("validate - the built bin/steward.js process reports %s and exits 1", (name, line) => {
    const run = runBin(["validate", join(fixtures, name)]);
    expect(run.stderr).toBe("");
    expect(run.stdout).toContain(line);
    expect(run.stdout).toMatch(/^invalid: 1 error, 0 warnings in \d+ files?$/m);
    expect(run.code).toBe(1);
  });
});
