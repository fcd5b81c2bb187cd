/**
 * The store's parsed-JSON cache: instances rendered alike share one parsed value (frozen, so no
 * reader changes it for the others), and what it keeps is bounded by texts, not by instances.
 */
import { describe, expect, it } from "vitest";
import { ParsedJson } from "../../../src/hub/store/sql/caches.js";

describe("store caches - parsed JSON by text", () => {
  it("store caches - one text parses once to one frozen value; past its bound the first text kept is parsed anew", () => {
    const cache = new ParsedJson(2);
    const text = '{"resources":[{"kind":"file","path":"/srv/a"}]}';
    const first = cache.parse(text) as { resources: { path: string }[] };
    // The same text read from another row (another string) is the same value.
    expect(cache.parse(`${text} `.trimEnd())).toBe(first);
    expect(first).toEqual({ resources: [{ kind: "file", path: "/srv/a" }] });
    expect(() => {
      first.resources[0]!.path = "/etc/passwd";
    }).toThrow(TypeError);
    expect(() => first.resources.push({ path: "/x" })).toThrow(TypeError);
    expect(cache.parse("null")).toBeNull();
    cache.parse('"budget"');
    // Two texts kept: the first one went, and comes back as a new value equal to it.
    const again = cache.parse(text);
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
  });
});
