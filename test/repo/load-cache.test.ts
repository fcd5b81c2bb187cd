import { afterAll, describe, expect, it } from "vitest";
import type { AnalysisCache } from "../../src/model/load.js";
import { directorySource, loadRepo } from "../../src/model/load.js";
import { FleetRepository } from "../../src/repo/git.js";
import { makeRepo, removeTempDirs } from "../helpers/git.js";
import { assignmentYaml, nodeYaml, smallFleet } from "./fleet.js";

afterAll(removeTempDirs);

/** A fleet with cross-document problems: a conflict, an unknown node, a path outside the roots. */
function brokenFleet(): Record<string, string> {
  return {
    ...smallFleet(),
    "assignments/clash.yaml": assignmentYaml("clash", { nodes: ["db-1", "db-9"] }).replace(
      "/srv/clash/",
      "/srv/db/",
    ),
    "assignments/outside.yaml": assignmentYaml("outside", { nodes: ["web-1"] }).replace(
      "/srv/outside/",
      "/etc/",
    ),
  };
}

describe("loading through the sync caches", () => {
  it("load - warm loads from git trees give the diagnostics and instances of a cold load, as the fleet changes", async () => {
    const repo = makeRepo({ files: smallFleet() });
    const revisions = [
      repo.rev(),
      repo.commit("break it", brokenFleet()),
      repo.commit("fix the clash, move web-2 out", {
        "assignments/clash.yaml": null,
        "nodes/web-2.yaml": nodeYaml("web-2", { role: "spare" }),
      }),
      repo.commit("all good again", {
        "assignments/outside.yaml": null,
        "nodes/web-2.yaml": nodeYaml("web-2", { role: "web" }),
      }),
    ];
    const repository = FleetRepository.open({ kind: "path", path: repo.dir });
    const cache: AnalysisCache = new Map();
    const summary = (result: Awaited<ReturnType<typeof loadRepo>>) => ({
      ok: result.ok,
      diagnostics: result.diagnostics,
      instances: result.desired ? [...result.desired.instances.values()].map((i) => [i.key, i.hash]) : null,
    });
    // Twice over the history, so every revision is also loaded with everything already cached.
    for (const sha of [...revisions, ...revisions]) {
      const warm = summary(await repository.load(sha, cache));
      const cold = summary(await repository.load(sha, new Map()));
      expect(warm).toEqual(cold);
      repo.git("checkout", "-q", sha);
      expect(summary(await loadRepo(directorySource(repo.dir)))).toEqual(cold);
    }
    const broken = summary(await repository.load(revisions[1]!, cache));
    expect(broken.diagnostics.map((d) => d.code)).toEqual([
      "node/undeclared",
      "resource/conflict",
      "path/outside-roots",
    ]);
    repository.close();
  });
});
