/** Cross-document checks that depend on the node an assignment is rendered for. */
import { describe, expect, it } from "vitest";
import { directorySource, loadRepo } from "../../src/model/load.js";
import { nodeYaml, tempRepo } from "../helpers/repo.js";

const assignment = (name: string, nodes: string[], resource: string) => `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: ${name}
spec:
  nodes: [${nodes.join(", ")}]
  resources:
    - ${resource}
`;

async function diagnostics(files: Record<string, string>) {
  const result = await loadRepo(directorySource(tempRepo(files)));
  return result.diagnostics.map((d) => ({
    at: `${d.file}:${d.line}:${d.column}`,
    code: d.code,
    message: d.message,
  }));
}

describe("semantic - per-node checks", () => {
  it("semantic - a templated path is checked against each node's roots with that node's values", async () => {
    expect(
      await diagnostics({
        "nodes/a.yaml": nodeYaml("a", { roots: ["/srv"], vars: { top: "srv" } }),
        "nodes/b.yaml": nodeYaml("b", { roots: ["/srv"], vars: { top: "opt" } }),
        "assignments/app.yaml": assignment(
          "app",
          ["a", "b"],
          "{kind: directory, path: '/${node.vars.top}/app'}",
        ),
      }),
    ).toEqual([
      {
        at: "assignments/app.yaml:8:31",
        code: "path/outside-roots",
        message: '"/opt/app" is outside the roots of node "b" (/srv)',
      },
    ]);
  });

  it("semantic - a node value that puts `..` into a path is refused", async () => {
    const found = await diagnostics({
      "nodes/a.yaml": nodeYaml("a", { roots: ["/srv"], vars: { dir: "../etc" } }),
      "assignments/app.yaml": assignment(
        "app",
        ["a"],
        "{kind: file, path: '/srv/${node.vars.dir}/passwd', content: x}",
      ),
    });
    expect(found).toMatchObject([{ code: "path/dot-segments", at: "assignments/app.yaml:8:26" }]);
    expect(found[0]!.message).toContain('becomes "/srv/../etc/passwd" on node "a"');
  });

  it("semantic - two assignments owning the same service on a node conflict; on different nodes they do not", async () => {
    const service = "{kind: service, name: web, exec: [node, server.mjs]}";
    expect(
      await diagnostics({
        "nodes/a.yaml": nodeYaml("a"),
        "nodes/b.yaml": nodeYaml("b"),
        "assignments/one.yaml": assignment("one", ["a"], service),
        "assignments/two.yaml": assignment("two", ["b"], service),
      }),
    ).toEqual([]);
    expect(
      await diagnostics({
        "nodes/a.yaml": nodeYaml("a"),
        "assignments/one.yaml": assignment("one", ["a"], service),
        "assignments/two.yaml": assignment("two", ["a"], service),
      }),
    ).toMatchObject([
      {
        at: "assignments/two.yaml:8:7",
        code: "resource/conflict",
        message: 'service web on node "a" is also managed by assignment "one" (assignments/one.yaml)',
      },
    ]);
  });

  it("semantic - a relative symlink target is checked where it resolves to", async () => {
    const link = (target: string) =>
      assignment("app", ["a"], `{kind: symlink, path: /srv/app/current, target: ${target}}`);
    const ok = await diagnostics({
      "nodes/a.yaml": nodeYaml("a"),
      "assignments/app.yaml": link("../releases/v2"),
    });
    expect(ok).toEqual([]);
    const escaping = await diagnostics({
      "nodes/a.yaml": nodeYaml("a"),
      "assignments/app.yaml": link("../../etc/shadow"),
    });
    expect(escaping).toEqual([
      {
        at: "assignments/app.yaml:8:55",
        code: "path/outside-roots",
        message: '"../../etc/shadow" resolves to "/etc/shadow", outside the roots of node "a" (/srv)',
      },
    ]);
  });

  it("semantic - a conflict on several nodes is one diagnostic naming them", async () => {
    const nodes = Object.fromEntries(
      ["a", "b", "c", "d", "e"].map((n) => [`nodes/${n}.yaml`, nodeYaml(n, { labels: { role: "web" } })]),
    );
    const shared = "{kind: file, path: /srv/index.html, content: x}";
    const bySelector = assignment("two", ["a"], shared).replace(
      "nodes: [a]",
      "selector: {matchLabels: {role: web}}",
    );
    const found = await diagnostics({
      ...nodes,
      "assignments/one.yaml": assignment("one", ["a", "b", "c", "d", "e"], shared),
      "assignments/two.yaml": bySelector,
      "assignments/three.yaml": assignment("three", ["a"], "{kind: package, name: curl}"),
      "assignments/four.yaml": assignment("four", ["b"], "{kind: package, name: curl}"),
    });
    expect(found).toEqual([
      {
        at: "assignments/two.yaml:8:7",
        code: "resource/conflict",
        message:
          'path /srv/index.html on nodes "a", "b", "c" and 2 more is also managed by assignment "one" (assignments/one.yaml)',
      },
    ]);
  });

  it("semantic - an invalid node document does not also make every assignment naming it an error", async () => {
    expect(
      await diagnostics({
        "nodes/a.yaml": nodeYaml("a").replace("transport: local", "transport: pigeon"),
        "assignments/one.yaml": assignment("one", ["a"], "{kind: package, name: curl}"),
      }),
    ).toMatchObject([{ at: "nodes/a.yaml:6:14", code: "schema/enum" }]);
  });
});
