/**
 * Generated code cannot drift from the schemas: `gen-types --check` passes on the committed files and
 * fails as soon as a schema changes without regenerating.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/cli.js";

const scratch = mkdtempSync(join(tmpdir(), "steward-gen-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function check(root: string) {
  return spawnSync(process.execPath, [join(root, "scripts/gen-types.mjs"), "--check"], { encoding: "utf8" });
}

describe("generated types - drift", () => {
  it("generated types - the committed types, schema modules and validators match schemas/", () => {
    const run = check(repoRoot);
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
  });

  it("generated types - --check fails and names the stale file when a schema changes", () => {
    mkdirSync(join(scratch, "src/model"), { recursive: true });
    cpSync(join(repoRoot, "scripts"), join(scratch, "scripts"), { recursive: true });
    cpSync(join(repoRoot, "schemas"), join(scratch, "schemas"), { recursive: true });
    for (const file of ["generated.ts", "schemas.generated.ts", "validators.generated.ts"])
      cpSync(join(repoRoot, "src/model", file), join(scratch, "src/model", file));
    symlinkSync(join(repoRoot, "node_modules"), join(scratch, "node_modules"));

    const schemaFile = join(scratch, "schemas/steward.schema.json");
    const schema = JSON.parse(readFileSync(schemaFile, "utf8"));
    schema.$defs.NodeSpec.properties.region = { type: "string" };
    writeFileSync(schemaFile, JSON.stringify(schema, null, 2));
    const run = check(scratch);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("generated.ts is stale: run `npm run gen:types`");
  });
});
