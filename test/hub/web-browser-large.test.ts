import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startHubHttp } from "../../src/hub/http.js";
import { chromiumForFile, watch } from "../helpers/chromium.js";
import { assignmentYaml, file, nodeYaml } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const chromium = chromiumForFile();
const names = Array.from({ length: 101 }, (_, i) => `n${String(i).padStart(3, "0")}`);

describe("hub - the web view of a large fleet in a browser", () => {
  it("web - alike nodes are one row; a node that changes while the page is open gets a row of its own, live", async () => {
    const h = await startHarness({
      files: {
        ...Object.fromEntries(names.map((n) => [`nodes/${n}.yaml`, nodeYaml(n)])),
        "assignments/app.yaml": assignmentYaml("app", {
          selector: { matchLabels: { env: "test" } },
          resources: [file("conf", "v1")],
        }),
      },
    });
    await h.commit();
    await h.settle();
    const http = await startHubHttp({ hub: h.hub });
    try {
      const page = await chromium().browser.newPage();
      const watched = await watch(page);
      await page.goto(`${http.url}/`, { waitUntil: "load" });
      await page.waitForSelector("#live[data-state='on']");
      // A grouped row's head is its summary (the member list under it is folded away).
      const rows = () =>
        page.$$eval("table.grid tbody th", (ths) =>
          ths.map((th) => (th.querySelector("summary") ?? th).textContent?.replace(/\s+/g, " ").trim()),
        );
      expect(await rows()).toEqual(["101 nodes alike n000, n001, …"]);
      await page.evaluate("window.__mark = 1");
      // Someone edits the file on n050: the node reports drift, steward repairs it.
      writeFileSync(join(h.root, "n050", "srv", "conf"), "edited by hand");
      await h.report("n050");
      await page.waitForSelector('table.grid tbody a.cell[data-i="app@n050"]', { timeout: 10_000 });
      expect(await rows()).toEqual(["n050", "100 nodes alike n000, n001, …"]);
      expect(await page.$eval('a.cell[data-i="app@n050"]', (a) => a.getAttribute("href"))).toBe(
        "/instances/app@n050",
      );
      expect(await page.evaluate("window.__mark")).toBe(1);
      expect(await page.$eval("#stale", (p) => p.hidden)).toBe(true);
      expect(await watched.faults()).toEqual({ dialogs: [], violations: [], errors: [] });
      await page.close();
    } finally {
      await http.close();
    }
  }, 90_000);
});
