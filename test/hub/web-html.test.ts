import { Script } from "node:vm";
import { describe, expect, it } from "vitest";
import { DISPLAY_STATES } from "../../src/hub/states.js";
import { ASSETS, SCRIPT_ASSET } from "../../src/hub/web/assets.js";
import { escapeHtml, html, join, path, trusted } from "../../src/hub/web/html.js";
import { cellWords, relative, stateBadge, stateCell } from "../../src/hub/web/layout.js";
import { wantsHtml } from "../../src/hub/web/web.js";

const HOSTILE = [
  "<script>alert(1)</script>",
  '"><img src=x onerror=alert(1)>',
  "' onmouseover='alert(1)",
  "&amp; already an entity",
  "</textarea><svg onload=alert(1)>",
];

describe("hub - web view markup", () => {
  it.each(HOSTILE)(
    "web - an interpolated value is text in content and in a quoted attribute: %s",
    (value) => {
      const out = html`<p title="${value}">${value}</p>`.text;
      expect(out).not.toMatch(/<(script|img|svg)/i);
      expect(out).not.toContain('"><');
      // The attribute is one attribute: no quote of the value closes it.
      expect(out.match(/"/g)).toHaveLength(2);
      expect(out).toBe(`<p title="${escapeHtml(value)}">${escapeHtml(value)}</p>`);
    },
  );

  it("web - markup made by html is not escaped again; arrays join; nothing renders as nothing", () => {
    const inner = html`<b>${"<i>"}</b>`;
    expect(html`<p>${inner}${[html`<br>`, "x&y"]}${undefined}${null}${false}${0}</p>`.text).toBe(
      "<p><b>&lt;i&gt;</b><br>x&amp;y0</p>",
    );
    expect(join(["a<", trusted("<hr>")], html`, `).text).toBe("a&lt;, <hr>");
  });

  it("web - paths are encoded segment by segment and keep the @ of an instance", () => {
    expect(path(["instances", "web@web-1"])).toBe("/instances/web@web-1");
    expect(path(["nodes", "a/b?c#d"])).toBe("/nodes/a%2Fb%3Fc%23d");
    expect(path([], new URLSearchParams({ label: "role=web" }))).toBe("/?label=role%3Dweb");
    expect(path(["nodes", "javascript:alert(1)"])).toBe("/nodes/javascript%3Aalert(1)");
  });

  it("web - every display state is drawn with its symbol and words, never colour alone", () => {
    for (const info of Object.values(DISPLAY_STATES)) {
      const badge = stateBadge(info.state).text;
      expect(badge).toContain(info.symbol);
      expect(badge).toContain(info.label);
      expect(badge).toContain(`t-${info.tone}`);
      const view = { instance: "web@web-1", state: info.state, generation: 7, observedGeneration: 6 };
      const cell = stateCell(view).text;
      expect(cell).toContain(info.symbol);
      expect(cell).toContain(">7<");
      expect(cell).toContain(`aria-label="${escapeHtml(cellWords(view))}"`);
      expect(cellWords(view)).toBe(`web@web-1: ${info.label}, generation 7 (observed 6)`);
    }
  });

  it.each([
    ["text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", true],
    ["text/html", true],
    ["*/*", false],
    [undefined, false],
    ["application/json", false],
    ["application/json, text/html;q=0.5", false],
    ["text/html;q=0.9, application/json;q=0.9", true],
    ["text/html;q=0", false],
    ["application/vnd.github+json", false],
  ])("web - Accept %s asks for HTML: %s", (accept, expected) => {
    expect(wantsHtml(accept)).toBe(expected);
  });

  it("web - the live script parses and carries the one state mapping; assets are named by their content", () => {
    expect(() => new Script(SCRIPT_ASSET.body.toString("utf8"))).not.toThrow();
    for (const info of Object.values(DISPLAY_STATES))
      expect(SCRIPT_ASSET.body.toString()).toContain(JSON.stringify(info.label));
    for (const [name, _asset] of ASSETS)
      expect(name).toMatch(/^\/assets\/[a-z]+-[0-9a-f]{12}\.(css|js|svg)$/);
  });

  it.each([
    [-42_000, "42s ago"],
    [-3 * 60_000, "3m ago"],
    [-90_000, "90s ago"],
    [2 * 3_600_000, "in 2h"],
    [-9 * 86_400_000, "9d ago"],
    [0, "now"],
  ])("web - a time %d ms from now reads %s", (offset, words) => {
    const now = new Date("2025-01-01T00:00:00Z");
    expect(relative(new Date(now.getTime() + offset).toISOString(), now)).toBe(words);
  });
});
