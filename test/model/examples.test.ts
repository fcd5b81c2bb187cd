/** The example fleet (examples/repo) is what the quick start runs: it must be valid and show every feature. */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import type { Assignment } from "../../src/model/generated.js";
import { analyzeFile, directorySource, loadRepo } from "../../src/model/load.js";
import { repoRoot } from "../helpers/cli.js";

const exampleRoot = join(repoRoot, "examples/repo");

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.ya?ml$/.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name));
}

describe("examples - the example fleet", () => {
  it("examples - the repository validates with no error and no warning", async () => {
    const result = await loadRepo(directorySource(exampleRoot));
    expect(result.diagnostics).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.desired!.nodes.size).toBeGreaterThanOrEqual(4);
    expect(result.desired!.assignments.size).toBeGreaterThanOrEqual(5);
  });

  it("examples - every YAML file is a valid steward document on its own, with the editor schema line", () => {
    const files = yamlFiles(exampleRoot);
    expect(files.length).toBeGreaterThanOrEqual(10);
    for (const file of files) {
      const bytes = readFileSync(file);
      const analysis = analyzeFile(bytes);
      expect(analysis.parsed.problems, file).toEqual([]);
      for (const doc of analysis.documents) expect(doc.findings, file).toEqual([]);
      const schemaLine = /^# yaml-language-server: \$schema=(\S+)$/m.exec(bytes.toString("utf8"));
      expect(schemaLine, `${file} has a $schema line`).not.toBeNull();
      expect(relative(repoRoot, join(file, "..", schemaLine![1]!))).toBe("schemas/steward.schema.json");
    }
  });

  it("examples - it uses every resource kind, every probe kind, a selector, a canary, a gating command and an atomic group", async () => {
    const { desired } = await loadRepo(directorySource(exampleRoot));
    const assignments = [...desired!.assignments.values()].map((doc) => doc.value as Assignment);
    const resources = assignments.flatMap((a) => a.spec.resources);
    expect(new Set(resources.map((r) => r.kind))).toEqual(
      new Set(["file", "directory", "symlink", "command", "service", "systemd-unit", "container", "package"]),
    );
    expect(new Set(assignments.flatMap((a) => a.spec.probes ?? []).map((p) => p.kind))).toEqual(
      new Set(["http", "tcp", "command"]),
    );
    expect(assignments.some((a) => a.spec.selector)).toBe(true);
    expect(assignments.some((a) => a.spec.rollout?.canary)).toBe(true);
    expect(resources.some((r) => r.kind === "command" && r.gating)).toBe(true);
    expect(resources.filter((r) => r.atomic).length).toBeGreaterThanOrEqual(2);
    const labelled = [...desired!.nodes.values()].filter(
      (n) => Object.keys(n.value.metadata.labels ?? {}).length,
    );
    expect(labelled.length).toBe(desired!.nodes.size);
  });

  it("examples - containers and systemd units land only on nodes the local demo does not drive", async () => {
    const { desired } = await loadRepo(directorySource(exampleRoot));
    const needsHost = [...desired!.instances.values()].filter((i) =>
      i.spec.resources.some((r) => r.kind === "container" || r.kind === "systemd-unit"),
    );
    expect(needsHost.length).toBeGreaterThan(0);
    for (const instance of needsHost)
      expect(desired!.nodes.get(instance.node)!.value.spec.transport, instance.key).not.toBe("local");
    const local = [...desired!.instances.values()].filter(
      (i) => desired!.nodes.get(i.node)!.value.spec.transport === "local",
    );
    expect(local.length).toBeGreaterThan(0);
  });
});
