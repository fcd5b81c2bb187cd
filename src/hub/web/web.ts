/**
 * The hub's web view: server-rendered pages of the fleet, usable without JavaScript, made live by
 * server-sent events; the same stories `steward describe` tells (story.ts), rendered as HTML; and,
 * for a signed-in operator, the actions the CLI has (drain and undrain, claim, resolve and decline
 * a task), each recorded with the operator's name.
 *
 * Routes it owns: `GET /` (the fleet), `/tasks`, `/conditions`, `/login` (and `POST /login`,
 * `/logout`), `/events`, `/assets/*`, the action posts, and — for a client that asks for HTML
 * (`Accept: text/html`) — `/revisions/:sha`, `/instances/:a@:n`, `/nodes/:name`,
 * `/conditions/:id` and `/attempts/:id`; everyone else keeps getting those as JSON (http.ts).
 *
 * Every page goes out with a strict Content-Security-Policy (scripts and styles only from the hub
 * itself, nothing inline, no framing), `X-Content-Type-Options: nosniff` and `no-store`. Actions
 * take a session cookie and the session's CSRF token from the form, or `Authorization: Bearer
 * TOKEN`; a request from another origin is refused whatever it carries.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { NotFoundError, StewardError } from "../../model/errors.js";
import { type FleetFeed, HubFleetFeed } from "../fleet-feed.js";
import type { Hub } from "../hub.js";
import { sendJson } from "../json-response.js";
import { setNodeDraining } from "../operator.js";
import type { TaskOutcome } from "../records.js";
import { attemptStoryOf, conditionStoryOf, instanceStory, nodeStory, revisionStory } from "../story.js";
import { claimTask, listTasks, releaseTask, resolveTask } from "../tasks.js";
import { ASSETS } from "./assets.js";
import { changeFilter, streamEvents } from "./events.js";
import { html } from "./html.js";
import { documentOf, type Page, type PageContext, regionOf } from "./layout.js";
import { loginPage, safeNext } from "./login.js";
import { type Operator, Operators, type Session, sameSecret } from "./operators.js";
import { attemptPage } from "./pages/attempts.js";
import { conditionPage, conditionsPage } from "./pages/conditions.js";
import { fleetPage } from "./pages/fleet.js";
import { instancePage } from "./pages/instance.js";
import { nodePage } from "./pages/node.js";
import { revisionPage } from "./pages/revision.js";
import { tasksPage } from "./pages/tasks.js";
import type { RolloutControl } from "./rollout.js";

/** The policy of every page: nothing but the hub's own script and stylesheet, no inline code. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const SESSION_COOKIE = "steward_session";

/** What the web view is made with. */
export interface WebViewOptions {
  hub: Hub;
  /** Where the fleet's changes come from; default: this hub's own (HubFleetFeed). */
  feed?: FleetFeed & { close?(): void };
  /** The operators who may act (`--operator-tokens`); without them the view is read-only. */
  operators?: ReadonlyMap<string, Operator>;
  /** Rollout pause and resume (rollout.ts); no button shows until it is given. */
  rollout?: RolloutControl;
}

/** Whether a client asks for HTML rather than JSON: `text/html` listed, at least as wanted as JSON. */
export function wantsHtml(accept: string | undefined): boolean {
  if (!accept) return false;
  let htmlQ = 0;
  let jsonQ = 0;
  for (const part of accept.split(",")) {
    const [type, ...params] = part.trim().toLowerCase().split(";");
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    const q = qParam ? Number(qParam.slice(2)) || 0 : 1;
    if (type === "text/html" || type === "application/xhtml+xml") htmlQ = Math.max(htmlQ, q);
    else if (type === "application/json" || type === "application/*" || type === "*/*")
      jsonQ = Math.max(jsonQ, q);
  }
  return htmlQ > 0 && htmlQ >= jsonQ;
}

function cookies(request: IncomingMessage): Map<string, string> {
  const found = new Map<string, string>();
  for (const part of (request.headers.cookie ?? "").split(";")) {
    const at = part.indexOf("=");
    if (at > 0) found.set(part.slice(0, at).trim(), part.slice(at + 1).trim());
  }
  return found;
}

