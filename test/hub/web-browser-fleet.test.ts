import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureExampleRepo } from "../../src/cli/up.js";
import { fleetStatus } from "../../src/hub/answer.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import { instanceViews } from "../../src/hub/views.js";
import { startChromium, type TestBrowser, testOutput, watch } from "../helpers/chromium.js";
import { exampleRepoOnFreePorts } from "../helpers/example-repo.js";
import { type RunningUp, startUp } from "../helpers/steward-up.js";
import { eventually } from "./helpers/process.js";

let dir: string;
let state: string;
let up: RunningUp;
let chromium: TestBrowser;

const git = (...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
    cwd: join(state, "repo"),
    stdio: "pipe",
  }).toString();

/** The hub's records as steward status reads them (the database, read while the hub runs). */
async function records<T>(read: (store: SqliteStore) => Promise<T>): Promise<T> {
  const store = new SqliteStore(join(state, "hub.db"));
  try {
    return await read(store);
  } finally {
    await store.close();
  }
}

/** The cells of the grid as the page shows them: instance → [state, generation]. */
function cells(page: Page): Promise<Record<string, [string, string]>> {
  return page.evaluate(`Object.fromEntries([...document.querySelectorAll("table.grid a.cell[data-i]")].map(
    (a) => [a.dataset.i, [a.dataset.s, a.querySelector(".gen").textContent]]))`) as Promise<
    Record<string, [string, string]>
  >;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "steward-web-fleet-"));
  state = join(dir, "state");
  // The example fleet as `steward up` makes it, its web nodes on free ports.
  const example = join(dir, "example");
  await exampleRepoOnFreePorts(example);
  await ensureExampleRepo(join(state, "repo"), example);
  chromium = await startChromium();
  // An xdg-open that notes what it was asked to open: `--open` is the desktop's business.
  const bin = join(dir, "bin");
  mkdirSync(bin);
  writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\necho "$1" > "${join(dir, "opened")}"\n`, { mode: 0o755 });
  up = await startUp({ cwd: dir, state, args: ["--open"], env: { PATH: `${bin}:${process.env.PATH}` } });
}, 90_000);

afterAll(async () => {
  await up?.stop();
  await chromium?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("hub - the web view in a browser, on the example fleet", () => {
  it("web - steward up prints the fleet page's URL and --open hands it to xdg-open", async () => {
    expect(up.output()).toMatch(
      /steward up: the fleet, live: http:\/\/127\.0\.0\.1:\d+\/ \(while steward up runs\)\n/,
    );
    expect(
      await eventually(() => existsSync(join(dir, "opened")) && readFileSync(join(dir, "opened"), "utf8")),
    ).toBe(`${up.page}\n`);
  });

  it("web - after steward up the fleet page shows every node and assignment, each instance's state as steward status says, and a screenshot is kept", async () => {
    // Until the local nodes converged (the canary's soak is 5 s).
    await eventually(
      () =>
        records(async (s) => (await instanceViews(s)).filter((i) => i.state === "converged").length === 6),
      60_000,
      "the example's local instances to converge",
    );
    const page = await chromium.browser.newPage();
    const watched = await watch(page);
    await page.setViewport({ width: 1400, height: 900 });
    await page.goto(up.page, { waitUntil: "load" });
    const shown = await cells(page);
    const { views, nodes, answer } = await records(async (s) => ({
      views: await instanceViews(s),
      nodes: (await s.nodes.list()).map((n) => n.name),
      answer: fleetStatus(await instanceViews(s), await s.conditions.list({ status: "open" })).answer,
    }));
    expect(nodes.sort()).toEqual(["db-1", "edge-1", "edge-2", "web-1", "web-2"]);
    const rows = (await page.evaluate(
      `[...document.querySelectorAll("table.grid tbody th")].map((th) => th.textContent.trim())`,
    )) as string[];
    expect(rows.sort()).toEqual(nodes);
    const columns = (await page.evaluate(
      `[...document.querySelectorAll("table.grid thead th.col")].map((th) => th.textContent.trim())`,
    )) as string[];
    expect(columns).toEqual([...new Set(views.map((v) => v.assignment))].sort());
    expect(Object.keys(shown).sort()).toEqual(views.map((v) => v.instance).sort());
    for (const view of views)
      expect(shown[view.instance], view.instance).toEqual([view.state, String(view.generation)]);
    // The example's edge nodes are on transports steward up does not run: not right, as steward status says.
    expect(answer).toBe("not-right");
    expect(await page.$eval(".answer strong", (e) => e.textContent)).toBe("not right");
    await page.waitForSelector("#live[data-state='on']");
    const output = testOutput("web");
    await page.screenshot({ path: join(output, "fleet.png"), fullPage: true });
    const head = git("rev-parse", "HEAD").trim();
    await page.goto(`${up.url}/revisions/${head}`, { waitUntil: "load" });
    expect(await page.$eval("h1", (e) => e.textContent)).toContain("The example fleet, from steward up");
    await page.screenshot({ path: join(output, "revision.png"), fullPage: true });
    expect(readFileSync(join(output, "revision.png")).subarray(1, 4).toString()).toBe("PNG");
    expect(await watched.faults()).toEqual({ dialogs: [], violations: [], errors: [] });
    await page.close();
  }, 90_000);

  it("web - live: a commit made while the page is open turns its cells converging, then converged, without a reload", async () => {
    const page = await chromium.browser.newPage();
    const watched = await watch(page);
    await page.goto(up.page, { waitUntil: "load" });
    await page.waitForSelector("#live[data-state='on']");
    // Every state each cell is painted in, and a mark a reload would lose.
    await page.evaluate(`
      window.__painted = [];
      window.__mark = "still the same page";
      const note = (cell) => window.__painted.push(cell.dataset.i + " " + cell.dataset.s + " " + cell.querySelector(".gen").textContent);
      // A cell painted in place, or drawn anew with its region (a tab that was hidden catches up so).
      new MutationObserver((records) => {
        for (const r of records) {
          if (r.type === "attributes" && r.target.dataset && r.target.dataset.i) note(r.target);
          for (const added of r.addedNodes) if (added.querySelectorAll) added.querySelectorAll("a.cell[data-i]").forEach(note);
        }
      }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-s"] });
    `);
    const web = join(state, "repo", "assignments", "web.yaml");
    writeFileSync(web, readFileSync(web, "utf8").replace(/1\.4\.2/g, "1.4.3"));
    git("commit", "-qam", "web 1.4.3");
    await page.waitForFunction(`document.querySelector('a.cell[data-i="web@web-2"]')?.dataset.s === "held"`, {
      timeout: 60_000,
      polling: 100,
    });
    // Mid-rollout, as a person opening the page then sees it: the canary soaking, web-2 held.
    const picture = await chromium.browser.newPage();
    await picture.setViewport({ width: 1400, height: 820 });
    await picture.goto(up.page, { waitUntil: "load" });
    await picture.screenshot({ path: join(testOutput("web"), "fleet-rollout.png") });
    await picture.close();
    await page.waitForFunction(
      `(() => { const c = document.querySelector('a.cell[data-i="web@web-2"]');
        return c && c.dataset.s === "converged" && c.querySelector(".gen").textContent === "2"; })()`,
      { timeout: 90_000, polling: 200 },
    );
    const painted = (await page.evaluate("window.__painted")) as string[];
    for (const instance of ["web@web-1", "web@web-2"]) {
      const mine = painted.filter((p) => p.startsWith(`${instance} `));
      const moving = mine.findIndex((p) => /^\S+ (converging|verifying) 2$/.test(p));
      expect(moving, `${instance}: ${mine.join(", ")}`).toBeGreaterThanOrEqual(0);
      expect(mine.slice(moving + 1), `${instance}: ${mine.join(", ")}`).toContain(`${instance} converged 2`);
    }
    // web-2 waited for the canary first.
    expect(painted.indexOf("web@web-2 held 2")).toBeGreaterThanOrEqual(0);
    expect(await page.evaluate("window.__mark")).toBe("still the same page");
    expect(await page.evaluate(`performance.getEntriesByType("navigation").length`)).toBe(1);
    expect(await watched.faults()).toEqual({ dialogs: [], violations: [], errors: [] });
    await page.close();
  }, 120_000);
});
