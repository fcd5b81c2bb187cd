/**
 * The web view's two static files, served by the hub itself (no build step, no CDN): the
 * stylesheet and the script that makes pages live. They live in the code as text so every way of
 * running steward — the package, the bundled CLI, tests — serves the same bytes; each is served
 * under a name with its content hash, cached for good, and the strict Content-Security-Policy
 * allows exactly these (`script-src 'self'`, no inline script or style).
 *
 * The script only moves what the server rendered: it paints a cell from an event (the states'
 * words and symbols come from the one mapping, states.ts, written into it), and fetches a page's
 * regions again when an event says they changed. Without it every page still works.
 */
import { createHash } from "node:crypto";
import { DISPLAY_STATES } from "../states.js";

// biome-ignore lint/complexity/noUselessStringRaw: raw, so a backslash written here reaches the browser as written
const STYLESHEET = String.raw`
:root {
  color-scheme: light dark;
  --bg: #f6f8fa; --panel: #ffffff; --ink: #1f2328; --soft: #59636e; --line: #d1d9e0; --head: #24292f;
  --link: #0969da; --focus: #0969da;
  --ok: #1a7f37; --ok-bg: #dafbe1; --progress: #0969da; --progress-bg: #ddf4ff;
  --attention: #9a6700; --attention-bg: #fff8c5; --failure: #cf222e; --failure-bg: #ffebe9;
  --muted: #59636e; --muted-bg: #eaeef2;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --panel: #151b23; --ink: #e6edf3; --soft: #9198a1; --line: #3d444d; --head: #010409;
    --link: #4493f8; --focus: #4493f8;
    --ok: #3fb950; --ok-bg: #12361d; --progress: #4493f8; --progress-bg: #0c2d57;
    --attention: #d29922; --attention-bg: #3b2e0a; --failure: #f85149; --failure-bg: #4a1316;
    --muted: #9198a1; --muted-bg: #262c36;
  }
}
* { box-sizing: border-box; }
html { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; }
body { margin: 0; background: var(--bg); color: var(--ink); }
a { color: var(--link); text-decoration: none; }
a:hover { text-decoration: underline; }
:focus-visible { outline: 2px solid var(--focus); outline-offset: 2px; border-radius: 3px; }
code, pre, .mono, .sha { font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.skip { position: absolute; left: -999px; top: 0; background: var(--panel); padding: 6px 10px; z-index: 2; }
.skip:focus { left: 8px; }
header.top { background: var(--head); color: #f0f6fc; display: flex; align-items: center; gap: 20px; padding: 0 20px; height: 48px; }
header.top .brand { font-weight: 700; font-size: 16px; color: #f0f6fc; letter-spacing: .02em; }
header.top nav { display: flex; gap: 4px; flex: 1; }
header.top nav a { color: #d1d9e0; padding: 6px 10px; border-radius: 6px; }
header.top nav a[aria-current="page"], header.top nav a:hover { background: rgba(255,255,255,.12); color: #fff; text-decoration: none; }
header.top .who { color: #d1d9e0; display: flex; gap: 10px; align-items: center; font-size: 13px; }
header.top .who a, header.top .who button { color: #d1d9e0; }
.live { font-size: 12px; color: #9198a1; }
.live[data-state="on"]::before { content: "● "; color: #3fb950; }
.live[data-state="off"]::before { content: "○ "; }
main { padding: 20px; max-width: 1500px; margin: 0 auto; }
h1 { font-size: 22px; margin: 0 0 4px; font-weight: 600; }
h1 .kind { color: var(--soft); font-weight: 400; font-size: 15px; margin-right: 8px; }
h2 { font-size: 15px; margin: 0 0 10px; font-weight: 600; }
h2 .count { color: var(--soft); font-weight: 400; }
.sub { color: var(--soft); margin: 0 0 16px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin-bottom: 16px; }
main.fleet { display: grid; grid-template-columns: minmax(0, 1fr) 400px; column-gap: 16px; align-items: start; }
main.fleet > * { grid-column: 1; min-width: 0; }
main.fleet > .side { grid-column: 2; grid-row: 1 / span 4; position: sticky; top: 12px; }
@media (max-width: 1100px) { main.fleet { grid-template-columns: minmax(0, 1fr); } main.fleet > .side { grid-column: 1; grid-row: auto; position: static; } }
.answer { display: flex; align-items: center; gap: 14px; padding: 14px 16px; border-radius: 8px; margin-bottom: 16px; border: 1px solid; }
.answer .big { font-size: 26px; line-height: 1; }
.answer strong { font-size: 18px; }
.answer p { margin: 2px 0 0; color: var(--soft); }
.answer.a-right { background: var(--ok-bg); border-color: var(--ok); }
.answer.a-converging { background: var(--progress-bg); border-color: var(--progress); }
.answer.a-not-right { background: var(--failure-bg); border-color: var(--failure); }
.chips { display: flex; flex-wrap: wrap; gap: 6px; margin: 0 0 12px; padding: 0; list-style: none; }
.chip { display: inline-flex; gap: 6px; align-items: center; padding: 3px 10px; border-radius: 999px; border: 1px solid; font-size: 13px; }
.chip b { font-variant-numeric: tabular-nums; }
.chip[aria-current="true"] { box-shadow: 0 0 0 2px var(--focus); }
.t-ok { color: var(--ok); background: var(--ok-bg); border-color: var(--ok); }
.t-progress { color: var(--progress); background: var(--progress-bg); border-color: var(--progress); }
.t-attention { color: var(--attention); background: var(--attention-bg); border-color: var(--attention); }
.t-failure { color: var(--failure); background: var(--failure-bg); border-color: var(--failure); }
.t-muted { color: var(--muted); background: var(--muted-bg); border-color: var(--muted); }
.badge { display: inline-flex; gap: 5px; align-items: center; padding: 1px 8px; border-radius: 999px; border: 1px solid; font-size: 12.5px; white-space: nowrap; }
form.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin: 12px 0 0; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--soft); gap: 2px; }
input, select, textarea, button { font: inherit; color: var(--ink); background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 5px 8px; }
textarea { width: 100%; min-height: 3em; }
button { cursor: pointer; background: var(--bg); font-weight: 500; }
button:hover { border-color: var(--soft); }
button.primary { background: var(--ok); border-color: var(--ok); color: #fff; }
button.danger { background: var(--failure-bg); border-color: var(--failure); color: var(--failure); }
.linkish { background: none; border: 0; padding: 0; color: var(--link); font-weight: 400; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { font-size: 12px; color: var(--soft); font-weight: 600; position: sticky; top: 0; background: var(--panel); z-index: 1; }
tbody tr:hover { background: color-mix(in srgb, var(--bg) 60%, transparent); }
.grid-wrap { overflow: auto; max-height: 75vh; }
table.grid { width: auto; min-width: 60%; }
table.grid th[scope="row"] { white-space: nowrap; font-weight: 500; padding-right: 24px; }
table.grid td { padding: 3px 4px; }
table.grid thead th.col { text-align: center; }
.cell { display: inline-flex; justify-content: center; align-items: center; gap: 4px; min-width: 3.6em; height: 22px; padding: 0 6px; border-radius: 4px; border: 1px solid; font-variant-numeric: tabular-nums; font-size: 13px; }
.cell:hover { text-decoration: none; filter: brightness(.95); }
.cell.out { opacity: .35; }
.sym[data-sym="⏸"] { font-size: 0; }
.sym[data-sym="⏸"]::before { content: ""; display: inline-block; box-sizing: border-box; width: 9px; height: 10px; border-left: 3px solid; border-right: 3px solid; vertical-align: -1px; }
.cell .gen { color: var(--soft); font-size: 11.5px; align-self: center; }
.none { color: var(--line); display: inline-block; min-width: 3.6em; text-align: center; }
.group details summary { cursor: pointer; color: var(--soft); }
.group details summary b { color: var(--ink); }
.group details .members { max-height: 12em; overflow: auto; display: flex; flex-wrap: wrap; gap: 2px 10px; padding: 6px 0; font-weight: 400; max-width: 40em; }
.bars { display: grid; grid-template-columns: max-content minmax(120px, 1fr) max-content; gap: 6px 12px; align-items: center; }
.bars .name { font-weight: 500; }
.bars .what { color: var(--soft); font-size: 13px; }
svg.bar { width: 100%; height: 12px; display: block; border-radius: 3px; background: var(--muted-bg); }
.f-ok { fill: var(--ok); } .f-progress { fill: var(--progress); } .f-attention { fill: var(--attention); }
.f-failure { fill: var(--failure); } .f-muted { fill: var(--muted); }
ol.conditions { list-style: none; padding: 0; margin: 0; }
ol.conditions li { padding: 8px 0; border-bottom: 1px solid var(--line); }
ol.conditions li:last-child { border-bottom: 0; }
.ctype { font-weight: 600; }
.msg { overflow-wrap: anywhere; }
.soft { color: var(--soft); }
.small { font-size: 12.5px; }
dl.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 4px 16px; margin: 0; }
dl.facts dt { color: var(--soft); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; overflow: auto; max-height: 24em; margin: 6px 0; white-space: pre-wrap; overflow-wrap: anywhere; }
.errorline { border-left: 3px solid var(--failure); background: var(--failure-bg); padding: 4px 8px; margin: 6px 0; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; overflow-wrap: anywhere; }
.actions { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin-top: 10px; }
.actions form { display: flex; gap: 6px; align-items: end; flex-wrap: wrap; }
.actions textarea { min-width: 28em; }
.actions label { display: flex; flex-direction: column; font-size: 12px; color: var(--soft); gap: 2px; }
.hint { color: var(--soft); font-size: 12.5px; margin: 8px 0 0; }
.notice { background: var(--attention-bg); border: 1px solid var(--attention); padding: 8px 12px; border-radius: 6px; margin-bottom: 12px; }
.notice.done { background: var(--ok-bg); border-color: var(--ok); }
.pager { display: flex; gap: 12px; align-items: center; margin-top: 10px; color: var(--soft); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); column-gap: 16px; align-items: start; }
.login { max-width: 420px; margin: 40px auto; }
.login label { display: flex; flex-direction: column; gap: 4px; margin: 10px 0; }
footer { color: var(--soft); font-size: 12px; text-align: center; padding: 16px; }
`;