async function readForm(request: IncomingMessage, limit = 64 * 1024): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new WebError(413, "the form is too large");
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if ((request.headers["content-type"] ?? "").startsWith("application/json")) {
    let body: Record<string, unknown>;
    try {
      body = text.trim() === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      throw new WebError(400, "the body is not JSON: send a form, or a JSON object of its fields");
    }
    return new URLSearchParams(Object.entries(body).map(([k, v]): [string, string] => [k, String(v)]));
  }
  return new URLSearchParams(text);
}

/** A refusal with its HTTP status, shown as a page (or JSON) with the message. */
class WebError extends StewardError {
  override readonly name = "WebError";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super("E_WEB", message, { data: { status } });
  }
}

const STORY_ROUTE = /^\/(revisions|instances|nodes|conditions|attempts)\/([^/]+)$/;
const ACTION_ROUTE = /^\/(nodes|tasks)\/([^/]+)\/(drain|undrain|claim|resolve|decline)$/;
const ROLLOUT_ROUTE = /^\/revisions\/([0-9a-f]{4,64})\/rollout\/([^/]+)\/(pause|resume)$/;

/** Who is acting, and how they proved it. */
interface Actor {
  operator: Operator;
  /** Signed in through the browser (else a bearer token: a program, which wants JSON back). */
  session?: Session;
}

/** The web view's routes (see the module comment). */
export class WebView {
  readonly feed: FleetFeed & { close?(): void };
  private readonly operators: Operators;
  private readonly hub: Hub;
  private readonly rollout: RolloutControl | undefined;

  constructor(options: WebViewOptions) {
    this.hub = options.hub;
    this.feed = options.feed ?? new HubFleetFeed({ hub: options.hub });
    this.operators = new Operators(options.operators ?? new Map());
    this.rollout = options.rollout;
  }

  /** Someone outside the feed's sight wrote (a CLI command nudged the hub): pages look again. */
  lookAgain(scope: { node?: string } = {}): void {
    this.feed.lookAgain(scope);
  }

  close(): void {
    this.feed.close?.();
  }

  /** Handles the request if it is one of the web view's; false leaves it to the JSON routes. */
  async handle(request: IncomingMessage, response: ServerResponse, url: URL): Promise<boolean> {
    const method = request.method ?? "GET";
    const route = url.pathname;
    try {
      if (method === "GET" || method === "HEAD") return await this.get(request, response, url);
      if (method !== "POST") return false;
      if (route === "/login") return await this.login(request, response, url);
      if (route === "/logout") return await this.logout(request, response);
      const action = ACTION_ROUTE.exec(route);
      if (action)
        return await this.act(request, response, action[1]!, decodeURIComponent(action[2]!), action[3]!);
      const rollout = ROLLOUT_ROUTE.exec(route);
      if (rollout && this.rollout)
        return await this.rolloutAction(
          request,
          response,
          rollout[1]!,
          decodeURIComponent(rollout[2]!),
          rollout[3] as "pause" | "resume",
        );
      return false;
    } catch (error) {
      if (response.headersSent) {
        response.end();
        return true;
      }
      const status =
        error instanceof WebError
          ? error.status
          : error instanceof NotFoundError
            ? 404
            : error instanceof StewardError
              ? 409
              : 500;
      if (status === 500) this.hub.log.warn({ err: error, url: request.url }, "web view request failed");
      const message =
        error instanceof StewardError
          ? error.message
          : "the hub could not answer this request; its log says why";
      await this.problem(request, response, url, status, message);
      return true;
    }
  }

