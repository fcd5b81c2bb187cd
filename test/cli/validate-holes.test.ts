/**
 * `steward validate DIR` on the repositories it once accepted (test/helpers/holes.ts): each is
 * refused with exactly its one diagnostic at file:line:column, naming the fix. Symlinks that stay
 * inside the repository are read as what they lead to, once.
 */
import { afterAll, describe, expect, it } from "vitest";
import type { Diagnostic } from "../../src/model/diagnostics.js";
import { runCli } from "../helpers/cli.js";
import { removeTempDirs, tempDir } from "../helpers/git.js";
import { BROKEN_FLEETS, LINKED_FLEET, VALID_FLEET, writeBroken, writeRepository } from "../helpers/holes.js";

interface JsonOutput {
  valid: boolean;
  nodes: number;
  assignments: number;
  diagnostics: Diagnostic[];
}

afterAll(removeTempDirs);

/** A directory with `files` and `links` (path → target). */
function repository(files: Record<string, string>, links: Record<string, string> = {}): string {
  const dir = tempDir("steward-holes-");
  writeRepository(dir, files, links);
  return dir;
}

async function validate(dir: string): Promise<{ code: number; output: JsonOutput }> {
  const run = await runCli(["validate", dir, "--format", "json"]);
  expect(run.stderr).toBe("");
  return { code: run.code, output: JSON.parse(run.stdout) as JsonOutput };
}

describe("validate - repositories it once accepted", () => {
  it.each(BROKEN_FLEETS.map((broken) => [broken.name, broken] as const))(
    "validate - %s is an error at its file:line:column, naming the fix",
    async (_, broken) => {
      const dir = repository(VALID_FLEET);
      writeBroken(dir, broken, tempDir("steward-outside-"));
      const { code, output } = await validate(dir);
      const { file, line, column, code: rule, message, fix } = broken.expected;
      expect(output.diagnostics.map((d) => [d.file, d.line, d.column, d.code])).toEqual([
        [file, line, column, rule],
      ]);
      const [diagnostic] = output.diagnostics;
      for (const part of message) expect(diagnostic!.message).toContain(part);
      expect(diagnostic!.fix).toContain(fix);
      expect(diagnostic!.severity).toBe("error");
      expect(code).toBe(1);
      expect(output.valid).toBe(false);
    },
  );

  it("validate - the built process prints a symlink's diagnostic at its path, without a stack trace", async () => {
    const dir = repository(VALID_FLEET, { "nodes/passwd.yaml": "/etc/passwd" });
    const run = await runCli(["validate", dir]);
    expect(run.stdout).toContain(
      'nodes/passwd.yaml:1:1: error: symlink "nodes/passwd.yaml" points to "/etc/passwd", outside the repository',
    );
    expect(run.stdout).toContain("fix: put the file itself in the repository in place of the link");
    expect(`${run.stdout}${run.stderr}`).not.toMatch(/\n\s+at /);
    expect(run.code).toBe(1);
  });
});

describe("validate - symlinks that stay inside the repository", () => {
  it("validate - a link is read as what it leads to, and a document reached by several links counts once", async () => {
    const { code, output } = await validate(repository(LINKED_FLEET.files, LINKED_FLEET.links));
    expect(output.diagnostics).toEqual([]);
    expect(code).toBe(0);
    expect(output).toMatchObject({ valid: true, nodes: 2, assignments: 2 });
  });
});