/** The client: live cells and regions (see the module comment). No template literals: this is one. */
// biome-ignore lint/complexity/noUselessStringRaw: raw, so a regular expression's backslashes reach the browser
const SCRIPT = String.raw`
(function () {
  "use strict";
  var body = document.body;
  var source = body.getAttribute("data-events");
  var indicator = document.getElementById("live");
  if (!source || !window.EventSource) return;
  var timers = new Map();
  var staleCount = 0;

  function pathOf(segments) {
    return "/" + segments.map(function (s) { return encodeURIComponent(s).replace(/%40/g, "@"); }).join("/");
  }
  function words(view) {
    var info = STATES[view.s];
    var text = view.i + ": " + info.label + ", generation " + view.g;
    if (view.o !== undefined && view.o !== view.g) text += " (observed " + view.o + ")";
    return text;
  }
  function paint(cell, view) {
    var info = STATES[view.s];
    if (!info) return;
    for (var name of Array.from(cell.classList)) if (name.indexOf("t-") === 0) cell.classList.remove(name);
    cell.classList.add("t-" + info.tone);
    cell.setAttribute("data-s", view.s);
    var sym = cell.querySelector(".sym");
    sym.textContent = info.symbol;
    sym.setAttribute("data-sym", info.symbol);
    cell.querySelector(".gen").textContent = String(view.g);
    cell.title = words(view);
    cell.setAttribute("aria-label", words(view));
    cell.setAttribute("data-at", String(view.t));
  }
  // The nodes of each grouped row (its data-members), read once per row.
  var members = new WeakMap();
  function groupOf(node) {
    for (var row of document.querySelectorAll("tr.group[data-members]")) {
      var set = members.get(row);
      if (!set) {
        set = new Set(row.getAttribute("data-members").split(" "));
        members.set(row, set);
      }
      if (set.has(node)) return row;
    }
    return null;
  }
  // A node of a grouped row changed: it gets a row of its own, a copy of its group's, as the server
  // would have drawn it; then its cell is painted.
  function promote(row, view) {
    var single = row.cloneNode(true);
    single.classList.remove("group");
    single.removeAttribute("data-members");
    var head = single.querySelector("th");
    var link = document.createElement("a");
    link.href = pathOf(["nodes", view.n]);
    link.textContent = view.n;
    head.replaceChildren(link);
    for (var cell of single.querySelectorAll("a.cell[data-a]")) {
      var instance = cell.getAttribute("data-a") + "@" + view.n;
      cell.setAttribute("data-i", instance);
      cell.href = pathOf(["instances", instance]);
    }
    row.parentNode.insertBefore(single, row);
    members.get(row).delete(view.n);
    var listed = row.querySelector('[data-n="' + CSS.escape(view.n) + '"]');
    if (listed) listed.remove();
    var count = row.querySelector("[data-count]");
    var left = Number(count.getAttribute("data-count")) - 1;
    count.setAttribute("data-count", String(left));
    count.textContent = left.toLocaleString("en-US");
    if (left === 0) row.remove();
    return single.querySelector('a.cell[data-i="' + CSS.escape(view.i) + '"]');
  }
  function onInstance(view) {
    var cells = document.querySelectorAll('[data-i="' + CSS.escape(view.i) + '"]');
    if (cells.length === 0 && view.s) {
      var row = groupOf(view.n);
      var cell = row ? promote(row, view) : null;
      if (cell) cells = [cell];
      else if (document.querySelector("[data-grid]")) notice();
    }
    for (var each of cells) {
      var pinned = each.getAttribute("data-g");
      if (view.s && (!pinned || Number(pinned) === view.g)) paint(each, view);
    }
  }
  function notice() {
    var box = document.getElementById("stale");
    if (!box) return;
    staleCount += 1;
    box.hidden = false;
    box.querySelector("b").textContent = String(staleCount);
  }
  // Where the keyboard is, so a region drawn again gives the focus back to the same control.
  function focusKey(region) {
    var el = document.activeElement;
    if (!el || el === document.body || !region.contains(el)) return null;
    if (el.id) return "#" + CSS.escape(el.id);
    var form = el.closest("form");
    if (form && el.tagName === "BUTTON") return 'form[action="' + CSS.escape(form.getAttribute("action")) + '"] button';
    if (el.tagName === "A") return 'a[href="' + CSS.escape(el.getAttribute("href")) + '"]';
    return null;
  }
  function busy(region) {
    var active = document.activeElement;
    return active && region.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
  }
  function refresh(region) {
    if (busy(region)) {
      timers.set(region, setTimeout(function () { refresh(region); }, 2000));
      return;
    }
    timers.delete(region);
    var open = Array.from(region.querySelectorAll("details[open][id]")).map(function (d) { return d.id; });
    fetch(location.pathname + location.search, {
      headers: { "X-Steward-Region": region.getAttribute("data-region") },
      credentials: "same-origin",
    })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (text) {
        if (busy(region)) return schedule(region);
        var focused = focusKey(region);
        var template = document.createElement("template");
        template.innerHTML = text;
        region.replaceChildren(template.content);
        var again = focused && region.querySelector(focused);
        if (again) again.focus();
        for (var id of open) {
          var details = document.getElementById(id);
          if (details) details.open = true;
        }
      })
      .catch(function () { schedule(region); });
  }
  function schedule(region) {
    if (timers.has(region)) return;
    var delay = Number(region.getAttribute("data-delay") || "400");
    timers.set(region, setTimeout(function () { refresh(region); }, delay));
  }
  function stale(kind) {
    for (var region of document.querySelectorAll("[data-region]"))
      if ((" " + region.getAttribute("data-refresh") + " ").indexOf(" " + kind + " ") >= 0) schedule(region);
  }

  var events = null;
  var lost = false;
  function live(state) {
    if (!indicator) return;
    indicator.setAttribute("data-state", state === "on" ? "on" : "off");
    indicator.textContent = state === "on" ? "live" : state === "paused" ? "paused" : "reconnecting";
  }
  function connect() {
    events = new EventSource(source);
    events.addEventListener("open", function () {
      live("on");
      // Events may have been missed while the stream was down: everything is looked at again.
      if (lost) stale("resync");
      lost = false;
    });
    events.addEventListener("error", function () {
      live("off");
      lost = true;
    });
    events.addEventListener("instance", function (event) {
      onInstance(JSON.parse(event.data));
      stale("instance");
    });
    for (var kind of ["condition", "node", "task", "revision", "resync"])
      events.addEventListener(kind, (function (k) { return function () { stale(k); }; })(kind));
  }
  // A tab nobody looks at gives its stream back: a browser opens only a few connections to one
  // server over HTTP/1.1, and a stream holds one for as long as it is open.
  document.addEventListener("visibilitychange", function () {
    if (document.hidden && events) {
      events.close();
      events = null;
      lost = true;
      live("paused");
    } else if (!document.hidden && !events) connect();
  });
  if (!document.hidden) connect();
})();
`;