  private async get(request: IncomingMessage, response: ServerResponse, url: URL): Promise<boolean> {
    const route = url.pathname;
    const asset = ASSETS.get(route);
    if (asset) {
      response.writeHead(200, {
        "content-type": asset.type,
        "content-length": asset.body.length,
        // The name carries the content's hash: a new version is a new name.
        "cache-control": "public, max-age=31536000, immutable",
        "x-content-type-options": "nosniff",
      });
      response.end(request.method === "HEAD" ? undefined : asset.body);
      return true;
    }
    if (route === "/events") {
      streamEvents(request, response, this.feed, await changeFilter(url.searchParams, this.hub.store));
      return true;
    }
    const pages: Record<string, (ctx: PageContext) => Page | Promise<Page>> = {
      "/": (ctx) => fleetPage(this.hub.store, this.feed, ctx),
      "/login": (ctx) => loginPage(ctx),
      "/tasks": (ctx) => tasksPage(this.hub.store, ctx),
      "/conditions": (ctx) => conditionsPage(this.hub.store, ctx),
    };
    const asHtml = wantsHtml(request.headers.accept);
    if (route === "/tasks" && !asHtml) return this.json(response, 200, await listTasks(this.hub.store));
    const fixed = pages[route];
    if (fixed) {
      const ctx = await this.context(request, url);
      return this.page(request, response, await fixed(ctx), ctx);
    }
    // The stories are JSON for everyone who does not ask for a page (http.ts answers them).
    const story = STORY_ROUTE.exec(route);
    if (!story || !asHtml) return false;
    const kind = story[1]!;
    const name = decodeURIComponent(story[2]!);
    const ctx = await this.context(request, url);
    const page = await this.storyPage(kind, name, ctx);
    if (!page) throw new WebError(404, `no ${kind.slice(0, -1)} ${name} is known to this hub`);
    return this.page(request, response, page, ctx);
  }

  private async storyPage(kind: string, name: string, ctx: PageContext): Promise<Page | undefined> {
    const store = this.hub.store;
    // Each page reads its story again on every live refresh, hence the reader as well as the story.
    const view = async <T>(
      read: () => Promise<T | undefined>,
      render: (story: T, read: () => Promise<T | undefined>) => Page,
    ) => {
      const story = await read();
      return story === undefined ? undefined : render(story, read);
    };
    switch (kind) {
      case "revisions": {
        const sha = /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(name)
          ? name
          : (await store.desired.revisionByPrefix(name))?.sha;
        return view(
          async () => (sha ? revisionStory(store, sha) : undefined),
          (story, read) => revisionPage(store, story, read, ctx, this.rollout),
        );
      }
      case "instances":
        return view(
          () => instanceStory(store, name),
          (story, read) => instancePage(story, read, ctx),
        );
      case "nodes":
        return view(
          () => nodeStory(store, name),
          (story, read) => nodePage(story, read, ctx),
        );
      case "conditions":
        return view(
          () => conditionStoryOf(store, name),
          (story, read) => conditionPage(story, read, ctx),
        );
      case "attempts":
        return view(
          () => attemptStoryOf(store, name),
          (story, read) => attemptPage(story, read, ctx),
        );
    }
    return undefined;
  }

  private async context(request: IncomingMessage, url: URL): Promise<PageContext> {
    const session = this.operators.session(cookies(request).get(SESSION_COOKIE));
    const ctx: PageContext = {
      now: this.hub.clock.now(),
      url,
      operatorsEnabled: this.operators.enabled,
      openTasks: (await this.hub.store.tasks.list({ status: "open" })).length,
    };
    if (session) {
      ctx.session = session;
      // Shown once, on the page itself: a region fetched in the background does not take it.
      if (session.flash && !request.headers["x-steward-region"]) {
        ctx.done = session.flash;
        delete session.flash;
      }
    }
    return ctx;
  }

  private headers(status: number, type = "text/html; charset=utf-8"): Record<string, string | number> {
    return {
      "content-type": type,
      "content-security-policy": CONTENT_SECURITY_POLICY,
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
      "referrer-policy": "same-origin",
      "cross-origin-opener-policy": "same-origin",
      "cache-control": "no-store",
      vary: "Accept, X-Steward-Region, Cookie",
      ...(status === 405 ? { allow: "GET, HEAD" } : {}),
    };
  }

