import { describe, expect, it } from "vitest";
import { type HubHttp, startHubHttp } from "../../src/hub/http.js";
import { chromiumForFile, watch } from "../helpers/chromium.js";
import { assignmentYaml, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const SCRIPT = "<script>alert('script')</script>";
const IMG = `"><img src=x onerror=alert('img')>`;
/** What the failing command prints: Node-style crash output, its error line carrying both. */
const OUTPUT = [
  "node:events:502",
  "      throw er;",
  `Error: listen failed ${SCRIPT} ${IMG}`,
  "    at Server.listen (node:net:1)",
];
const MESSAGE = `web: ${SCRIPT} ${IMG}`;

const chromium = chromiumForFile();

describe("hub - the web view in a browser, with hostile text", () => {
  it("web - a failing command's instance page shows its evidence line; a commit message and command output with <script> and onerror render as text and run nothing", async () => {
    const script = OUTPUT.map((line) => `printf '%s\\n' '${line.replace(/'/g, `'"'"'`)}' >&2`).join("; ");
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/web.yaml": assignmentYaml("web", {
          nodes: ["n1"],
          resources: [shell("start", `${script}; exit 3`)],
          budget: { attempts: 10, within: "1h" },
        }),
      },
    });
    const { sha } = await h.commit(MESSAGE);
    await h.settle();
    let http: HubHttp | undefined;
    try {
      http = await startHubHttp({ hub: h.hub });
      const attempt = (await h.intent("web@n1")).lastAttemptId!;
      const page = await chromium().browser.newPage();
      const watched = await watch(page);
      await page.goto(`${http.url}/instances/web@n1`, { waitUntil: "load" });
      // The line of the evidence that names the error, as describe shows it, as text.
      const lines = (await page.$$eval(".errorline", (els) => els.map((e) => e.textContent))) as string[];
      expect(lines).toContain(OUTPUT[2]);
      const evidence = (await page.$$eval("pre", (els) => els.map((e) => e.textContent))) as string[];
      expect(evidence.some((text) => text?.includes(OUTPUT.join("\n")))).toBe(true);
      for (const path of [
        "/",
        `/revisions/${sha}`,
        `/instances/web@n1`,
        `/attempts/${attempt}`,
        "/nodes/n1",
        "/conditions",
        "/tasks",
      ]) {
        await page.goto(`${http.url}${path}`, { waitUntil: "load" });
        const text = (await page.evaluate("document.body.innerText")) as string;
        if (path === `/revisions/${sha}` || path === "/") expect(text, path).toContain(MESSAGE);
        if (path.startsWith("/instances") || path.startsWith("/attempts"))
          expect(text, path).toContain(OUTPUT[2]);
        // Nothing the text holds became an element.
        expect(await page.$$("img"), path).toHaveLength(0);
        expect(await page.$$("script:not([src])"), path).toHaveLength(0);
      }
      // Let the live script run a while: a region it fetches again is text too.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await watched.faults()).toEqual({ dialogs: [], violations: [], errors: [] });
      await page.close();
    } finally {
      await http?.close();
    }
  }, 60_000);

  it("web - the policy holds: a script the page did not come with is refused and reported", async () => {
    const h = await startHarness({ files: { ...nodes("n1") } });
    await h.commit();
    const http = await startHubHttp({ hub: h.hub });
    try {
      const page = await chromium().browser.newPage();
      const watched = await watch(page);
      await page.goto(`${http.url}/`, { waitUntil: "load" });
      // What an injection would be, if escaping ever failed: the policy refuses it.
      await page.evaluate(`(() => {
        const s = document.createElement("script");
        s.textContent = "alert('inline')";
        document.body.append(s);
        const i = document.createElement("img");
        i.setAttribute("src", "data:,x");
        i.setAttribute("onerror", "alert('handler')");
        document.body.append(i);
      })()`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const faults = await watched.faults();
      expect(faults.dialogs).toEqual([]);
      expect(faults.violations.join("\n")).toMatch(/script-src/);
      await page.close();
    } finally {
      await http.close();
    }
  }, 60_000);
});
