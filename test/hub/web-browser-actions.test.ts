import type { Page } from "puppeteer-core";
import { describe, expect, it } from "vitest";
import { type HubHttp, startHubHttp } from "../../src/hub/http.js";
import { parseOperatorTokens } from "../../src/hub/web/operators.js";
import { chromiumForFile, watch } from "../helpers/chromium.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { type Harness, startHarness } from "./helpers/harness.js";

const TOKEN = "alice-token-0123456789abcdef";

const chromium = chromiumForFile();

async function fleet(): Promise<{ h: Harness; http: HubHttp }> {
  const h = await startHarness({
    files: {
      ...nodes("n1", "n2"),
      "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1", "n2"], resources: [file("conf", "v1")] }),
      // A permanent failure: Blocked, a task for a person.
      "assignments/migrate.yaml": assignmentYaml("migrate", {
        nodes: ["n1"],
        resources: [{ kind: "command", name: "migrate", run: ["/nonexistent/migrate-tool"] }],
      }),
    },
  });
  await h.commit();
  await h.settle();
  const http = await startHubHttp({
    hub: h.hub,
    web: { operators: parseOperatorTokens(`alice ${TOKEN}\n`, "ops") },
  });
  return { h, http };
}

/** What has the keyboard's focus, in words a test can match. */
const FOCUSED = `(() => { const e = document.activeElement;
  return [e.tagName.toLowerCase(), e.getAttribute("aria-label") || e.getAttribute("name") || e.textContent.trim()].join(" "); })()`;

/** Presses Tab until what has the focus reads `wanted`; fails if it never does. */
async function tabTo(page: Page, wanted: string | RegExp, most = 200): Promise<void> {
  const seen: string[] = [];
  for (let i = 0; i < most; i++) {
    await page.keyboard.press("Tab");
    const focused = (await page.evaluate(FOCUSED)) as string;
    if (typeof wanted === "string" ? focused === wanted : wanted.test(focused)) return;
    seen.push(focused);
  }
  throw new Error(`Tab never reached ${wanted}; it went through: ${seen.join(" | ")}`);
}

/** Everything Tab reaches on the page, once round. */
async function tabOrder(page: Page): Promise<string[]> {
  const order: string[] = [];
  for (let i = 0; i < 300; i++) {
    await page.keyboard.press("Tab");
    const focused = (await page.evaluate(FOCUSED)) as string;
    if (order.includes(focused) && focused === order[0]) break;
    order.push(focused);
  }
  return order;
}

/** Presses Enter on what has the focus and waits for the page the form leads to. */
async function enter(page: Page): Promise<void> {
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.keyboard.press("Enter")]);
}

describe("hub - web view actions in a browser", () => {
  it("web - without a token an action is refused (403); signed in, drain works by Tab and Enter and is recorded with the token's name", async () => {
    const { h, http } = await fleet();
    try {
      const page = await chromium().browser.newPage();
      const watched = await watch(page);
      await page.goto(`${http.url}/nodes/n2`, { waitUntil: "load" });
      expect(await page.$$("form[method='post'] button")).toHaveLength(0);
      const refused = await page.evaluate(
        `fetch("/nodes/n2/drain", { method: "POST", body: new URLSearchParams({ reason: "x" }) }).then((r) => r.status)`,
      );
      expect(refused).toBe(403);
      expect((await h.store.nodes.get("n2"))!.draining).toBe(false);

      // Sign in from the page's own link, by keyboard only.
      await tabTo(page, "a sign in to act");
      await enter(page);
      // Autofocus lands at the page's next rendering step, which may come after "load".
      await page.waitForFunction(`document.activeElement?.id === "token"`, { timeout: 5_000 });
      expect(await page.evaluate(FOCUSED)).toBe("input token");
      await page.keyboard.type(TOKEN);
      await enter(page);
      expect(new URL(page.url()).pathname).toBe("/nodes/n2");
      expect(await page.$eval("header .who", (e) => e.textContent)).toContain("signed in as alice");

      await tabTo(page, "input reason");
      await page.keyboard.type("kernel upgrade");
      await page.keyboard.press("Tab");
      expect(await page.evaluate(FOCUSED)).toBe("button Drain node n2");
      await enter(page);
      expect(await h.store.nodes.get("n2")).toMatchObject({
        draining: true,
        drainedBy: "alice",
        drainReason: "kernel upgrade",
      });
      const text = (await page.evaluate("document.body.innerText")) as string;
      expect(text).toContain("node n2 is draining: no new dispatches, desired state kept (by alice)");
      expect(text).toMatch(/drained\s+since .* by alice: kernel upgrade/);
      // Undrain is one Tab-and-Enter away too.
      await tabTo(page, "button Undrain node n2");
      await enter(page);
      expect(await h.store.nodes.get("n2")).toMatchObject({ draining: false });
      expect(await watched.faults()).toEqual({ dialogs: [], violations: [], errors: [] });
      await page.close();
    } finally {
      await http.close();
    }
  }, 60_000);

  it("web - keyboard: every action of the tasks page is reached by Tab and done with Enter, recorded with the operator's name", async () => {
    const { h, http } = await fleet();
    try {
      const task = (await h.store.tasks.list({ status: "open" }))[0]!;
      const page = await chromium().browser.newPage();
      const watched = await watch(page);
      await page.goto(`${http.url}/login?next=/tasks`, { waitUntil: "load" });
      // The page puts the focus in the token field (autofocus): type only once it is there.
      await page.waitForFunction(`document.activeElement?.id === "token"`, { timeout: 5_000 });
      await page.keyboard.type(TOKEN);
      await enter(page);
      expect(new URL(page.url()).pathname).toBe("/tasks");
      // Every form's button is in the Tab order, after a way to skip to the content.
      const order = await tabOrder(page);
      expect(order[0]).toBe("a Skip to content");
      const buttons = (await page.$$eval("form[method='post'] button", (els) =>
        els.map((e) => `button ${e.getAttribute("aria-label") || e.textContent?.trim()}`),
      )) as string[];
      expect(buttons).toEqual([
        "button sign out",
        `button Claim task ${task.id}`,
        `button Resolve task ${task.id}`,
      ]);
      for (const button of buttons) expect(order).toContain(button);

      await tabTo(page, `button Claim task ${task.id}`);
      await enter(page);
      expect(await h.store.tasks.get(task.id)).toMatchObject({ status: "claimed", claimedBy: "alice" });
      await tabTo(page, "textarea action");
      await page.keyboard.type("installed the migrate tool");
      await tabTo(page, `button Resolve task ${task.id}`);
      await enter(page);
      expect(await h.store.tasks.get(task.id)).toMatchObject({
        status: "resolved",
        resolvedBy: "alice",
        action: "installed the migrate tool",
      });
      expect(await page.evaluate("document.body.innerText")).toContain(`task ${task.id} resolved by alice`);
      expect(await watched.faults()).toEqual({ dialogs: [], violations: [], errors: [] });
      await page.close();
    } finally {
      await http.close();
    }
  }, 60_000);
});