  private async page(
    request: IncomingMessage,
    response: ServerResponse,
    page: Page,
    ctx: PageContext,
    whole = false,
  ): Promise<true> {
    const regionName = whole ? undefined : request.headers["x-steward-region"];
    let text: string;
    if (typeof regionName === "string" && regionName !== "") {
      const region = regionOf(page, regionName);
      if (!region) throw new WebError(404, `this page has no region ${regionName}`);
      text = (await region.render()).text;
    } else text = (await documentOf(page, ctx)).text;
    const status = page.status ?? 200;
    response.writeHead(status, { ...this.headers(status), "content-length": Buffer.byteLength(text) });
    response.end(request.method === "HEAD" ? undefined : text);
    return true;
  }

  private json(response: ServerResponse, status: number, body: unknown): true {
    sendJson(response, status, body);
    return true;
  }

  /** A refusal or failure: a page for a browser, JSON for a program. */
  private async problem(
    request: IncomingMessage,
    response: ServerResponse,
    url: URL,
    status: number,
    message: string,
  ): Promise<void> {
    if (!wantsHtml(request.headers.accept) && request.method !== "GET") {
      this.json(response, status, { error: message });
      return;
    }
    const ctx = await this.context(request, url);
    const back = safeNext(request.headers.referer ? new URL(request.headers.referer, url).pathname : "/");
    await this.page(
      request,
      response,
      {
        title: status === 403 ? "Not allowed" : status === 404 ? "Not found" : "Not done",
        section: "other",
        parts: [
          html`<section class="panel"><h1>${status === 403 ? "Not allowed" : status === 404 ? "Not found" : "Not done"}</h1><p class="msg" role="alert">${message}</p><p><a href="${back}">Back</a> · <a href="/">the fleet</a></p></section>`,
        ],
        status,
      },
      ctx,
      true,
    );
  }

