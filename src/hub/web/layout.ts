/**
 * The pieces every page is made of: the document around a page (header, navigation, who is signed
 * in, the live indicator), a state as a badge or a grid cell (colour and symbol and words, from the
 * one mapping in states.ts), times, facts lists, evidence blocks and the forms of actions. All
 * markup goes through `html` (html.ts), so nothing here can emit an unescaped value.
 */
import { DISPLAY_STATES, type DisplayState } from "../states.js";
import type { InstanceView } from "../views.js";
import { ICON_ASSET, SCRIPT_ASSET, STYLE_ASSET } from "./assets.js";
import { type Html, type HtmlValue, html, path } from "./html.js";
import type { Session } from "./operators.js";

/** A part of a page that its script fetches again when an event of one of `refresh`'s kinds comes. */
export interface Region {
  name: string;
  /** Event kinds (instance, condition, node, task, revision, resync) after which it is stale. */
  refresh: readonly string[];
  /** How long changes gather before it is fetched again (ms). */
  delayMs?: number;
  /** A class for its element (where the page's layout places it). */
  className?: string;
  /** Reads what it shows from the store and renders it. */
  render: () => Promise<Html>;
}

/** A page: its title, what it is made of (markup, and regions that update live), and its event scope. */
export interface Page {
  title: string;
  /** Which navigation entry is current. */
  section: "fleet" | "tasks" | "conditions" | "other";
  parts: (Html | Region)[];
  /** Regions placed inside the markup of `parts` (by `regionElement`), so they can be fetched alone. */
  embedded?: Region[];
  /** A class for `<main>` (the page's layout). */
  mainClass?: string;
  /** The query of `/events` this page listens to (undefined: not live). */
  events?: URLSearchParams;
  status?: number;
}

/** What every page is rendered with. */
export interface PageContext {
  now: Date;
  url: URL;
  /** The signed-in operator's session, if any. */
  session?: Session;
  /** Whether this hub takes operator tokens at all (else it is read-only). */
  operatorsEnabled: boolean;
  /** Open tasks, for the navigation. */
  openTasks: number;
  /** A one-line result of the last action, shown on top (`?done=`). */
  done?: string;
}

/** Whether a part of a page is a region (else plain markup). */
export function isRegion(part: Html | Region): part is Region {
  return "render" in part;
}

/** The region of `page` called `name`, wherever it is placed. */
export function regionOf(page: Page, name: string): Region | undefined {
  return [...page.parts.filter(isRegion), ...(page.embedded ?? [])].find((r) => r.name === name);
}

/** A region as its element: the script knows it by name and what makes it stale. */
export async function regionElement(region: Region): Promise<Html> {
  const body = await region.render();
  return html`<div${region.className ? html` class="${region.className}"` : ""} data-region="${region.name}" data-refresh="${region.refresh.join(" ")}"${region.delayMs ? html` data-delay="${region.delayMs}"` : ""}>${body}</div>`;
}

function navLink(href: string, label: HtmlValue, current: boolean): Html {
  return html`<a href="${href}"${current ? html` aria-current="page"` : ""}>${label}</a>`;
}

/** The whole document of `page`. */
export async function documentOf(page: Page, ctx: PageContext): Promise<Html> {
  const parts: Html[] = [];
  for (const part of page.parts) parts.push(isRegion(part) ? await regionElement(part) : part);
  const next = `${ctx.url.pathname}${ctx.url.search}`;
  const who = ctx.session
    ? html`<span>signed in as <b>${ctx.session.operator.name}</b></span>
        <form method="post" action="/logout"><input type="hidden" name="csrf" value="${ctx.session.csrf}"><button class="linkish" type="submit">sign out</button></form>`
    : ctx.operatorsEnabled
      ? html`<a href="${path(["login"], new URLSearchParams({ next }))}">sign in to act</a>`
      : html`<span class="soft" title="start the hub with --operator-tokens FILE to allow actions">read-only</span>`;
  const events = page.events ? path(["events"], page.events) : undefined;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title} · steward</title>
