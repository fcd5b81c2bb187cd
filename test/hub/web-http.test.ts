import { afterEach, describe, expect, it } from "vitest";
import { type HubHttp, startHubHttp } from "../../src/hub/http.js";
import { revisionProgress } from "../../src/hub/progress.js";
import { parseOperatorTokens } from "../../src/hub/web/operators.js";
import { CONTENT_SECURITY_POLICY } from "../../src/hub/web/web.js";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { type Harness, startHarness } from "./helpers/harness.js";

const TOKEN = "alice-token-0123456789abcdef";
const BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

let http: HubHttp | undefined;
afterEach(async () => {
  await http?.close();
  http = undefined;
});

const files = (content: string) => ({
  ...nodes("n1", "n2"),
  "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1", "n2"], resources: [file("conf", content)] }),
  "assignments/migrate.yaml": assignmentYaml("migrate", {
    nodes: ["n1"],
    resources: [{ kind: "command", name: "migrate", run: ["/nonexistent/migrate-tool"] }],
  }),
});

async function fleet(operators = true): Promise<{ h: Harness; sha: string; http: HubHttp }> {
  const h = await startHarness({ files: files("v1") });
  const { sha } = await h.commit("app v1 <script>alert(1)</script>");
  await h.settle();
  http = await startHubHttp({
    hub: h.hub,
    web: operators ? { operators: parseOperatorTokens(`alice ${TOKEN}\n`, "ops") } : {},
  });
  return { h, sha, http };
}

const page = (url: string, headers: Record<string, string> = {}) =>
  fetch(url, { headers: { accept: BROWSER, ...headers }, redirect: "manual" });

function post(url: string, form: Record<string, string>, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: "POST",
    headers: { accept: BROWSER, "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(form).toString(),
    redirect: "manual",
  });
}

/** Signs in through the login form; returns the session cookie and the CSRF token of `at`'s forms. */
async function signIn(base: string, at: string): Promise<{ cookie: string; csrf: string }> {
  const login = await post(`${base}/login`, { token: TOKEN, next: at });
  expect(login.status).toBe(303);
  expect(login.headers.get("location")).toBe(at);
  const setCookie = login.headers.get("set-cookie")!;
  expect(setCookie).toMatch(/^steward_session=[A-Za-z0-9_-]{40,}; Path=\/; HttpOnly; SameSite=Lax/);
  const cookie = setCookie.split(";")[0]!;
  const html = await (await page(`${base}${at}`, { cookie })).text();
  expect(html).toContain("signed in as <b>alice</b>");
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  expect(csrf).toBeDefined();
  return { cookie, csrf: csrf! };
}

