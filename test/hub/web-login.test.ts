/** Where a sign-in leads: only a path on this hub, however the link is written to look like one. */
import { describe, expect, it } from "vitest";
import { safeNext } from "../../src/hub/web/login.js";

describe("web - sign-in redirect", () => {
  it.each([
    ["/tasks", "/tasks"],
    ["/revisions/abc?x=1#assignment-web", "/revisions/abc?x=1#assignment-web"],
    ["/nodes/../tasks", "/tasks"],
    [undefined, "/"],
    ["", "/"],
    ["https://evil.example/", "/"],
    ["//evil.example", "/"],
    ["/\\evil.example", "/"],
    // Browsers drop tabs and line breaks: these are //evil.example to them.
    ["/\t/evil.example", "/"],
    ["/\n/evil.example", "/"],
    ["/\r//evil.example", "/"],
  ])("web - after sign-in, %j leads to %j", (next, expected) => {
    expect(safeNext(next)).toBe(expected);
  });
});
