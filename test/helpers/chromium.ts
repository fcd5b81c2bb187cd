/**
 * A real browser for tests: Debian's `chromium`, headless, driven by puppeteer-core (no browser
 * download), with its own temporary profile. A missing chromium fails loudly, naming the package,
 * as a missing nats-server or sshd does. `watch` records what a page must never do: open a dialog
 * (an injected `alert`), break its Content-Security-Policy, or throw.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { afterAll, beforeAll } from "vitest";

export const CHROMIUM = process.env.STEWARD_CHROMIUM ?? "/usr/bin/chromium";

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

/** Starts headless chromium for one test file. */
export async function startChromium(): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `${CHROMIUM} is missing — install it: apt-get install -y chromium (the web view's tests run a real browser)`,
    );
  const profile = mkdtempSync(join(tmpdir(), "steward-chromium-"));
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
  return {
    browser,
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** What a watched page did that it must not. */
export interface PageFaults {
  dialogs: string[];
  /** CSP violations, from the page's own events and from the console. */
  violations: string[];
  errors: string[];
}

/** Records dialogs, CSP violations and script errors of `page` from now on (dialogs are dismissed). */
export async function watch(page: Page): Promise<{ faults: () => Promise<PageFaults> }> {
  const dialogs: string[] = [];
  const consoleViolations: string[] = [];
  const errors: string[] = [];
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on("console", (message) => {
    if (/Content Security Policy|Content-Security-Policy/i.test(message.text()))
      consoleViolations.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(String(error)));
  // Runs in the page (as text: this project's types have no DOM).
  await page.evaluateOnNewDocument(`
    window.__violations = [];
    document.addEventListener("securitypolicyviolation", (event) =>
      window.__violations.push(event.violatedDirective + " " + event.blockedURI));
  `);
  return {
    async faults() {
      const reported = ((await page.evaluate("window.__violations || []").catch(() => [])) as string[]) ?? [];
      return { dialogs, violations: [...reported, ...consoleViolations], errors };
    },
  };
}

/** Where tests leave what a person may want to look at (screenshots): `test-output/<area>/`. */
export function testOutput(area: string): string {
  const dir = resolve(process.env.STEWARD_TEST_OUTPUT ?? "test-output", area);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Starts chromium before the file's tests and closes it after them; call at the top of a test file. */
export function chromiumForFile(): () => TestBrowser {
  let chromium: TestBrowser | undefined;
  beforeAll(async () => {
    chromium = await startChromium();
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
  });
  return () => {
    if (!chromium) throw new Error("chromium has not started: call chromiumForFile() at the top of the file");
    return chromium;
  };
}
