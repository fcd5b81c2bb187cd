/**
 * Bounds of counts and durations: every integer of the fleet schema has a maximum, each duration
 * field's bounds are enforced at its path, and the schema descriptions and the README's table say
 * the same bounds as the check.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DURATION_FIELDS, durationFindings } from "../../src/model/durations.js";
import { repoRoot } from "../helpers/cli.js";

const schema = JSON.parse(readFileSync(join(repoRoot, "schemas/steward.schema.json"), "utf8")) as {
  $defs: Record<string, SchemaNode>;
};
interface SchemaNode {
  type?: string;
  maximum?: number;
  description?: string;
  properties?: Record<string, SchemaNode>;
  [key: string]: unknown;
}

/** The schema nodes that describe each duration field (of every probe kind for probe fields). */
function describing(kind: string, path: readonly string[]): SchemaNode[] {
  const at = (def: string, ...names: string[]) => {
    let node = schema.$defs[def]!;
    for (const name of names) node = node.properties![name]!;
    return node;
  };
  const field = path[path.length - 1]!;
  switch (path.slice(1, 3).join(".")) {
    case "heartbeat.interval":
      return [at("FleetSpec", "heartbeat", "interval")];
    case "budget.within":
      return [at("Budget", "within")];
    case "rollout.canary":
      return [at("Rollout", "canary", "soak")];
    case "resources.*":
      return [at(field === "timeout" ? "CommandResource" : "ServiceResource", field)];
    case "probes.*":
      return ["HttpProbe", "TcpProbe", "CommandProbe"].map((probe) => at(probe, field));
  }
  throw new Error(`no schema node known for ${kind} ${path.join(".")}`);
}

describe("bounds - counts and durations", () => {
  it("bounds - every integer of the fleet schema has a maximum", () => {
    const unbounded: string[] = [];
    const visit = (node: unknown, where: string) => {
      if (node === null || typeof node !== "object") return;
      const record = node as SchemaNode;
      if (record.type === "integer" && typeof record.maximum !== "number") unbounded.push(where);
      for (const [key, value] of Object.entries(record)) visit(value, `${where}/${key}`);
    };
    visit(schema.$defs, "#/$defs");
    expect(unbounded).toEqual([]);
  });

  it("bounds - each duration field's schema description and the README name the bounds the check enforces", () => {
    const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
    const table = readme.slice(readme.indexOf("### Bounds"), readme.indexOf("### Editor completion"));
    for (const { kind, path, min, max } of DURATION_FIELDS) {
      for (const node of describing(kind, path))
        expect(node.description, `${kind} ${path.join(".")}`).toContain(`from ${min} to ${max}`);
      expect(table, `${kind} ${path.join(".")}`).toContain(`${min} – ${max}`);
    }
  });

  it.each([
    ["Fleet", { spec: { heartbeat: { interval: "1s" } } }, []],
    ["Fleet", { spec: { heartbeat: { interval: "3600000ms" } } }, []],
    ["Fleet", { spec: { heartbeat: { interval: "999ms" } } }, [["spec", "heartbeat", "interval"]]],
    ["Fleet", { spec: { heartbeat: { interval: "61m" } } }, [["spec", "heartbeat", "interval"]]],
    ["Fleet", { spec: { budget: { within: "30d" } } }, []],
    ["Assignment", { spec: { budget: { within: "31d" } } }, [["spec", "budget", "within"]]],
    ["Assignment", { spec: { rollout: { canary: { count: 1, soak: "0s" } } } }, []],
    [
      "Assignment",
      {
        spec: {
          resources: [
            { kind: "command", timeout: "300ms" },
            { kind: "command", timeout: "25h" },
          ],
        },
      },
      [["spec", "resources", 1, "timeout"]],
    ],
    ["Assignment", { spec: { resources: [{ kind: "service", stopTimeout: "0s" }] } }, []],
    [
      "Assignment",
      { spec: { probes: [{ interval: "999ms", timeout: "99ms" }] } },
      [
        ["spec", "probes", 0, "interval"],
        ["spec", "probes", 0, "timeout"],
      ],
    ],
    // Not a duration at all: the schema says so, not this check.
    ["Fleet", { spec: { heartbeat: { interval: "soon" } } }, []],
    ["Assignment", { spec: { resources: "none" } }, []],
  ] as const)("bounds - %s %j is checked at its paths", (kind, value, paths) => {
    expect(durationFindings(kind, value).map((finding) => finding.path)).toEqual(paths);
  });
});