<link rel="icon" href="${ICON_ASSET.path}" type="image/svg+xml">
<link rel="stylesheet" href="${STYLE_ASSET.path}">
<script src="${SCRIPT_ASSET.path}" defer></script>
</head>
<body${events ? html` data-events="${events}"` : ""}>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/">steward</a>
<nav aria-label="Main">
${navLink("/", "Fleet", page.section === "fleet")}
${navLink("/conditions", "Conditions", page.section === "conditions")}
${navLink("/tasks", html`Tasks${ctx.openTasks > 0 ? html` <span class="badge t-attention">${ctx.openTasks}</span>` : ""}`, page.section === "tasks")}
</nav>
${events ? html`<span id="live" class="live" data-state="off" aria-live="polite">connecting</span>` : ""}
<div class="who">${who}</div>
</header>
<main id="main"${page.mainClass ? html` class="${page.mainClass}"` : ""}>
${ctx.done ? html`<p class="notice done" role="status">${ctx.done}</p>` : ""}
${parts}
</main>
<footer>steward · the hub's own view of its records · <a href="/healthz">healthz</a> · <a href="/metrics">metrics</a></footer>
</body>
</html>
`;
}

/**
 * A state's symbol, hidden from screen readers (the words beside it say it). `data-sym` lets the
 * stylesheet draw a symbol that fonts often lack (⏸) the same everywhere.
 */
export function symbol(text: string): Html {
  return html`<span class="sym" data-sym="${text}" aria-hidden="true">${text}</span>`;
}

/** A state as words with its symbol and colour (never colour alone). */
export function stateBadge(state: DisplayState, extra?: HtmlValue): Html {
  const info = DISPLAY_STATES[state];
  return html`<span class="badge t-${info.tone}" data-s="${state}">${symbol(info.symbol)} ${info.label}${extra ? html` <span class="soft">${extra}</span>` : ""}</span>`;
}

/** How many instances are in `state`, as a link (to the instances in it) in the state's colours. */
export function stateChip(
  state: DisplayState,
  n: number,
  href: string,
  options: { current?: boolean; title?: string } = {},
): Html {
  const info = DISPLAY_STATES[state];
  return html`<li><a class="chip t-${info.tone}" href="${href}"${options.current === undefined ? "" : html` aria-current="${options.current ? "true" : "false"}"`}${options.title ? html` title="${options.title}"` : ""}>${symbol(info.symbol)} ${info.label} <b>${count(n)}</b></a></li>`;
}

/** What a cell shows of an instance: a whole view, or a row of a revision's rollout. */
export type CellOf = Pick<InstanceView, "instance" | "state" | "generation" | "observedGeneration">;

/** How an instance's cell reads aloud and in its tooltip. */
export function cellWords(view: CellOf): string {
  const observed =
    view.observedGeneration !== undefined && view.observedGeneration !== view.generation
      ? ` (observed ${view.observedGeneration})`
      : "";
  return `${view.instance}: ${DISPLAY_STATES[view.state].label}, generation ${view.generation}${observed}`;
}

/**
 * A grid cell: symbol and generation on the state's colour, a link to the instance. `data-i` is
 * how the script finds it when an event for the instance comes; a `pinned` cell (a revision's
 * row) shows one generation and is painted only by events of that generation.
 */
export function stateCell(view: CellOf, options: { chosen?: boolean; pinned?: boolean } = {}): Html {
  const info = DISPLAY_STATES[view.state];
  const words = cellWords(view);
  return html`<a class="cell t-${info.tone}${options.chosen === false ? " out" : ""}" data-i="${view.instance}" data-s="${view.state}"${options.pinned ? html` data-g="${view.generation}"` : ""} href="${path(["instances", view.instance])}" title="${words}" aria-label="${words}">${symbol(info.symbol)}<span class="gen">${view.generation}</span></a>`;
}

const UNITS: readonly [number, string][] = [
  [86_400, "d"],
  [3_600, "h"],
  [60, "m"],
  [1, "s"],
];

/** A length of time in its largest unit of which there are at least two: `90s`, `3m`, `2h`, `7d`. */
export function duration(ms: number): string {
  const seconds = Math.round(Math.abs(ms) / 1000);
  const [unit, name] = UNITS.find(([step]) => seconds >= step * 2) ?? [1, "s"];
  return `${Math.round(seconds / unit)}${name}`;
}

/** `iso` relative to `now`: `42s ago`, `3m ago`, `in 2h`, `now`. */
export function relative(iso: string, now: Date): string {
  const ms = Date.parse(iso) - now.getTime();
  if (Math.abs(ms) < 1000) return "now";
  return ms < 0 ? `${duration(ms)} ago` : `in ${duration(ms)}`;
}

/** A time, relative to now, with the exact time in its tooltip and markup. */
export function when(iso: string | undefined, now: Date): Html {
  if (!iso) return html`<span class="soft">never</span>`;
  return html`<time datetime="${iso}" title="${iso}">${relative(iso, now)}</time>`;
}

/** A list of facts; entries whose value is empty are left out. */
export function facts(entries: readonly [string, HtmlValue][]): Html {
  const shown = entries.filter(
    ([, value]) => value !== undefined && value !== null && value !== "" && value !== false,
  );
  return html`<dl class="facts">${shown.map(([label, value]) => html`<dt>${label}</dt><dd>${value}</dd>`)}</dl>`;
}

/** A block of evidence (command output, a diff) as the text it is. */
export function evidence(
  text: string | undefined,
  options: { id?: string; open?: boolean; label?: string } = {},
): Html {
  if (!text) return html``;
  return html`<details${options.id ? html` id="${options.id}"` : ""}${options.open ? html` open` : ""}><summary>${options.label ?? "evidence"}</summary><pre>${text}</pre></details>`;
}

/** The line of evidence that names the error, set apart. */
export function errorLine(line: string | undefined): Html {
  return line
    ? html`<div class="errorline" title="the line of the evidence that names the error">${line}</div>`
    : html``;
}

/** A link to an object's page. */
export function link(segments: readonly string[], label?: HtmlValue): Html {
  return html`<a href="${path(segments)}">${label ?? segments.at(-1)}</a>`;
}

/** A sha, short, linked to its revision page. */
export function revisionLink(sha: string, label?: HtmlValue): Html {
  return html`<a class="sha" href="${path(["revisions", sha])}" title="${sha}">${label ?? sha.slice(0, 12)}</a>`;
}

/**
 * A form that posts an action with the session's CSRF token; `fields` go inside it. Only a
 * signed-in operator gets it — the caller shows `signInHint` otherwise.
 */
export function actionForm(
  session: Session,
  action: string,
  button: HtmlValue,
  options: { fields?: Html; danger?: boolean; label?: string } = {},
): Html {
  return html`<form method="post" action="${action}"><input type="hidden" name="csrf" value="${session.csrf}">${options.fields ?? ""}<button type="submit"${options.danger ? html` class="danger"` : ""}${options.label ? html` aria-label="${options.label}"` : ""}>${button}</button></form>`;
}

/** What a person who may not act sees where the actions would be. */
export function signInHint(ctx: PageContext, what: string): Html {
  if (!ctx.operatorsEnabled)
    return html`<p class="hint">This hub is read-only: start it with <code>--operator-tokens FILE</code> to ${what} here.</p>`;
  return html`<p class="hint"><a href="${path(["login"], new URLSearchParams({ next: `${ctx.url.pathname}${ctx.url.search}` }))}">Sign in</a> with an operator token to ${what}.</p>`;
}

/** A count with thousands separated. */
export function count(n: number): string {
  return n.toLocaleString("en-US");
}

/** `n word` or `n words`. */
export function plural(n: number, word: string, words = `${word}s`): string {
  return `${count(n)} ${n === 1 ? word : words}`;
}

/** Display states in the order totals list them. */
export const STATE_ORDER: readonly DisplayState[] = Object.keys(DISPLAY_STATES) as DisplayState[];

/**
 * A bar of how many instances are in each state: a segment per state in its colour (an SVG, so the
 * strict policy needs no inline style), with the counts in words beside it for whoever cannot see it.
 */
export function stateBar(states: Partial<Record<DisplayState, number>>, total: number): Html {
  let x = 0;
  const segments: Html[] = [];
  const words: string[] = [];
  for (const state of STATE_ORDER) {
    const n = states[state] ?? 0;
    if (n === 0) continue;
    const width = total > 0 ? (n / total) * 1000 : 0;
    segments.push(
      html`<rect x="${x.toFixed(1)}" width="${width.toFixed(1)}" height="12" class="f-${DISPLAY_STATES[state].tone}"></rect>`,
    );
    x += width;
    words.push(`${count(n)} ${DISPLAY_STATES[state].label}`);
  }
  return html`<svg class="bar" viewBox="0 0 1000 12" preserveAspectRatio="none" role="img" aria-label="${words.join(", ")}"><title>${words.join(", ")}</title>${segments}</svg>`;
}

/** What a page of one object's story is made of. */
export interface StoryPageOptions<T> {
  title: string;
  section: Page["section"];
  /** Reads the story again (each live refresh does); undefined once the object is gone. */
  read: () => Promise<T | undefined>;
  body: (story: T) => Html | Promise<Html>;
  /** What the page says once the object is gone. */
  gone: string;
  /** Event kinds after which the story is read again. */
  refresh: readonly string[];
  events: URLSearchParams;
  delayMs?: number;
}

/** A page that is one object's story, in one live region. */
export function storyPage<T>(options: StoryPageOptions<T>): Page {
  return {
    title: options.title,
    section: options.section,
    parts: [
      {
        name: "main",
        refresh: options.refresh,
        ...(options.delayMs ? { delayMs: options.delayMs } : {}),
        render: async () => {
          const story = await options.read();
          return story ? await options.body(story) : html`<p class="notice">${options.gone}</p>`;
        },
      },
    ],
    events: options.events,
  };
}
