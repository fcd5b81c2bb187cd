import { afterAll, describe, expect, it } from "vitest";
import { FleetRepository } from "../../src/repo/git.js";
import { type RolloutPlan, stageRollout } from "../../src/repo/plan.js";
import { renderPlanMarkdown, renderPlanText } from "../../src/repo/plan-render.js";
import { planRevisions } from "../../src/repo/plan-revisions.js";
import { makeRepo, removeTempDirs } from "../helpers/git.js";
import { assignmentYaml, nodeYaml, smallFleet } from "./fleet.js";

afterAll(removeTempDirs);

const webRollout = `  rollout:
    canary:
      nodes: [web-2]
      soak: 30s
    maxInFlight: 1
    maxFailures: 1
`;

function fleetWithRollout(): Record<string, string> {
  return {
    ...smallFleet(),
    "nodes/web-3.yaml": nodeYaml("web-3", { role: "web" }),
    "nodes/web-4.yaml": nodeYaml("web-4", { role: "web" }),
    "assignments/web.yaml": assignmentYaml("web", { selector: { role: "web" }, extra: webRollout }),
  };
}

describe("plan", () => {
  it("plan - lists per node the instances added, retired and given a new generation, with a unified diff and the rollout", async () => {
    const repo = makeRepo({ files: fleetWithRollout() });
    const from = repo.rev();
    const to = repo.commit("web v2, db retired, web-5 joins", {
      "assignments/web.yaml": assignmentYaml("web", {
        selector: { role: "web" },
        content: "web v2\n",
        extra: `${webRollout}  probes:\n    - kind: tcp\n      name: port\n      port: 8080\n`,
      }),
      "assignments/db.yaml": null,
      "nodes/web-5.yaml": nodeYaml("web-5", { role: "web" }),
    });
    const repository = FleetRepository.open({ kind: "path", path: repo.dir });
    const result = await planRevisions(repository, from, to);
    repository.close();
    expect(result.invalid).toBeUndefined();
    expect(result.from).toEqual({ sha: from, subject: "initial" });
    expect(result.to).toEqual({ sha: to, subject: "web v2, db retired, web-5 joins" });
    const plan = result.plan!;
    expect(plan.summary).toEqual({ added: 1, retired: 1, changed: 4, unchanged: 0, nodes: 6 });
    expect(plan.nodes.map((n) => [n.node, n.instances.map((i) => `${i.key}:${i.change}`)])).toEqual([
      ["db-1", ["db@db-1:retired"]],
      ["web-1", ["web@web-1:changed"]],
      ["web-2", ["web@web-2:changed"]],
      ["web-3", ["web@web-3:changed"]],
      ["web-4", ["web@web-4:changed"]],
      ["web-5", ["web@web-5:added"]],
    ]);
    const web1 = plan.nodes[1]!.instances[0]!;
    expect(web1.beforeHash).not.toBe(web1.afterHash);
    expect(web1.resources).toEqual([
      {
        name: "config",
        kind: "file",
        change: "changed",
        fields: [],
        diff: "--- a/srv/web/config.txt\n+++ b/srv/web/config.txt\n@@ -1,1 +1,1 @@\n-web v1\n+web v2\n",
      },
    ]);
    expect(web1.probes).toEqual([{ name: "port", kind: "tcp", change: "added", fields: [] }]);
    const added = plan.nodes[5]!.instances[0]!;
    expect(added.resources[0]).toMatchObject({ change: "added", diff: expect.stringContaining("+web v2") });
    expect(plan.nodes[0]!.instances[0]!.resources).toEqual([
      { name: "config", kind: "file", change: "removed", fields: [] },
    ]);
    expect(plan.rollout).toEqual([
      {
        assignment: "web",
        stage: "apply",
        nodes: ["web-1", "web-2", "web-3", "web-4", "web-5"],
        steps: [
          { kind: "canary", nodes: ["web-2"], soak: "30s" },
          { kind: "batch", nodes: ["web-1"] },
          { kind: "batch", nodes: ["web-3"] },
          { kind: "batch", nodes: ["web-4"] },
          { kind: "batch", nodes: ["web-5"] },
        ],
        maxFailures: 1,
      },
    ]);
    expect(JSON.parse(JSON.stringify(plan))).toEqual(plan);

    const text = renderPlanText(plan, { from: result.from!, to: result.to });
    expect(text).toContain(
      `Plan ${from.slice(0, 12)} (initial) → ${to.slice(0, 12)} (web v2, db retired, web-5 joins)`,
    );
    expect(text).toContain("1 added, 4 new generations, 1 retired, 0 unchanged (6 nodes affected)");
    expect(text).toContain("  - db@db-1  retired (no longer managed; nothing is deleted)");
    expect(text).toContain("          -web v1\n          +web v2");
    expect(text).toContain(
      "  web (apply): canary web-2 (soak 30s) → web-1 → web-3 → web-4 → web-5; pause after 2 failures",
    );
    const markdown = renderPlanMarkdown(plan, { from: result.from!, to: result.to });
    expect(markdown).toContain("#### node `web-1`");
    expect(markdown).toContain("    ```diff\n    --- a/srv/web/config.txt");
    expect(markdown).toContain(
      "| web | apply | 5 | canary web-2 (soak 30s) → web-1 → web-3 → web-4 → web-5; pause after 2 failures |",
    );
  });

  it("plan - field changes are listed, and a change that renders the same is no change", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const from = repo.rev();
    const to = repo.commit("db stopped; web moved and commented", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], extra: "  state: stopped\n" }),
      "assignments/web.yaml": null,
      "assignments/tier/web.yaml": `# the web tier\n${smallFleet()["assignments/web.yaml"]}`,
    });
    const repository = FleetRepository.open({ kind: "path", path: repo.dir });
    const { plan } = await planRevisions(repository, from, to);
    repository.close();
    expect(plan!.summary).toMatchObject({ changed: 1, unchanged: 2 });
    expect(plan!.nodes).toEqual([
      {
        node: "db-1",
        instances: [
          expect.objectContaining({
            key: "db@db-1",
            fields: [{ path: "state", before: "running", after: "stopped" }],
            resources: [],
          }),
        ],
      },
    ]);
  });

  it("plan - an invalid target revision gives its diagnostics instead of a plan", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const to = repo.commit("broken", {
      "assignments/db.yaml": "apiVersion: steward.dev/v1\nkind: Assignment\n",
    });
    const repository = FleetRepository.open({ kind: "path", path: repo.dir });
    const result = await planRevisions(repository, undefined, "HEAD");
    repository.close();
    expect(result.from?.sha).toBe(repo.rev("HEAD~1"));
    expect(result.plan).toBeUndefined();
    expect(result.invalid).toMatchObject({ side: "to", sha: to });
    expect(result.invalid!.diagnostics[0]).toMatchObject({ file: "assignments/db.yaml", severity: "error" });
  });

  const staging: {
    name: string;
    rollout: Parameters<typeof stageRollout>[1];
    placed: number;
    steps: RolloutPlan["steps"];
  }[] = [
    {
      name: "no policy: one batch",
      rollout: {},
      placed: 3,
      steps: [{ kind: "batch", nodes: ["a", "b", "c"] }],
    },
    {
      name: "canary by count, then maxInFlight 2",
      rollout: { canary: { count: 1 }, maxInFlight: 2 },
      placed: 3,
      steps: [
        { kind: "canary", nodes: ["a"] },
        { kind: "batch", nodes: ["b", "c"] },
      ],
    },
    {
      name: "maxInFlight 50% of 4 placed nodes",
      rollout: { maxInFlight: "50%" },
      placed: 4,
      steps: [
        { kind: "batch", nodes: ["a", "b"] },
        { kind: "batch", nodes: ["c"] },
      ],
    },
    {
      name: "observe-only dispatches nothing",
      rollout: { stage: "observe", maxInFlight: 1 },
      placed: 3,
      steps: [],
    },
    {
      name: "a canary node that is not affected is skipped",
      rollout: { canary: { nodes: ["z"], soak: "1m" }, maxInFlight: 1 },
      placed: 3,
      steps: [
        { kind: "batch", nodes: ["a"] },
        { kind: "batch", nodes: ["b"] },
        { kind: "batch", nodes: ["c"] },
      ],
    },
  ];
  it.each(staging)("plan - rollout staging: $name", ({ rollout, placed, steps }) => {
    expect(stageRollout("x", rollout, ["a", "b", "c"], placed).steps).toEqual(steps);
  });
});
