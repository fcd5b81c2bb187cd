import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { loadRepo, type RepoSource } from "../../src/model/load.js";

function source(files: Record<string, unknown>): RepoSource {
  const bytes = new Map(
    Object.entries(files).map(([path, doc]) => [
      path,
      Buffer.from(typeof doc === "string" ? doc : stringify(doc)),
    ]),
  );
  return { files: () => [...bytes.keys()].map((path) => ({ path })), read: (file) => bytes.get(file.path)! };
}

const node = (name: string, dataDir: string) => ({
  apiVersion: "steward.dev/v1",
  kind: "Node",
  metadata: { name },
  spec: { transport: "local", roots: ["/srv"], vars: { dataDir } },
});

const assignment = {
  apiVersion: "steward.dev/v1",
  kind: "Assignment",
  metadata: { name: "app" },
  spec: {
    nodes: ["a"],
    resources: [{ kind: "file", path: `\${node.vars.dataDir}/app.conf`, content: "x\n" }],
  },
};

describe("model - paths that start with a node variable", () => {
  it("model - a path may start with a node variable holding an absolute path under the roots", async () => {
    const result = await loadRepo(
      source({ "nodes/a.yaml": node("a", "/srv/data"), "assignments/app.yaml": assignment }),
    );
    expect(result.diagnostics).toEqual([]);
    const spec = result.desired!.instances.get("app@a")!.spec;
    expect(spec.resources[0]).toMatchObject({ path: "/srv/data/app.conf", name: "/srv/data/app.conf" });
  });

  it("model - a node value that makes the path relative is an error at the field, naming the node", async () => {
    const result = await loadRepo(
      source({ "nodes/a.yaml": node("a", "srv/data"), "assignments/app.yaml": assignment }),
    );
    expect(result.ok).toBe(false);
    expect(result.diagnostics).toMatchObject([
      {
        code: "path/not-absolute",
        file: "assignments/app.yaml",
        line: 10,
        message: expect.stringContaining('"srv/data/app.conf" on node "a"'),
      },
    ]);
  });

  it("model - a node value outside the roots is refused like any path outside them", async () => {
    const result = await loadRepo(
      source({ "nodes/a.yaml": node("a", "/etc"), "assignments/app.yaml": assignment }),
    );
    expect(result.diagnostics.map((d) => d.code)).toEqual(["path/outside-roots"]);
  });
});
