/**
 * A load with a cache works by difference with the previous load of the same repository (checks,
 * placements and renderings of unchanged documents are kept). Over random histories, every such
 * load must give what a load from scratch gives: the same diagnostics at the same places with the
 * same source lines, and the same desired state.
 */
import { describe, expect, it } from "vitest";
import { type AnalysisCache, type LoadResult, loadRepo } from "../../src/model/load.js";
import { changedInstanceKeys, type Instance } from "../../src/model/render.js";
import {
  mutateFleet,
  plainSource,
  RevisionSources,
  randomFleet,
  randomNumbers,
  setMess,
} from "./random-fleet.js";

/** How many instances there are: known before they are rendered, and it must be how many are rendered. */
function countOf(instances: ReadonlyMap<string, Instance>): number {
  const size = instances.size;
  expect([...instances.keys()].length).toBe(size);
  return size;
}

/** Everything a caller can observe of a load. */
function observed(result: LoadResult) {
  const desired = result.desired;
  return {
    ok: result.ok,
    filesRead: result.filesRead,
    diagnostics: result.diagnostics.map((d) => ({ ...d, source: result.lineOf(d.file, d.line) })),
    fleet: desired?.fleet,
    nodes: desired ? [...desired.nodes].map(([name, doc]) => [name, doc.file, doc.index]) : undefined,
    assignments: desired
      ? [...desired.assignments].map(([name, doc]) => [name, doc.file, doc.index])
      : undefined,
    count: desired ? countOf(desired.instances) : undefined,
    instances: desired
      ? [...desired.instances.values()].map((i) => ({
          key: i.key,
          hash: i.hash,
          file: i.file,
          spec: i.spec,
          rollout: i.rollout,
          budget: i.budget,
        }))
      : undefined,
  };
}

// STEWARD_TEST_HISTORIES=400 runs many more histories (a minute or so) after a change to the loader.
const HISTORIES = Number(process.env.STEWARD_TEST_HISTORIES ?? 12);
const REVISIONS = 40;

describe("load - by difference", () => {
  it("load - over random histories, each load with a cache equals a load from scratch", async () => {
    let codes = new Set<string>();
    let warmOk = 0;
    for (let seed = 1; seed <= HISTORIES; seed++) {
      const random = randomNumbers(seed);
      // Some histories with many mistakes (cross-document checks), some with few (rendering).
      setMess([0.3, 0.1, 0.03][seed % 3]!);
      const sources = new RevisionSources(random);
      const cache: AnalysisCache = new Map();
      let files = randomFleet(random);
      let previous: ReadonlyMap<string, Instance> | undefined;
      // A result looked at only after the next load (instances are rendered when first asked for).
      let deferred: { warm: LoadResult; expected: ReturnType<typeof observed>; where: string } | undefined;
      for (let revision = 0; revision < REVISIONS; revision++) {
        const warm = await loadRepo(sources.source(files), { cache });
        if (deferred)
          expect(observed(deferred.warm), `${deferred.where}, after the next load`).toEqual(
            deferred.expected,
          );
        deferred = undefined;
        const cold = await loadRepo(plainSource(files));
        const where = `seed ${seed}, revision ${revision}`;
        for (const d of cold.diagnostics) codes.add(d.code);
        if (random() < 0.3) {
          deferred = { warm, expected: observed(cold), where };
          previous = undefined;
        } else expect(observed(warm), where).toEqual(observed(cold));
        if (warm.desired && !deferred) {
          warmOk++;
          const next = warm.desired.instances;
          // Keys said to be unchanged hold the very same instance as the map they were derived from.
          const keys = previous && changedInstanceKeys(previous, next);
          if (previous && keys) {
            for (const key of new Set([...previous.keys(), ...next.keys()]))
              if (!keys.has(key)) expect(next.get(key), `${where}: ${key}`).toBe(previous.get(key));
            // Told once: the keys are not kept for a second asking (a fleet's, after a change to all).
            if (previous !== next && keys.size > 0)
              expect(changedInstanceKeys(previous, next), where).toBeUndefined();
          }
          previous = next;
        }
        files = mutateFleet(random, files);
      }
    }
    // The histories reach the checks they are meant to exercise, and valid revisions too.
    codes = new Set([...codes].filter((code) => !code.startsWith("schema/")));
    expect([...codes].sort()).toEqual(
      expect.arrayContaining([
        "depends-on/cycle",
        "depends-on/not-placed",
        "depends-on/unknown",
        "fleet/location",
        "name/duplicate",
        "node/undeclared",
        "path/outside-roots",
        "resource/conflict",
        "rollout/canary-node",
        "selector/no-match",
        "source/missing",
        "template/undefined",
      ]),
    );
    expect(warmOk).toBeGreaterThan(10);
  });

  it("load - a one-file change reads one file, not the repository", async () => {
    const random = randomNumbers(99);
    const sources = new RevisionSources(random);
    const cache: AnalysisCache = new Map();
    const files = new Map([
      [
        "nodes/n0.yaml",
        "apiVersion: steward.dev/v1\nkind: Node\nmetadata:\n  name: n0\nspec:\n  transport: local\n  roots: [/srv]\n",
      ],
    ]);
    for (let i = 0; i < 50; i++)
      files.set(
        `assignments/a${i}.yaml`,
        `apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: a${i}\nspec:\n  nodes: [n0]\n  resources:\n    - {kind: directory, path: /srv/a${i}}\n`,
      );
    await loadRepo(sources.source(files), { cache });
    expect(sources.reads).toBe(51);
    files.set("assignments/a7.yaml", files.get("assignments/a7.yaml")!.replace("/srv/a7", "/srv/a7b"));
    const before = sources.reads;
    const result = await loadRepo(sources.source(files), { cache });
    expect(result.ok).toBe(true);
    // Fresh RepoFile objects with unchanged ids (RevisionSources makes a few) are not read either.
    expect(sources.reads - before).toBe(1);
  });
});