describe("hub - web view over HTTP", () => {
  it("web - a browser gets /revisions/:sha as a page with the strict headers; every other client the same JSON as before", async () => {
    const { h, sha, http } = await fleet();
    const asPage = await page(`${http.url}/revisions/${sha}`);
    expect(asPage.status).toBe(200);
    expect(asPage.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(asPage.headers.get("content-security-policy")).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
    expect(CONTENT_SECURITY_POLICY).not.toContain("unsafe");
    expect(asPage.headers.get("x-content-type-options")).toBe("nosniff");
    expect(asPage.headers.get("vary")).toContain("Accept");
    const text = await asPage.text();
    // The commit message is text, not markup.
    expect(text).toContain("app v1 &lt;script&gt;alert(1)&lt;/script&gt;");
    expect(text).not.toContain("<script>alert");
    expect(text).toContain("2/2 nodes at generation 1");
    // The failing instance, with its condition, node and attempt id.
    const blocked = (await h.store.conditions.list({ type: "Blocked", status: "open" }))[0]!;
    expect(text).toContain(`<a href="/conditions/${blocked.id}">Blocked</a>`);
    expect(text).toContain(`<a href="/attempts/${blocked.attemptId}">`);
    expect(text).toMatch(/<b>Blocked<\/b> on <a href="\/nodes\/n1">n1<\/a>/);
    const expected = JSON.parse(JSON.stringify(await revisionProgress(h.store, sha)));
    for (const accept of ["*/*", "application/json", undefined]) {
      const response = await fetch(
        `${http.url}/revisions/${sha.slice(0, 10)}`,
        accept ? { headers: { accept } } : {},
      );
      expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(await response.json()).toEqual(expected);
    }
    expect((await fetch(`${http.url}/instances/app@n1`)).headers.get("content-type")).toContain("json");
    expect((await page(`${http.url}/revisions/0000000`)).status).toBe(404);
  });

  it("web - every page answers with its story, and the fleet page's regions can be fetched alone", async () => {
    const { h, sha, http } = await fleet();
    const blocked = (await h.store.conditions.list({ type: "Blocked", status: "open" }))[0]!;
    const attempt = (await h.intent("app@n1")).lastAttemptId!;
    const pages: [string, string][] = [
      ["/", "Nodes × assignments"],
      ["/tasks", "Blocked"],
      ["/conditions", "CommandNotFound"],
      ["/conditions?status=resolved", "Resolved conditions"],
      [`/conditions/${blocked.id}`, "/nonexistent/migrate-tool"],
      ["/nodes/n1", "migrate"],
      ["/instances/app@n1", "Observed"],
      [`/attempts/${attempt}`, "succeeded"],
      [`/revisions/${sha}`, "app"],
      ["/login", "operator token"],
    ];
    for (const [path, words] of pages) {
      const response = await page(`${http.url}${path}`);
      expect(response.status, path).toBe(200);
      expect(response.headers.get("content-security-policy"), path).toBe(CONTENT_SECURITY_POLICY);
      expect(response.headers.get("cache-control"), path).toBe("no-store");
      const text = await response.text();
      expect(text, path).toContain(words);
      expect(text, path).not.toMatch(/<script(?! src="\/assets\/live-[0-9a-f]{12}\.js" defer><\/script>)/);
      expect(text, path).not.toMatch(/ style=| on[a-z]+=/);
    }
    const grid = await (await page(`${http.url}/`, { "x-steward-region": "grid" })).text();
    expect(grid).not.toContain("<!doctype");
    expect(grid).toContain("data-grid");
    expect(grid).toContain('data-i="app@n2"');
    expect((await page(`${http.url}/`, { "x-steward-region": "nonsense" })).status).toBe(404);
    const script = await fetch(
      `${http.url}${/src="([^"]+)"/.exec(await (await page(`${http.url}/`)).text())![1]}`,
    );
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(script.headers.get("cache-control")).toContain("immutable");
  });

  it("web - an action without an operator is refused (403); a signed-in operator's drain is recorded with their name", async () => {
    const { h, http } = await fleet();
    const refused = await post(`${http.url}/nodes/n2/drain`, { reason: "nope" });
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain("sign in with an operator token to act");
    expect((await h.store.nodes.get("n2"))!.draining).toBe(false);
    // A token that is not one of them.
    const wrong = await fetch(`${http.url}/nodes/n2/drain`, {
      method: "POST",
      headers: { authorization: "Bearer not-a-token-at-all" },
    });
    expect(wrong.status).toBe(403);

    const { cookie, csrf } = await signIn(http.url, "/nodes/n2");
    // A form without the session's CSRF token, or posted from another site, is refused.
    expect((await post(`${http.url}/nodes/n2/drain`, { csrf: "x", reason: "r" }, { cookie })).status).toBe(
      403,
    );
    const forged = await post(
      `${http.url}/nodes/n2/drain`,
      { csrf, reason: "r" },
      { cookie, origin: "http://evil.example" },
    );
    expect(forged.status).toBe(403);
    expect(await forged.text()).toContain("a page of http://evil.example may not act on this hub");
    expect((await h.store.nodes.get("n2"))!.draining).toBe(false);

    const drained = await post(
      `${http.url}/nodes/n2/drain`,
      { csrf, reason: "kernel <b>upgrade</b>" },
      { cookie, origin: new URL(http.url).origin },
    );
    expect(drained.status).toBe(303);
    expect(drained.headers.get("location")).toBe("/nodes/n2");
    expect(await h.store.nodes.get("n2")).toMatchObject({
      draining: true,
      drainedBy: "alice",
      drainReason: "kernel <b>upgrade</b>",
    });
    const shown = await (await page(`${http.url}/nodes/n2`, { cookie })).text();
    expect(shown).toContain("node n2 is draining: no new dispatches, desired state kept (by alice)");
    expect(shown).toContain("by <b>alice</b>");
    expect(shown).toContain("kernel &lt;b&gt;upgrade&lt;/b&gt;");
    expect(shown).toContain("Undrain");
    // The hub took it in at once: the next generation holds on n2.
    h.write(files("v2"));
    await h.commit();
    await h.settle();
    expect(await h.intent("app@n2")).toMatchObject({ status: "held", holdReason: "draining" });

    // A program uses its token as a bearer token, and gets JSON.
    const undrained = await fetch(`${http.url}/nodes/n2/undrain`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(undrained.status).toBe(200);
    expect(await undrained.json()).toMatchObject({ node: "n2", draining: false, by: "alice" });
    expect((await h.store.nodes.get("n2"))!.draining).toBe(false);
  });

  it("web - a task is claimed and resolved from its form, recorded with the operator's name; the hub looks again", async () => {
    const { h, http } = await fleet();
    const task = (await h.store.tasks.list({ status: "open" }))[0]!;
    const { cookie, csrf } = await signIn(http.url, "/tasks");
    expect((await post(`${http.url}/tasks/${task.id}/claim`, { csrf }, { cookie })).status).toBe(303);
    expect(await h.store.tasks.get(task.id)).toMatchObject({ status: "claimed", claimedBy: "alice" });
    const empty = await post(`${http.url}/tasks/${task.id}/resolve`, { csrf, action: " " }, { cookie });
    expect(empty.status).toBe(409);
    expect(await empty.text()).toContain("say what you did");
    const resolved = await post(
      `${http.url}/tasks/${task.id}/resolve`,
      { csrf, action: "installed the migrate tool" },
      { cookie },
    );
    expect(resolved.status).toBe(303);
    expect(await h.store.tasks.get(task.id)).toMatchObject({
      status: "resolved",
      resolvedBy: "alice",
      action: "installed the migrate tool",
    });
    const history = (await h.store.conditions.history(task.conditionId)).map((e) => e.message);
    expect(history).toContain(`task ${task.id} resolved by alice: installed the migrate tool`);
    await h.settle();
    // Resolving a Blocked task runs the ordinary path once more: a second attempt (blocked again).
    expect(await h.store.attempts.ofInstance("migrate@n1")).toHaveLength(2);
    const again = await (await page(`${http.url}/tasks?all=1`, { cookie })).text();
    expect(again).toContain(`task ${task.id} resolved by alice`);
  });

  it("web - a hub without operator tokens is read-only: no forms, and every action is refused", async () => {
    const { h, http } = await fleet(false);
    const node = await (await page(`${http.url}/nodes/n1`)).text();
    expect(node).toContain("This hub is read-only");
    expect(node).not.toContain('<form method="post"');
    const refused = await fetch(`${http.url}/nodes/n1/drain`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(refused.status).toBe(403);
    expect((await refused.json()) as object).toEqual({
      error: "this hub is read-only: it takes actions only when started with --operator-tokens FILE",
    });
    expect((await h.store.nodes.get("n1"))!.draining).toBe(false);
    // No rollout control is wired: its route does not exist and no page offers it.
    expect((await fetch(`${http.url}/revisions/abcd/rollout/app/pause`, { method: "POST" })).status).toBe(
      404,
    );
  });

  it("web - what looks like a secret in a node's report is masked on every page and in the JSON", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [shell("connect", "echo 'connecting with password=hunter2-secret' >&2; exit 3")],
          budget: { attempts: 10, within: "1h" },
        }),
      },
    });
    await h.commit();
    await h.settle();
    http = await startHubHttp({ hub: h.hub });
    const attempt = (await h.intent("app@n1")).lastAttemptId!;
    for (const path of ["/instances/app@n1", `/attempts/${attempt}`, "/nodes/n1", "/"]) {
      for (const accept of [BROWSER, "application/json"]) {
        const text = await (await fetch(`${http.url}${path}`, { headers: { accept } })).text();
        expect(text, `${path} ${accept}`).not.toContain("hunter2");
      }
    }
    const page = await (await fetch(`${http.url}/instances/app@n1`, { headers: { accept: BROWSER } })).text();
    expect(page).toContain("password=[redacted]");
  });

  it("web - a page's event stream carries one instance's change as one small event", async () => {
    const { h, http } = await fleet();
    const response = await fetch(`${http.url}/events?scope=instance&id=app@n1`);
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    h.write(files("v2"));
    await h.commit();
    await h.settle();
    const deadline = Date.now() + 10_000;
    while (!/"s":"converged","g":2/.test(text) && Date.now() < deadline) {
      const { value, done } = await Promise.race([
        reader.read(),
        new Promise<{ value: undefined; done: true }>((resolve) =>
          setTimeout(() => resolve({ value: undefined, done: true }), 500),
        ),
      ]);
      if (value) text += decoder.decode(value);
      if (done && !value) await h.settle();
    }
    await reader.cancel();
    const events = text.split("\n\n").filter((e) => e.startsWith("event: instance"));
    expect(events.length).toBeGreaterThan(0);
    for (const event of events) {
      expect(event).toContain('"i":"app@n1"');
      expect(event).not.toContain("app@n2");
      expect(event.length).toBeLessThan(200);
    }
    expect(text).toMatch(/"s":"converged","g":2/);
  });
});
