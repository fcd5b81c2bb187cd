/** Placement: nodes by name and by label selector, as a union, in name order. */
import { describe, expect, it } from "vitest";
import type { Assignment, Node } from "../../src/model/generated.js";
import { NodeIndex, placeAll } from "../../src/model/placement.js";

const node = (name: string, labels: Record<string, string>): Node => ({
  apiVersion: "steward.dev/v1",
  kind: "Node",
  metadata: { name, labels },
  spec: { transport: "local", roots: ["/srv"] },
});
const assignment = (name: string, spec: Partial<Assignment["spec"]>): Assignment => ({
  apiVersion: "steward.dev/v1",
  kind: "Assignment",
  metadata: { name },
  spec: { resources: [{ kind: "package", name: "curl" }], ...spec },
});

const index = new NodeIndex([
  node("web-2", { role: "web", zone: "b" }),
  node("db-1", { role: "db", zone: "a" }),
  node("web-1", { role: "web", zone: "a" }),
  node("edge-1", {}),
]);
const names = (nodes: readonly Node[]) => nodes.map((n) => n.metadata.name);

describe("placement - nodes an assignment lands on", () => {
  it("placement - a selector matches nodes having every label, in name order", () => {
    expect(names(index.place(assignment("a", { selector: { matchLabels: { role: "web" } } })))).toEqual([
      "web-1",
      "web-2",
    ]);
    expect(
      names(index.place(assignment("a", { selector: { matchLabels: { role: "web", zone: "a" } } }))),
    ).toEqual(["web-1"]);
    expect(names(index.place(assignment("a", { selector: { matchLabels: { role: "cache" } } })))).toEqual([]);
  });

  it("placement - an empty selector matches every node", () => {
    expect(names(index.place(assignment("a", { selector: { matchLabels: {} } })))).toEqual([
      "db-1",
      "edge-1",
      "web-1",
      "web-2",
    ]);
  });

  it("placement - names and selector are a union without duplicates; undeclared names place nothing", () => {
    const placed = index.place(
      assignment("a", { nodes: ["web-2", "edge-1", "ghost"], selector: { matchLabels: { zone: "b" } } }),
    );
    expect(names(placed)).toEqual(["edge-1", "web-2"]);
  });

  it("placement - placeAll places every assignment by name", () => {
    const all = placeAll(
      [assignment("a", { nodes: ["db-1"] }), assignment("b", { selector: { matchLabels: { zone: "a" } } })],
      index,
    );
    expect(Object.fromEntries([...all].map(([k, v]) => [k, names(v)]))).toEqual({
      a: ["db-1"],
      b: ["db-1", "web-1"],
    });
  });
});
