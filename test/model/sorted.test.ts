/** SortedMap: an immutable sorted map whose changes share the chunks they do not touch. */
import { describe, expect, it } from "vitest";
import { emptySorted, SortedMap } from "../../src/model/sorted.js";
import { randomNumbers } from "./random-fleet.js";

/** What a map says: its entries in order, and its size. */
function contents(map: ReadonlyMap<string, number>) {
  return { entries: [...map], size: map.size };
}

/** The entries of `map` sorted by key, as SortedMap must iterate them. */
function sortedContents(map: ReadonlyMap<string, number>) {
  const entries = [...map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { entries, size: map.size };
}

describe("sorted - SortedMap", () => {
  it("sorted - random changes, small and large, give the entries a sorted native map has; earlier maps stay as they were", () => {
    const random = randomNumbers(5);
    const key = () => `k${Math.floor(random() * 3000)}`;
    let model = new Map<string, number>();
    let map = emptySorted<number>();
    const history: [SortedMap<number>, ReturnType<typeof sortedContents>][] = [];
    for (let step = 0; step < 300; step++) {
      const changes = new Map<string, number | undefined>();
      // Mostly a few keys; sometimes a thousand (the rebuilding path).
      const count = random() < 0.05 ? 1000 : 1 + Math.floor(random() * 8);
      for (let i = 0; i < count; i++) changes.set(key(), random() < 0.3 ? undefined : step);
      const next = new Map(model);
      for (const [k, v] of changes) {
        if (v === undefined) next.delete(k);
        else next.set(k, v);
      }
      model = next;
      map = map.with(changes);
      expect(contents(map), `step ${step}`).toEqual(sortedContents(model));
      for (let i = 0; i < 20; i++) {
        const probe = key();
        expect(map.get(probe)).toBe(model.get(probe));
        expect(map.has(probe)).toBe(model.has(probe));
      }
      history.push([map, sortedContents(model)]);
    }
    for (const [old, expected] of history) expect(contents(old)).toEqual(expected);
    expect([...map.keys()]).toEqual([...map].map(([k]) => k));
    expect([...map.values()]).toEqual([...map].map(([, v]) => v));
    const seen: string[] = [];
    map.forEach((value, k, self) => {
      expect(self).toBe(map);
      expect(value).toBe(model.get(k));
      seen.push(k);
    });
    expect(seen).toEqual([...map.keys()]);
  });

  it("sorted - from sorts its entries and keeps the last of a repeated key; an empty change is the same map", () => {
    const map = SortedMap.from([
      ["b", 1],
      ["a", 2],
      ["b", 3],
    ]);
    expect([...map]).toEqual([
      ["a", 2],
      ["b", 3],
    ]);
    expect(map.with(new Map())).toBe(map);
    expect(emptySorted<number>().get("a")).toBeUndefined();
  });
  it("sorted - changesSince gives what changed, was added or removed since an earlier map, whether the two share chunks or not", () => {
    const random = randomNumbers(11);
    const key = () => `k${Math.floor(random() * 2000)}`;
    let map = SortedMap.from(Array.from({ length: 1500 }, (_, i) => [`k${i}`, i] as const));
    for (let step = 0; step < 100; step++) {
      const changes = new Map<string, number | undefined>();
      const count = random() < 0.1 ? 600 : 1 + Math.floor(random() * 5);
      for (let i = 0; i < count; i++)
        changes.set(key(), random() < 0.3 ? undefined : random() < 0.5 ? step : (map.get(key()) ?? step));
      const next = map.with(changes);
      const expected = {
        changed: [...next].filter(([k, v]) => map.get(k) !== v),
        removed: [...map.keys()].filter((k) => !next.has(k)),
      };
      const sort = (c: { changed: [string, number][]; removed: string[] }) => ({
        changed: [...c.changed].sort(([a], [b]) => (a < b ? -1 : 1)),
        removed: [...c.removed].sort(),
      });
      expect(sort(SortedMap.changesSince(next, map)), `step ${step}`).toEqual(sort(expected));
      // Maps that share no chunk, and native maps, are compared entry by entry, to the same answer.
      expect(sort(SortedMap.changesSince(SortedMap.from([...next]), map))).toEqual(sort(expected));
      expect(sort(SortedMap.changesSince(new Map(next), new Map(map)))).toEqual(sort(expected));
      map = next;
    }
    // A value alike by `same` is no change; by identity, every one is.
    const doubled = SortedMap.from([...map].map(([k, v]) => [k, v * 2] as const));
    expect(SortedMap.changesSince(doubled, map, (later, earlier) => later === earlier * 2).changed).toEqual(
      [],
    );
    expect(SortedMap.changesSince(doubled, map).changed.length).toBe(
      [...map].filter(([, v]) => v !== 0).length,
    );
  });
});
