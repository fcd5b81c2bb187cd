/**
 * A repository large enough to be analysed on two threads gives exactly the diagnostics and counts of
 * the one-thread path: the built process (which uses the worker) against main() run from the sources
 * (which cannot start the worker and analyses everything itself).
 */
import { availableParallelism, loadavg } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PARALLEL_MIN_FILES, secondThreadPays } from "../../src/model/analyze.js";
import { runBin, runCli } from "../helpers/cli.js";
import { nodeYaml, tempRepo } from "../helpers/repo.js";

function largeRepo(): string {
  const files: Record<string, string> = {};
  for (let n = 0; n < 20; n++)
    files[`nodes/node-${n}.yaml`] = nodeYaml(`node-${n}`, {
      labels: { pool: `p${n % 4}` },
      vars: { port: `${9000 + n}` },
    });
  for (let a = 0; a < PARALLEL_MIN_FILES + 500; a++) {
    const mistake = a % 397 === 0 ? '    mdoe: "0644"\n' : a % 499 === 0 ? "    path: relative/x\n" : "";
    files[`assignments/app-${String(a).padStart(5, "0")}.yaml`] = `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: app-${a}
spec:
  ${a % 2 ? `nodes: [node-${a % 20}]` : `selector: {matchLabels: {pool: p${a % 4}}}`}
  resources:
  - kind: file
    path: /srv/app-${a}/config
    content: "port \${node.vars.port}"
${mistake}`;
  }
  files["assignments/broken.yaml"] = "a: [\n";
  // Analysed while the files are read, not by either thread's chunks.
  files["assignments/huge.yaml"] = `note: ${"x".repeat(1024 * 1024)}\n`;
  return tempRepo(files);
}

describe("validate - large repositories", () => {
  // The built process inherits this: it starts the second thread whatever the machine's load.
  beforeAll(() => {
    process.env.STEWARD_ANALYSIS_THREADS = "2";
  });
  afterAll(() => {
    delete process.env.STEWARD_ANALYSIS_THREADS;
  });

  it("validate - a second thread is started when told, or when a core is to spare", () => {
    expect(secondThreadPays({ STEWARD_ANALYSIS_THREADS: "2" })).toBe(true);
    expect(secondThreadPays({ STEWARD_ANALYSIS_THREADS: "1" })).toBe(false);
    expect(secondThreadPays({})).toBe(
      availableParallelism() > 1 && loadavg()[0]! < availableParallelism() - 0.5,
    );
  });

  it("validate - two threads and one thread report the same diagnostics and counts", async () => {
    const dir = largeRepo();
    const inProcess = await runCli(["validate", dir, "--format", "json"]);
    const built = runBin(["validate", dir, "--format", "json"]);
    expect(built.stderr).toBe("");
    expect(built.code).toBe(1);
    expect(inProcess.code).toBe(1);
    const output = JSON.parse(built.stdout) as {
      files: number;
      diagnostics: { code: string; file: string }[];
    };
    expect(JSON.parse(inProcess.stdout)).toEqual(output);
    expect(output.files).toBe(20 + PARALLEL_MIN_FILES + 502);
    expect(output.diagnostics.map((d) => d.code)).toContain("yaml/syntax");
    expect(output.diagnostics).toContainEqual(
      expect.objectContaining({ code: "file/too-large", file: "assignments/huge.yaml" }),
    );
    expect(output.diagnostics.filter((d) => d.code === "schema/unknown-field")).toHaveLength(
      Math.ceil((PARALLEL_MIN_FILES + 500) / 397),
    );
    // Source lines and carets too: files analysed on the other thread are read again for them.
    const text = runBin(["validate", dir]);
    expect(text.stdout).toBe((await runCli(["validate", dir])).stdout);
    expect(text.stdout).toContain('unknown field `mdoe` (did you mean "mode"?)');
    expect(text.stdout).toContain('\n   11 |     mdoe: "0644"\n      |     ^\n');
    // The last files are among those reported: nothing claimed by either thread was lost.
    expect(output.diagnostics.some((d) => d.file === "assignments/app-02382.yaml")).toBe(true);
  });
});
