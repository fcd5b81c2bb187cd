/**
 * What makes a directory a fleet repository (src/repo/fleet-check.ts), on real git repositories:
 * `steward.yaml` at the top, or a steward document in `nodes/` or `assignments/`.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkFleetRepository } from "../../src/repo/fleet-check.js";
import { repoRoot } from "../helpers/cli.js";
import { makeRepo, removeTempDirs, tempDir } from "../helpers/git.js";
import { fleetYaml, nodes } from "../hub/helpers/fleet.js";

afterAll(() => removeTempDirs());

describe("repo - is it a fleet repository", () => {
  it("repo - a fleet is steward.yaml at the top, or steward documents in nodes/ or assignments/", () => {
    const repo = (files: Record<string, string>) => makeRepo({ files }).dir;
    const cases: [string, string, object][] = [
      ["steward.yaml alone", repo({ "steward.yaml": fleetYaml({}) }), { ok: true, evidence: "steward.yaml" }],
      ["a node", repo(nodes("n1")), { ok: true, evidence: "nodes/n1.yaml" }],
      [
        "an assignment below a directory, as .yml",
        repo({ "assignments/web/app.yml": 'apiVersion: "steward.dev/v1"\nkind: Assignment\n' }),
        { ok: true, evidence: "assignments/web/app.yml" },
      ],
      ["a bare repository", makeRepo({ files: nodes("n1") }).bareClone().dir, { ok: true }],
      [
        "YAML of something else in nodes/",
        repo({ "nodes/k8s.yaml": "apiVersion: v1\nkind: Pod\n", "README.md": "x\n" }),
        { ok: false, reason: "no-documents" },
      ],
      [
        "steward documents only elsewhere (steward's own tree)",
        repoRoot,
        { ok: false, reason: "no-documents" },
      ],
      ["a plain directory", tempDir(), { ok: false, reason: "not-git" }],
      ["nothing there", "/nonexistent/fleet", { ok: false, reason: "missing" }],
    ];
    for (const [what, dir, expected] of cases)
      expect({ what, ...checkFleetRepository(dir) }).toMatchObject({ what, ...expected });
    const top = repo(nodes("n1"));
    expect(checkFleetRepository(join(top, "nodes"))).toEqual({
      ok: false,
      dir: join(top, "nodes"),
      reason: "not-top",
      top,
    });
  });
});
