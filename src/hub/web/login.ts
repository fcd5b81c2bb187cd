/**
 * `/login`: a person trades an operator token for a session (operators.ts). The token is typed
 * into a password field and posted once; it is never shown, logged or put in a URL.
 */
import { type Html, html } from "./html.js";
import type { Page, PageContext } from "./layout.js";

/**
 * Where to go after signing in: a path on this hub, never another site. Judged as a browser will
 * read it (browsers drop tabs and line breaks, so "/\t/evil.example" is "//evil.example"): only
 * what resolves to this origin is kept, as its path, query and fragment.
 */
export function safeNext(next: string | null | undefined): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused.
  if (!next?.startsWith("/") || /[\u0000-\u001f\u007f\\]/.test(next)) return "/";
  let url: URL;
  try {
    url = new URL(next, "http://hub.invalid");
  } catch {
    return "/";
  }
  if (url.origin !== "http://hub.invalid") return "/";
  return `${url.pathname}${url.search}${url.hash}`;
}

/** The sign-in page; `problem` says why the last try failed. */
export function loginPage(ctx: PageContext, problem?: string): Page {
  const next = safeNext(ctx.url.searchParams.get("next"));
  let body: Html;
  if (!ctx.operatorsEnabled)
    body = html`<h1>Sign in</h1><p>This hub is read-only: it was started without <code>--operator-tokens FILE</code>, so nobody can act from the web view. Every page is still here to read.</p>`;
  else if (ctx.session)
    body = html`<h1>Signed in</h1><p>You are signed in as <b>${ctx.session.operator.name}</b>. <a href="${next}">Go on</a>.</p>`;
  else
    body = html`<h1>Sign in</h1>
<p class="sub">With your operator token (a line of the hub's <code>--operator-tokens</code> file). What you do is recorded with your name.</p>
${problem ? html`<p class="notice" role="alert">${problem}</p>` : ""}
<form method="post" action="/login">
<input type="hidden" name="next" value="${next}">
<label for="token">operator token<input id="token" name="token" type="password" autocomplete="current-password" required autofocus></label>
<button class="primary" type="submit">Sign in</button>
</form>`;
  return {
    title: "Sign in",
    section: "other",
    parts: [html`<section class="panel login">${body}</section>`],
    ...(problem ? { status: 403 } : {}),
  };
}
