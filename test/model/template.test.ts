/** `${node...}` and `${assignment...}` references: replaced per node, `$${` escapes, the rest left alone. */
import { describe, expect, it } from "vitest";
import type { Assignment, Node } from "../../src/model/generated.js";
import { hasReferences, substitute, substituteString } from "../../src/model/template.js";

const context = {
  node: {
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: { name: "web-1", labels: { zone: "a" } },
    spec: { transport: "local", roots: ["/srv"], vars: { port: "8081", "data-dir": "/srv/data" } },
  } as Node,
  assignment: {
    apiVersion: "steward.dev/v1",
    kind: "Assignment",
    metadata: { name: "web" },
    spec: { nodes: ["web-1"], version: "1.2", resources: [{ kind: "package", name: "curl" }] },
  } as Assignment,
};

describe("template - substitution", () => {
  it.each([
    ["${node.name}:${node.vars.port}", "web-1:8081"],
    ["${node.vars.data-dir}/db", "/srv/data/db"],
    ["zone ${node.labels.zone}, ${assignment.name} ${assignment.version}", "zone a, web 1.2"],
    ["literal $${node.name} and $${HOME}", "literal ${node.name} and ${HOME}"],
    ["shell ${HOME} and $PATH stay", "shell ${HOME} and $PATH stay"],
    ["no references", "no references"],
  ])("template - %j becomes %j", (text, expected) => {
    const missing: string[] = [];
    expect(substituteString(text, context, (v) => missing.push(v))).toBe(expected);
    expect(missing).toEqual([]);
  });

  it("template - a reference without a value is left as written and reported with its path", () => {
    const missing: [(string | number)[], string][] = [];
    const value = { run: ["echo", "${node.vars.nope}"], env: { A: "${node.labels.rack}", B: "fixed" } };
    const out = substitute(value, context, (path, variable) => missing.push([path, variable]), [
      "resources",
      0,
    ]);
    expect(out).toEqual(value);
    expect(substituteString("${node.vars.constructor} ${node.labels.__proto__}", context, () => {})).toBe(
      "${node.vars.constructor} ${node.labels.__proto__}",
    );
    expect(missing).toEqual([
      [["resources", 0, "run", 1], "node.vars.nope"],
      [["resources", 0, "env", "A"], "node.labels.rack"],
    ]);
  });

  it("template - parts without references are returned as the same objects", () => {
    const fixed = { kind: "directory", path: "/srv/web" };
    const templated = { kind: "file", path: "/srv/${node.name}" };
    const out = substitute([fixed, templated], context, () => {});
    expect(out[0]).toBe(fixed);
    expect(out[1]).toEqual({ kind: "file", path: "/srv/web-1" });
    expect(hasReferences(fixed)).toBe(false);
    expect(hasReferences([fixed, templated])).toBe(true);
  });
});
