import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openerFor, openInBrowser } from "../../src/cli/open.js";

describe("cli - opening the fleet page", () => {
  it.each([
    ["linux", ["xdg-open", ["http://h/"]]],
    ["freebsd", ["xdg-open", ["http://h/"]]],
    ["darwin", ["open", ["http://h/"]]],
    ["win32", ["cmd", ["/c", "start", "", "http://h/"]]],
  ] as const)("cli - on %s the page is opened with %j", (platform, expected) => {
    expect(openerFor(platform, "http://h/")).toEqual(expected);
  });

  it("cli - without an opener it says so, naming the package and the URL to open by hand", async () => {
    const empty = mkdtempSync(join(tmpdir(), "steward-open-"));
    try {
      expect(await openInBrowser("http://127.0.0.1:1/", { PATH: empty }, "linux")).toBe(
        "xdg-open is not installed here (on Debian: apt-get install -y xdg-utils): open http://127.0.0.1:1/ in a browser",
      );
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
