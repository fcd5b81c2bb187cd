/**
 * The hub's HTTP surface (node:http): `GET /healthz`, `GET /metrics` (Prometheus), `GET
 * /revisions/:sha` (a revision's progress, what its commit statuses link to), the stories `steward
 * describe` tells as JSON (`GET /instances/:assignment@:node`, `/nodes/:name`, `/conditions/:id`,
 * `/attempts/:id`: the same model, src/hub/story.ts), `POST /nudge` (the CLI
 * wrote an operator change to the store: look again), and a mount point for the syncer's webhook
 * handler at `POST /webhook`. The web view (web/web.ts) serves the pages, for a browser the same
 * stories as HTML, and its actions; a client that does not ask for HTML gets the JSON as before.
 * It listens on loopback unless told otherwise.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Hub } from "./hub.js";
import { sendJson } from "./json-response.js";
import { revisionProgress } from "./progress.js";
import { attemptStoryOf, conditionStoryOf, instanceStory, nodeStory } from "./story.js";
import { WebView, type WebViewOptions } from "./web/web.js";

/** The stories served by kind, as `steward describe` tells them. */
const STORIES = {
  instances: instanceStory,
  nodes: nodeStory,
  conditions: conditionStoryOf,
  attempts: attemptStoryOf,
} as const;

export type RequestHandler = (request: IncomingMessage, response: ServerResponse) => void | Promise<void>;

export interface HubHttpOptions {
  hub: Hub;
  /** `POST /webhook` (the syncer's handler); 404 when absent. */
  webhook?: RequestHandler;
  /** Called after `/nudge`, e.g. to trigger a sync. */
  onNudge?: (scope: { node?: string; sync?: boolean }) => void;
  host?: string;
  port?: number;
  /** The web view's operators, rollout control or feed; `false`: no web view (JSON only). */
  web?: Omit<WebViewOptions, "hub"> | false;
}

export interface HubHttp {
  server: Server;
  /** The web view, unless it was turned off. */
  web?: WebView;
  /** `http://host:port`. */
  url: string;
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage, limit = 64 * 1024): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new Error("request body too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Starts the hub's HTTP server; resolves once it listens. */
export async function startHubHttp(options: HubHttpOptions): Promise<HubHttp> {
  const { hub } = options;
  const web = options.web === false ? undefined : new WebView({ hub, ...options.web });
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://hub");
    const route = `${request.method} ${url.pathname}`;
    if (web && (await web.handle(request, response, url))) return;
    if (route === "GET /healthz") {
      const revision = hub.store.latestRevision();
      return sendJson(response, 200, {
        status: "ok",
        transports: hub.transportNames,
        revision: revision ? { sha: revision.sha, outcome: revision.outcome } : null,
        ...hub.activity,
      });
    }
    if (route === "GET /metrics") {
      const text = await hub.metrics.text();
      response.writeHead(200, { "content-type": hub.metrics.registry.contentType });
      response.end(text);
      return;
    }
    if (route === "POST /webhook") {
      if (!options.webhook) return sendJson(response, 404, { error: "no webhook is configured on this hub" });
      return options.webhook(request, response);
    }
    if (route === "POST /nudge") {
      const text = await readBody(request);
      const scope = (text.trim() === "" ? {} : JSON.parse(text)) as { node?: string; sync?: boolean };
      hub.nudge(scope.node ? { node: scope.node } : {});
      web?.lookAgain(scope.node ? { node: scope.node } : {});
      options.onNudge?.(scope);
      response.writeHead(204);
      response.end();
      return;
    }
    const revision = /^GET \/revisions\/([0-9a-f]{4,64})$/.exec(route);
    if (revision) {
      const sha = revision[1]!;
      const full = sha.length === 40 || sha.length === 64 ? sha : hub.store.revisionByPrefix(sha)?.sha;
      const progress = full ? revisionProgress(hub.store, full) : undefined;
      if (!progress)
        return sendJson(response, 404, { error: `no revision ${sha} has been synced by this hub` });
      return sendJson(response, 200, progress);
    }
    const story = /^GET \/(instances|nodes|conditions|attempts)\/([^/]+)$/.exec(route);
    if (story) {
      const [, kind, name] = story as unknown as [string, keyof typeof STORIES, string];
      const found = STORIES[kind](hub.store, decodeURIComponent(name));
      if (!found)
        return sendJson(response, 404, { error: `no ${kind.slice(0, -1)} ${decodeURIComponent(name)}` });
      return sendJson(response, 200, found);
    }
    sendJson(response, 404, { error: `no route ${route}` });
  };
  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      hub.log.warn({ err: error, url: request.url }, "http request failed");
      if (!response.headersSent) sendJson(response, 400, { error: (error as Error).message });
      else response.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    server,
    ...(web ? { web } : {}),
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise((resolve) => {
        web?.close();
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