  /**
   * The operator behind an action: a bearer token, or a session whose CSRF token the form carries.
   * A request another site's page made (its Origin is not this hub's) is refused first.
   */
  private actor(request: IncomingMessage, form: URLSearchParams): Actor {
    if (!this.operators.enabled)
      throw new WebError(
        403,
        "this hub is read-only: it takes actions only when started with --operator-tokens FILE",
      );
    const bearer = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? "");
    if (bearer) {
      const operator = this.operators.byTokenOf(bearer[1]!);
      if (!operator) throw new WebError(403, "that token is not one of this hub's operator tokens");
      return { operator };
    }
    this.sameOrigin(request);
    const session = this.operators.session(cookies(request).get(SESSION_COOKIE));
    if (!session) throw new WebError(403, "sign in with an operator token to act (/login)");
    const csrf = form.get("csrf") ?? "";
    if (!sameSecret(csrf, session.csrf))
      throw new WebError(
        403,
        "this form is out of date (its CSRF token does not match your session): load the page again",
      );
    return { operator: session.operator, session };
  }

  private sameOrigin(request: IncomingMessage): void {
    const origin = request.headers.origin;
    if (origin === undefined) return;
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    if (!host || host !== request.headers.host)
      throw new WebError(403, `a page of ${origin} may not act on this hub`);
  }

  private async login(request: IncomingMessage, response: ServerResponse, url: URL): Promise<true> {
    const form = await readForm(request);
    this.sameOrigin(request);
    const next = safeNext(form.get("next"));
    const operator = this.operators.enabled ? this.operators.byTokenOf(form.get("token") ?? "") : undefined;
    if (!operator) {
      const ctx = await this.context(request, new URL(`/login?next=${encodeURIComponent(next)}`, url));
      const problem = this.operators.enabled
        ? "That is not one of this hub's operator tokens."
        : "This hub is read-only: nobody can sign in.";
      return this.page(request, response, loginPage(ctx, problem), ctx);
    }
    const session = this.operators.signIn(operator);
    this.hub.log.info({ operator: operator.name }, "operator %s signed in to the web view", operator.name);
    const secure = request.headers["x-forwarded-proto"] === "https" || "encrypted" in request.socket;
    response.writeHead(303, {
      location: next,
      "set-cookie": `${SESSION_COOKIE}=${session.id}; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200${secure ? "; Secure" : ""}`,
      "cache-control": "no-store",
    });
    response.end();
    return true;
  }

  private async logout(request: IncomingMessage, response: ServerResponse): Promise<true> {
    const form = await readForm(request);
    const actor = this.actor(request, form);
    if (actor.session) this.operators.signOut(actor.session.id);
    response.writeHead(303, {
      location: "/",
      "set-cookie": `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0`,
      "cache-control": "no-store",
    });
    response.end();
    return true;
  }

  /** Drain, undrain, or claim, resolve or decline a task: the CLI's own functions, with the operator's name. */
  private async act(
    request: IncomingMessage,
    response: ServerResponse,
    kind: string,
    name: string,
    verb: string,
  ): Promise<true> {
    const form = await readForm(request);
    const { operator, session } = this.actor(request, form);
    const store = this.hub.store;
    const now = this.hub.clock.now();
    let done: string;
    let back: string;
    let result: Record<string, unknown>;
    if (kind === "nodes") {
      if (verb !== "drain" && verb !== "undrain")
        throw new WebError(404, `nodes take drain or undrain, not ${verb}`);
      if (!(await store.nodes.get(name))) throw new WebError(404, `no node ${name} is known to this hub`);
      const reason = (form.get("reason") ?? "").trim();
      const detail: { by: string; reason?: string; at: Date } = { by: operator.name, at: now };
      if (reason) detail.reason = reason;
      const node = await setNodeDraining(store, name, verb === "drain", detail);
      await this.hub.nudge({ node: name });
      this.feed.lookAgain({ node: name });
      done =
        verb === "drain"
          ? `node ${name} is draining: no new dispatches, desired state kept (by ${operator.name})`
          : `node ${name} is back in service (by ${operator.name})`;
      back = `/nodes/${encodeURIComponent(name)}`;
      result = { node: name, draining: node.draining, by: operator.name, ...(reason ? { reason } : {}) };
    } else {
      const at = now.toISOString();
      let task: import("../records.js").TaskRecord;
      let node: string | undefined;
      if (verb === "claim") task = await claimTask(store, name, operator.name, at);
      else if (verb === "decline")
        task = await releaseTask(store, name, operator.name, (form.get("note") ?? "").trim(), at);
      else if (verb === "resolve") {
        const outcome = form.get("outcome") || undefined;
        const resolved = await resolveTask(
          store,
          name,
          operator.name,
          form.get("action") ?? "",
          at,
          outcome as TaskOutcome | undefined,
        );
        task = resolved.task;
        node = resolved.condition.node;
      } else throw new WebError(404, `tasks take claim, resolve or decline, not ${verb}`);
      // A resolution may earn a blocked instance another attempt: the hub looks again now.
      await this.hub.nudge(node ? { node } : {});
      this.feed.lookAgain({ task: task.id, ...(node ? { node } : {}) });
      done = `task ${task.id} ${task.status === "open" ? "declined" : task.status} by ${operator.name}`;
      back = `/tasks#task-${task.id}`;
      result = { task };
    }
    this.hub.log.info(
      { operator: operator.name, action: verb, subject: name },
      "web view: %s %s by %s",
      verb,
      name,
      operator.name,
    );
    if (!session) return this.json(response, 200, result);
    session.flash = done;
    response.writeHead(303, { location: back, "cache-control": "no-store" });
    response.end();
    return true;
  }

  private async rolloutAction(
    request: IncomingMessage,
    response: ServerResponse,
    sha: string,
    assignment: string,
    verb: "pause" | "resume",
  ): Promise<true> {
    const form = await readForm(request);
    const { operator, session } = this.actor(request, form);
    const full = (await this.hub.store.desired.revisionByPrefix(sha))?.sha ?? sha;
    const decision = {
      revision: full,
      assignment,
      by: operator.name,
      reason: (form.get("reason") ?? "").trim(),
    };
    // The control records the decision and nudges the hub with the revision.
    if (verb === "pause") await this.rollout!.pause(decision);
    else await this.rollout!.resume(decision);
    this.feed.lookAgain();
    if (!session) return this.json(response, 200, decision);
    session.flash = `rollout of ${assignment} ${verb === "pause" ? "paused" : "resumed"} by ${operator.name}`;
    response.writeHead(303, {
      location: `/revisions/${full}#assignment-${encodeURIComponent(assignment)}`,
      "cache-control": "no-store",
    });
    response.end();
    return true;
  }
}
