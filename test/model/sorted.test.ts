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
});
