/**
 * `steward validate` output formats and exit codes: compiler-style text with the source line and a
 * caret, GitHub workflow annotations, JSON (also through the global --json), and 0/1/2.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Diagnostic } from "../../src/model/diagnostics.js";
import { repoRoot, runBin, runCli } from "../helpers/cli.js";

const broken = (name: string) => join(repoRoot, "test/fixtures/broken", name);
const example = join(repoRoot, "examples/repo");

describe("validate - output", () => {
  it("validate - text shows file:line:column, the source line, a caret under the column and the fix", async () => {
    const run = await runCli(["validate", broken("undeclared-node")]);
    expect(run.code).toBe(1);
    expect(run.stdout.split("\n").slice(0, 4)).toEqual([
      'assignments/web.yaml:6:18: error: node "web-2" is not declared (did you mean "web-1"?) [node/undeclared]',
      "    6 |   nodes: [web-1, web-2]",
      "      |                  ^",
      '      fix: add a Node document named "web-2" (e.g. nodes/web-2.yaml) or fix spec.nodes',
    ]);
    expect(run.stdout).toContain("invalid: 1 error, 0 warnings in 2 files");
  });

  it("validate - a relative PATH is resolved against the working directory", async () => {
    const run = await runCli(["validate", "broken/undeclared-node"], join(repoRoot, "test/fixtures"));
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("assignments/web.yaml:6:18: error:");
  });

  it("validate - github format prints one workflow annotation per diagnostic", async () => {
    const run = await runCli(["validate", broken("undeclared-node"), "--format", "github"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe(
      "::error file=assignments/web.yaml,line=6,col=18,title=steward node/undeclared::" +
        'node "web-2" is not declared (did you mean "web-1"?). Fix: add a Node document named "web-2" ' +
        "(e.g. nodes/web-2.yaml) or fix spec.nodes\n",
    );
  });

  it("validate - github format writes warnings as ::warning and escapes newlines and percent signs", async () => {
    const run = await runCli(["validate", broken("selector-no-match"), "--format", "github"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^::warning file=assignments\/web\.yaml,line=8,col=7,title=steward selector\/no-match::/,
    );
    const { formatGithub } = await import("../../src/model/diagnostics.js");
    expect(
      formatGithub([
        { severity: "error", code: "x/y", file: "a,b.yaml", line: 1, column: 2, message: "50% done\nnext" },
      ]),
    ).toBe("::error file=a%2Cb.yaml,line=1,col=2,title=steward x/y::50%25 done%0Anext");
  });

  it("validate - json format prints the diagnostics list with counts", async () => {
    const run = await runCli(["validate", broken("mode-as-number"), "--format", "json"]);
    expect(run.code).toBe(1);
    const output = JSON.parse(run.stdout) as { valid: boolean; files: number; diagnostics: Diagnostic[] };
    expect(output.valid).toBe(false);
    expect(output.files).toBe(2);
    expect(output.diagnostics).toEqual([
      {
        severity: "error",
        code: "schema/type",
        file: "assignments/web.yaml",
        line: 10,
        column: 13,
        message: "spec.resources[0].mode must be a string (got number 644)",
        fix: 'quote it: mode: "0644" (YAML reads 0644 as the number 644)',
      },
    ]);
  });

  it("validate - the global --json flag selects JSON, before or after the command", async () => {
    for (const argv of [
      ["--json", "validate", example],
      ["validate", example, "--json"],
    ]) {
      const run = await runCli(argv);
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({
        valid: true,
        files: 11,
        nodes: 5,
        assignments: 5,
        instances: 11,
        diagnostics: [],
      });
    }
  });

  it("validate - the example repository is valid: exit 0 and a one-line summary", async () => {
    const run = await runCli(["validate", example]);
    expect(run.stdout).toBe(
      "valid: 5 nodes, 5 assignments, 11 instances (0 errors, 0 warnings in 11 files)\n",
    );
    expect(run.code).toBe(0);
  });

  it("validate - a warning alone keeps exit 0 and is printed", async () => {
    const run = await runCli(["validate", broken("selector-no-match")]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      'assignments/web.yaml:8:7: warning: selector of assignment "web" matches no node',
    );
    expect(run.stdout).toContain("valid: 1 node, 1 assignment, 0 instances (0 errors, 1 warning in 2 files)");
  });

  it("validate - a PATH that is not a directory is an environment error: one line, exit 2", async () => {
    const run = await runCli(["validate", join(repoRoot, "package.json")]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe(
      `steward: ${join(repoRoot, "package.json")} is not a directory: give the path of a fleet repository\n`,
    );
  });

  it("validate - usage errors exit 2 without a stack trace", async () => {
    const badFormat = await runCli(["validate", example, "--format", "xml"]);
    expect(badFormat.code).toBe(2);
    expect(badFormat.stderr).toContain("argument 'xml' is invalid. Allowed choices are text, json, github.");
    const unknown = await runCli(["valdate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'valdate'");
    const none = await runCli([]);
    expect(none.code).toBe(2);
    for (const run of [badFormat, unknown, none]) expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it("validate - --help and --version exit 0", async () => {
    const help = await runCli(["validate", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: steward validate [options] [path]");
    expect(help.stdout).toContain("--format <format>");
    const top = await runCli(["--help"]);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/validate \[options\] \[path\]\s+check a fleet repository: YAML/);
    expect((await runCli(["--version"])).stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  it("validate - the built process prints JSON and exits 0 on the example repository", () => {
    const run = runBin(["--json", "validate", "examples/repo"]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ valid: true, instances: 11 });
  });
});
