/**
 * HTML that is safe by construction: the `html` tagged template escapes every interpolated value
 * (text, numbers, anything) unless it is already `Html` — made by `html` itself, or by `trusted`
 * for a constant the code wrote. Arrays are joined, `undefined`, `null` and `false` render as
 * nothing. Every value is escaped for both text and quoted attributes (`&<>"'`), so a commit
 * message or command output holding `<script>` or `"><img onerror=...>` is shown as the characters
 * it is. A page never builds markup by concatenating strings.
 */

const ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** A piece of markup that is already safe to put in a page. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/** `value` with the characters that mean something in HTML replaced by their entities. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** What may be interpolated: escaped unless it is `Html`. */
export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text;
  if (value === undefined || value === null || value === false) return "";
  if (Array.isArray(value)) return value.map(render).join("");
  return escapeHtml(String(value));
}

/** Markup from a template: the literal parts as written, every `${value}` escaped. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Html(out);
}

/**
 * Markup the code itself wrote (a constant, never data): the only way around escaping. Calling it
 * with anything that came from a request, the store or an agent is a bug.
 */
export function trusted(markup: string): Html {
  return new Html(markup);
}

/** Joins pieces of markup with `separator` (escaped unless it is Html). */
export function join(pieces: readonly HtmlValue[], separator: HtmlValue = ""): Html {
  const sep = render(separator);
  return new Html(pieces.map(render).join(sep));
}

/**
 * A path on this hub from segments, each percent-encoded (`@` is kept, it names instances), with
 * an optional query. Built here so an `href` never holds anything but a path of ours.
 */
export function path(segments: readonly (string | number)[], query?: URLSearchParams | string): string {
  const encoded = segments.map((s) => encodeURIComponent(String(s)).replace(/%40/g, "@")).join("/");
  const search = query === undefined ? "" : String(query);
  return `/${encoded}${search ? `?${search}` : ""}`;
}
