/**
 * Loading a repository: which files are documents (`ignore:` globs in steward.yaml, dot-directories,
 * files used as `source:`), and that a loader failure is a diagnostic, never an exception.
 */
import { describe, expect, it } from "vitest";
import { directorySource, type LoadResult, loadRepo, type RepoSource } from "../../src/model/load.js";
import { nodeYaml, tempRepo } from "../helpers/repo.js";

const fleetYaml = (ignore: string[], extra = "") => `apiVersion: steward.dev/v1
kind: Fleet
metadata:
  name: test
spec:
  ignore: ${JSON.stringify(ignore)}
${extra}`;

function located(result: LoadResult): string[] {
  return result.diagnostics.map((d) => `${d.file}:${d.line}:${d.column} ${d.code}`);
}

describe("load - which files are fleet documents", () => {
  it("load - files matching steward.yaml's ignore globs are not read as documents; others still are", async () => {
    const dir = tempRepo({
      "steward.yaml": fleetYaml(["docs/**", "**/*.k8s.yaml"]),
      "nodes/web-1.yaml": nodeYaml("web-1"),
      "docs/broken.yaml": "this: [is not\n",
      "docs/deep/notes.yml": "- just a list\n",
      "deploy/app.k8s.yaml": "apiVersion: apps/v1\nkind: Deployment\n",
      "deploy/app.yaml": "apiVersion: apps/v1\nkind: Deployment\n",
    });
    const result = await loadRepo(directorySource(dir));
    expect(located(result)).toEqual(["deploy/app.yaml:1:13 document/api-version"]);
    expect(result.diagnostics[0]!.message).toBe('unknown apiVersion "apps/v1"');
    expect(result.filesRead).toBe(3);
  });

  it("load - ignore globs apply even when steward.yaml has another error", async () => {
    const dir = tempRepo({
      "steward.yaml": fleetYaml(["docs/**"], "  mode: dry-run\n"),
      "docs/broken.yaml": "this: [is not\n",
    });
    const result = await loadRepo(directorySource(dir));
    expect(located(result)).toEqual(["steward.yaml:7:9 schema/enum"]);
  });

  it("load - dot-directories and dot-files are skipped; .yml files are read", async () => {
    const dir = tempRepo({
      ".github/workflows/ci.yaml": "on: push\n",
      ".pre-commit-config.yaml": "repos: []\n",
      "nodes/.draft.yaml": "not: steward\n",
      "nodes/web-1.yml": nodeYaml("web-1"),
    });
    const result = await loadRepo(directorySource(dir));
    expect(result.diagnostics).toEqual([]);
    expect(result.filesRead).toBe(1);
    expect([...result.desired!.nodes.keys()]).toEqual(["web-1"]);
  });

  it("load - a YAML file used as a source: is content, not a document", async () => {
    const dir = tempRepo({
      "nodes/web-1.yaml": nodeYaml("web-1"),
      "files/app.yaml": "listen: 8080\nworkers: [a, b]\n",
      "assignments/app.yaml": `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: app
spec:
  nodes: [web-1]
  resources:
    - kind: file
      path: /srv/app.yaml
      source: files/app.yaml
`,
    });
    const result = await loadRepo(directorySource(dir));
    expect(result.diagnostics).toEqual([]);
    expect(result.desired!.instances.get("app@web-1")!.spec.resources[0]).toMatchObject({
      content: "listen: 8080\nworkers: [a, b]\n",
    });
  });

  it("load - a file that cannot be read is a diagnostic, and loading goes on", async () => {
    const source: RepoSource = {
      files: () => [{ path: "nodes/web-1.yaml" }, { path: "nodes/web-2.yaml" }],
      read: (file) => {
        if (file.path === "nodes/web-2.yaml")
          throw Object.assign(new Error("permission denied"), { code: "EACCES" });
        return Buffer.from(nodeYaml("web-1"));
      },
    };
    const result = await loadRepo(source);
    expect(result.ok).toBe(false);
    expect(result.diagnostics).toMatchObject([
      {
        file: "nodes/web-2.yaml",
        line: 1,
        column: 1,
        code: "file/unreadable",
        message: "file cannot be read (EACCES)",
      },
    ]);
  });

  it("load - an empty repository is valid and has no instances", async () => {
    const result = await loadRepo(directorySource(tempRepo()));
    expect(result.ok).toBe(true);
    expect(result.desired!.instances.size).toBe(0);
  });
});
