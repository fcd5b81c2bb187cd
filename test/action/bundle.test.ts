import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ACTION_INPUTS } from "../../src/action/context.js";
import { ACTION_OUTPUTS } from "../../src/action/run.js";
import { removeTempDirs, tempDir } from "../helpers/git.js";
import { ENTRY, GITHUB_TOKEN_EXPRESSION, manifest } from "./harness.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

afterAll(removeTempDirs);

/** The build script run with --check: its exit, stderr and esbuild's input graph. */
let check: { status: number | null; stderr: string; inputs: string[] };

beforeAll(() => {
  const metafile = join(tempDir("steward-bundle-"), "meta.json");
  const result = spawnSync(
    process.execPath,
    ["scripts/build-action.mjs", "--check", "--metafile", metafile],
    {
      cwd: root,
      encoding: "utf8",
    },
  );
  const meta = JSON.parse(readFileSync(metafile, "utf8")) as { inputs: Record<string, unknown> };
  check = { status: result.status, stderr: result.stderr, inputs: Object.keys(meta.inputs) };
});

describe("action bundle", () => {
  it("action bundle - the committed action/dist/index.mjs is the build of the sources (npm run build:action)", () => {
    expect(check.stderr).toBe("");
    expect(check.status).toBe(0);
  });

  it("action bundle - the import graph holds neither better-sqlite3 nor ssh2, and reuses the CLI's loader and plan", () => {
    const native = check.inputs.filter((path) =>
      /(^|\/)node_modules\/(better-sqlite3|ssh2|cpu-features|bindings|nan)\//.test(path),
    );
    expect(native).toEqual([]);
    expect(check.inputs.filter((path) => path.endsWith(".node"))).toEqual([]);
    expect(check.inputs).toEqual(
      expect.arrayContaining([
        "src/action/index.ts",
        "src/model/load.ts",
        "src/repo/plan.ts",
        "src/repo/plan-render.ts",
        "src/repo/plan-revisions.ts",
      ]),
    );
    // Nothing of the hub's store or transports either.
    expect(check.inputs.filter((path) => /^src\/(hub\/store|transport|agent)\//.test(path))).toEqual([]);
  });

  it("action bundle - action.yml runs the bundle with node and declares the inputs and outputs the code uses", () => {
    const action = manifest();
    expect(action.runs.using).toMatch(/^node(20|24)$/);
    expect(join(root, action.runs.main)).toBe(ENTRY);
    expect(existsSync(ENTRY)).toBe(true);
    expect(Object.keys(action.inputs).sort()).toEqual([...ACTION_INPUTS].sort());
    expect(Object.keys(action.outputs).sort()).toEqual([...ACTION_OUTPUTS].sort());
    expect(action.inputs["github-token"]?.default).toBe(GITHUB_TOKEN_EXPRESSION);
  });
});
