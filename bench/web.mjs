// Benchmark of the web view (`npm run bench:web`, which builds dist/ first).
//
// A simulated fleet of 10,000 instances (BENCH_NODES nodes × BENCH_ASSIGNMENTS assignments; see
// bench/web-fleet.mjs: the real syncer, hub and SQLite store, agents whose reports are simulated),
// in the middle of a canary rollout and with about one node in a hundred failing, served by the
// hub's own HTTP server and looked at in Debian's chromium (puppeteer-core). Figures:
//   web_fleet_page_bytes         the unfiltered `/` as a person first sees it
//   web_fleet_page_render_ms     in chromium, navigation start to the load event: the page loaded
//                                with the feed's snapshot cold (taken for this request), in a
//                                browser that has shown a page before; warm loads, and a freshly
//                                started chromium's first page, are printed as comments
//   web_sse_event_to_paint_ms    median, from the hub learning of an instance's change to the
//                                frame that paints its cell (BENCH_EVENTS changes, one at a time)
// Targets: < 1,000,000 bytes, < 1,000 ms, < 200 ms. BENCH_SCREENSHOT=FILE saves the page as measured.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import puppeteer from "puppeteer-core";
import { startHubHttp } from "../dist/hub/http.js";
import { nodeName, startWebFleet } from "./web-fleet.mjs";

const NODES = Number(process.env.BENCH_NODES ?? 2500);
const ASSIGNMENTS = Number(process.env.BENCH_ASSIGNMENTS ?? 4);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20);
const CHROMIUM = process.env.STEWARD_CHROMIUM ?? "/usr/bin/chromium";
const BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

if (!existsSync(CHROMIUM)) {
  console.error(`bench:web: ${CHROMIUM} is missing — install it: apt-get install -y chromium`);
  process.exit(2);
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const quantile = (values, q) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)];

const dir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), "steward-bench-web-"));
let t0 = performance.now();
const fleet = await startWebFleet({ dir, nodes: NODES, assignments: ASSIGNMENTS });
// The second assignment's new version goes to 5 canaries first; the rest are held by the rollout.
const rollout = await fleet.rollOut(1, 2, 5);
await fleet.settle();
console.log(
  `# ${NODES * ASSIGNMENTS} instances (${NODES} nodes × ${ASSIGNMENTS} assignments) synced and settled in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
);
const http = await startHubHttp({ hub: fleet.hub });

// Bytes: the page as the server sends it (no compression: the hub sends none).
const response = await fetch(`${http.url}/`, { headers: { accept: BROWSER_ACCEPT } });
const body = await response.text();
const bytes = Buffer.byteLength(body);

const profile = mkdtempSync(join(tmpdir(), "steward-bench-chromium-"));
const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  args: [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    `--user-data-dir=${profile}`,
  ],
});
const page = await browser.newPage();
await page.setViewport({ width: 1400, height: 900 });
const loadMs = async () => {
  await page.goto(`${http.url}/`, { waitUntil: "load" });
  return page.evaluate(() => {
    const [navigation] = performance.getEntriesByType("navigation");
    return navigation.loadEventEnd - navigation.startTime;
  });
};
// A browser's very first page also starts its renderer: printed, not the figure.
const freshBrowser = await loadMs();
// A person's browser has been running: one page of the hub before, then `/` with the feed's
// snapshot let go (as after a while with nobody looking), taken again for this request.
await page.goto(`${http.url}/login`, { waitUntil: "load" });
http.web.feed.lookAgain();
const first = await loadMs();
const later = [];
for (let i = 0; i < 4; i++) later.push(await loadMs());
// BENCH_SCREENSHOT=FILE keeps a picture of the page as measured.
if (process.env.BENCH_SCREENSHOT)
  await page.screenshot({ path: process.env.BENCH_SCREENSHOT, fullPage: true });
const shape = await page.evaluate(() => ({
  rows: document.querySelectorAll("table.grid tbody tr").length,
  groups: document.querySelectorAll("table.grid tbody tr.group").length,
  cells: document.querySelectorAll("table.grid a.cell").length,
}));

// Event to paint: one drifted instance at a time, its cell watched in the open page.
await page.waitForSelector("#live[data-state='on']");
await page.evaluate(() => {
  window.__painted = new Map();
  new MutationObserver((records) => {
    for (const record of records) {
      const cell = record.target;
      if (!cell.dataset?.i || !cell.dataset.at) continue;
      const sent = Number(cell.dataset.at);
      const instance = cell.dataset.i;
      if (window.__painted.has(instance)) continue;
      // The frame that shows it: the callback runs as that frame is drawn.
      requestAnimationFrame(() =>
        window.__painted.set(instance, performance.timeOrigin + performance.now() - sent),
      );
    }
  }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ["data-s"] });
});
const latencies = [];
for (let k = 0; k < EVENTS; k++) {
  // Nodes spread over the fleet: most are in grouped rows (their cell gets a row of its own first).
  const i = (k * 127 + 3) % NODES;
  const instance = `base@${nodeName(i)}`;
  await fleet.drift(i, "base");
  const latency = await page
    .waitForFunction((key) => window.__painted.get(key), { timeout: 10_000, polling: 20 }, instance)
    .then((handle) => handle.jsonValue());
  latencies.push(latency);
  await fleet.settle();
}
const grouped = shape.groups > 0 ? ` (${shape.groups} of them grouping alike nodes)` : "";
console.log(
  `# the page: ${shape.rows} rows${grouped}, ${shape.cells} cells; rollout ${rollout.slice(0, 12)} in progress`,
);
console.log(`figure web_fleet_page_bytes ${bytes} bytes`);
console.log(`figure web_fleet_page_render_ms ${first.toFixed(0)} ms`);
console.log(
  `# later loads (snapshot warm): ${later.map((ms) => ms.toFixed(0)).join(", ")} ms; a freshly started chromium's first page: ${freshBrowser.toFixed(0)} ms`,
);
console.log(`figure web_sse_event_to_paint_ms ${median(latencies).toFixed(0)} ms`);
console.log(
  `# event to paint over ${latencies.length} changes: p95 ${quantile(latencies, 0.95).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms`,
);
// The revision page of the rollout at this size, for the record.
t0 = performance.now();
const revisionPage = await (
  await fetch(`${http.url}/revisions/${rollout}`, { headers: { accept: BROWSER_ACCEPT } })
).text();
console.log(
  `# /revisions/${rollout.slice(0, 12)}: ${Buffer.byteLength(revisionPage)} bytes in ${(performance.now() - t0).toFixed(0)} ms; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} (2-core machines shared with other work measure slower)`,
);
await browser.close();
await http.close();
await fleet.close();
rmSync(profile, { recursive: true, force: true });
rmSync(dir, { recursive: true, force: true });
process.exit(0);
