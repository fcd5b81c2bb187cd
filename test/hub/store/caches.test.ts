/**
 * The store's parsed-JSON cache: instances rendered alike share one parsed value (frozen, so no
 * reader changes it for the others), and what it keeps is bounded by texts, not by instances.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { bodyDigest, ParsedJson, Recent } from "../../../src/hub/store/sql/caches.js";

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

describe("store caches - bounded by recent use", () => {
  it("store caches - past its bound the entry least recently read or written goes, not one just read", () => {
    const recent = new Recent<string, number>(2);
    recent.set("a", 1);
    recent.set("b", 2);
    expect(recent.get("a")).toBe(1);
    recent.set("c", 3);
    expect(recent.get("b")).toBeUndefined();
    expect(recent.get("a")).toBe(1);
    expect(recent.get("c")).toBe(3);
    expect(recent.size).toBe(2);
    recent.set("a", 10);
    recent.set("d", 4);
    expect([recent.get("a"), recent.get("c"), recent.get("d")]).toEqual([10, undefined, 4]);
    recent.delete("a");
    expect(recent.size).toBe(1);
  });

  it("store caches - an observation body is compared by a short digest that tells bodies apart", () => {
    const body = JSON.stringify({ assignment: "web", generation: 3, hash: `sha256:${"a".repeat(64)}` });
    // 48 bits of the SHA-1: a whole number a map holds without a string.
    expect(Number.isSafeInteger(bodyDigest(body))).toBe(true);
    expect(bodyDigest(body)).toBeGreaterThanOrEqual(0);
    expect(bodyDigest(body)).toBeLessThan(2 ** 48);
    expect(bodyDigest(body)).toBe(
      Number.parseInt(createHash("sha1").update(body).digest("hex").slice(0, 12), 16),
    );
    expect(bodyDigest(body)).toBe(bodyDigest(`${body} `.trimEnd()));
    expect(bodyDigest(body)).not.toBe(bodyDigest(body.replace("3", "4")));
  });
});