/** One static file: its bytes, type and the hashed path it is served at. */
export interface Asset {
  path: string;
  type: string;
  body: Buffer;
}

function asset(name: string, extension: string, type: string, text: string): Asset {
  const body = Buffer.from(text);
  const hash = createHash("sha256").update(body).digest("hex").slice(0, 12);
  return { path: `/assets/${name}-${hash}.${extension}`, type, body };
}

const STATES_FOR_SCRIPT = Object.fromEntries(
  Object.values(DISPLAY_STATES).map((s) => [s.state, { label: s.label, symbol: s.symbol, tone: s.tone }]),
);

/** The tab's icon: a check on the hub's dark header colour. */
export const ICON_ASSET: Asset = asset(
  "icon",
  "svg",
  "image/svg+xml",
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#24292f"/><path d="M8 17l5 5 11-12" fill="none" stroke="#3fb950" stroke-width="4" stroke-linecap="round" stroke-linejoin="round"/></svg>',
);

/** The stylesheet. */
export const STYLE_ASSET: Asset = asset("steward", "css", "text/css; charset=utf-8", STYLESHEET);

/** The live script, with the display states it paints. */
export const SCRIPT_ASSET: Asset = asset(
  "live",
  "js",
  "text/javascript; charset=utf-8",
  `"use strict";\nvar STATES = ${JSON.stringify(STATES_FOR_SCRIPT)};\n${SCRIPT}`,
);

/** The assets by path. */
export const ASSETS: ReadonlyMap<string, Asset> = new Map(
  [STYLE_ASSET, SCRIPT_ASSET, ICON_ASSET].map((a) => [a.path, a]),
);
