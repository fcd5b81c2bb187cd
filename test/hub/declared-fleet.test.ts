/**
 * The hub records what a revision declares besides generations: its nodes. Kept between revisions
 * (`RecordedNodes`), the last map recorded tells which nodes a new revision changed, added or
 * removed without reading every node back — and a map that shares nothing with it still gives the
 * same answer, read entry by entry.
 */
import { afterAll, describe, expect, it } from "vitest";
import { statePathsIn } from "../../src/cli/hub-state.js";
import { type DeclaredFleet, type RecordedNodes, recordDeclaredFleet } from "../../src/hub/desired.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import { directorySource, loadRepo } from "../../src/model/load.js";
import { SortedMap } from "../../src/model/sorted.js";
import { makeRepo, removeTempDirs, tempDir } from "../helpers/git.js";
import { fleetYaml, nodeYaml } from "./helpers/fleet.js";

afterAll(() => removeTempDirs());

const names = Array.from({ length: 300 }, (_, i) => `node-${String(i).padStart(3, "0")}`);

describe("hub - declared fleet", () => {
  it("hub declared fleet - a revision after the one recorded: only its changed, added and removed nodes are changes, and the store holds them", async () => {
    const repo = makeRepo({
      files: {
        "steward.yaml": fleetYaml({}),
        ...Object.fromEntries(
          names.map((name) => [`nodes/${name}.yaml`, nodeYaml(name, { roots: ["/srv"] })]),
        ),
      },
    });
    const loaded = await loadRepo(directorySource(repo.dir));
    expect(loaded.ok, JSON.stringify(loaded.diagnostics)).toBe(true);
    const first = loaded.desired!;
    expect(first.nodes).toBeInstanceOf(SortedMap);
    const store = new SqliteStore(statePathsIn(tempDir("steward-declared-")).db);
    try {
      const recorded: RecordedNodes = { nodes: new Map() };
      const now = new Date().toISOString();
      const all = await recordDeclaredFleet(store, "r1", first, now, recorded);
      expect(all.nodes.sort()).toEqual(names);

      // One node changed, one removed, one added: the way the loader makes the next map.
      const changed = first.nodes.get("node-005")!;
      const moved = {
        ...changed,
        value: { ...changed.value, spec: { ...changed.value.spec, roots: ["/opt"] } },
      };
      const added = { ...changed, value: { ...changed.value, metadata: { name: "node-999" } } };
      const second: DeclaredFleet = {
        ...first,
        nodes: (first.nodes as SortedMap<typeof changed>).with(
          new Map([
            ["node-005", moved],
            ["node-200", undefined],
            ["node-999", added],
          ]),
        ),
      };
      const some = await recordDeclaredFleet(store, "r2", second, now, recorded);
      expect(some.nodes.sort()).toEqual(["node-005", "node-200", "node-999"]);
      expect((await store.nodes.get("node-005"))?.spec.spec.roots).toEqual(["/opt"]);
      expect((await store.nodes.get("node-200"))?.removedAt).toBe(now);
      expect((await store.nodes.get("node-999"))?.removedAt).toBeUndefined();
      expect((await store.nodes.get("node-004"))?.removedAt).toBeUndefined();

      // The same nodes in a map that shares nothing with the one recorded: nothing changed.
      const copy: DeclaredFleet = { ...second, nodes: SortedMap.from([...second.nodes]) };
      expect((await recordDeclaredFleet(store, "r3", copy, now, recorded)).nodes).toEqual([]);
      // And in one that shares everything.
      expect((await recordDeclaredFleet(store, "r4", copy, now, recorded)).nodes).toEqual([]);
      // Another writer recorded in between: every node is compared with what the store holds.
      await store.meta.set("declared_revision", "elsewhere");
      const back: DeclaredFleet = { ...first };
      expect((await recordDeclaredFleet(store, "r5", back, now, recorded)).nodes.sort()).toEqual([
        "node-005",
        "node-200",
        "node-999",
      ]);
      expect((await store.nodes.get("node-999"))?.removedAt).toBe(now);
    } finally {
      await store.close();
    }
  });
});
