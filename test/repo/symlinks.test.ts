/**
 * The syncer on commits with symlinks, over a local path and over HTTP: a link that stays inside
 * is synced as what it leads to, commit after commit (a change of its target alone is a change),
 * and a link that leaves the repository makes the revision invalid while the last good one stays.
 */
import { rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { removeTempDirs } from "../helpers/git.js";
import { assignmentYaml, smallFleet } from "./fleet.js";
import { type Harness, harness, MODES } from "./harness.js";

describe.each(MODES)("syncer over %s, with symlinks", (mode) => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });
  afterAll(removeTempDirs);

  const relink = (path: string, target: string) => {
    rmSync(join(h.repo.dir, path), { force: true });
    symlinkSync(target, join(h.repo.dir, path));
  };
  const generations = async () =>
    Object.fromEntries([...(await h.store.currentInstances())].map(([key, i]) => [key, i.generation]));

  it("syncer - a linked assignment follows its target's changes; a link out of the repository is an invalid revision", async () => {
    const fleet = smallFleet();
    const web = (content: string) => assignmentYaml("web", { selector: { role: "web" }, content });
    delete fleet["assignments/web.yaml"];
    h = await harness(mode, { ...fleet, "shared/web.yaml": web("web v1\n") });
    relink("assignments/web.yaml", "../shared/web.yaml");
    relink("assignments/web-again.yaml", "web.yaml");
    const first = h.commit("web through links");
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied", head: first });
    expect(await generations()).toEqual({ "db@db-1": 1, "web@web-1": 1, "web@web-2": 1 });

    // Only the target changes: the links read it again.
    h.commit("web v2", { "shared/web.yaml": web("web v2\n") });
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied", changedAssignments: ["web"] });
    expect(await generations()).toEqual({ "db@db-1": 1, "web@web-1": 2, "web@web-2": 2 });
    expect((await h.store.generation("web@web-1", 2))?.spec.resources[0]).toMatchObject({
      content: "web v2\n",
    });

    relink("assignments/web.yaml", "../../outside/web.yaml");
    const bad = h.commit("web out of the repository");
    const invalid = await h.syncer.sync();
    expect(invalid).toMatchObject({ kind: "invalid", head: bad });
    const diagnostics = invalid.kind === "invalid" ? invalid.diagnostics : [];
    expect(diagnostics.map((d) => [d.file, d.line, d.column, d.code])).toEqual([
      ["assignments/web-again.yaml", 1, 1, "file/symlink-outside"],
      ["assignments/web.yaml", 1, 1, "file/symlink-outside"],
    ]);
    expect(diagnostics[0]!.message).toContain(
      '(through the link "assignments/web.yaml" → "../../outside/web.yaml"), outside the repository',
    );
    expect(await generations()).toEqual({ "db@db-1": 1, "web@web-1": 2, "web@web-2": 2 });

    // Back inside, with the content of generation 2: nothing new to apply.
    relink("assignments/web.yaml", "../shared/web.yaml");
    h.commit("web back inside");
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied", generations: [] });
    expect(await generations()).toEqual({ "db@db-1": 1, "web@web-1": 2, "web@web-2": 2 });
  });

  it("syncer - a document read at its target, then at its link once the target is in a dot-directory, is neither duplicated nor retired", async () => {
    const fleet = smallFleet();
    const web = fleet["assignments/web.yaml"]!;
    delete fleet["assignments/web.yaml"];
    h = await harness(mode, { ...fleet, "shared/web.yaml": web });
    relink("assignments/web.yaml", "../shared/web.yaml");
    h.commit("web at shared/, linked");
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied" });
    expect(await generations()).toEqual({ "db@db-1": 1, "web@web-1": 1, "web@web-2": 1 });

    h.commit("web moves to a dot-directory", { "shared/web.yaml": null, ".shared/web.yaml": web });
    relink("assignments/web.yaml", "../.shared/web.yaml");
    h.commit("the link follows it");
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied", generations: [], retired: [] });
    expect(await generations()).toEqual({ "db@db-1": 1, "web@web-1": 1, "web@web-2": 1 });
  });
});
