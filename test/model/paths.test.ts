/** Path confinement: a path is inside a root only at a segment boundary, and `.`/`..` are seen. */
import { describe, expect, it } from "vitest";
import { containingRoot, hasDotSegments, isInside } from "../../src/model/paths.js";

describe("paths - confinement", () => {
  it.each([
    ["/srv/web", "/srv", true],
    ["/srv", "/srv", true],
    ["/srv", "/srv/", true],
    ["/srv/web", "/srv/", true],
    ["/srv2/web", "/srv", false],
    ["/sr", "/srv", false],
    ["/etc/passwd", "/", true],
    ["/etc", "/srv", false],
  ])("paths - %s inside %s is %s", (path, root, inside) => {
    expect(isInside(path, root)).toBe(inside);
  });

  it.each([
    ["/srv/../etc", true],
    ["/srv/./x", true],
    ["..", true],
    ["/srv/..", true],
    ["/srv/..x/y", false],
    ["/srv/.hidden", false],
    ["/srv/a.b/c", false],
  ])("paths - %s has dot segments: %s", (path, dots) => {
    expect(hasDotSegments(path)).toBe(dots);
  });

  it("paths - a non-canonical path is normalised before it is compared", () => {
    expect(containingRoot("/srv/../etc/passwd", ["/srv"])).toBeUndefined();
    expect(containingRoot("/srv//web", ["/etc", "/srv"])).toBe("/srv");
  });
});
