/**
 * The hub's HTTP surface (node:http): `GET /healthz`, `GET /metrics` (Prometheus), `GET
 * /revisions/:sha` (a revision's progress, what its commit statuses link to), the stories `steward
 * describe` tells as JSON (`GET /instances/:assignment@:node`, `/nodes/:name`, `/conditions/:id`,
 * `/attempts/:id`: the same model, src/hub/story.ts), `POST /nudge` (the CLI
 * wrote an operator change to the store: look again), `POST /sync` (`steward sync`: sync now and
 * answer with what the sync did), and a mount point for the syncer's webhook handler at `POST
 * /webhook`. The web view (web/web.ts) serves the pages, for a browser the same stories as HTML,
 * and its actions; a client that does not ask for HTML gets the JSON as before. It listens on
 * loopback unless told otherwise.
 *
 * `GET /agent/steward-agent.mjs` serves the single-file agent this hub uploads to SSH hosts, so a
 * new host needs only Node.js: fetched over plain HTTP, it is checked against the sha256 the
 * operator's own steward prints (`steward agent checksum`), never against one this hub serves.
 *
 * `POST /sync` takes an operator's decision (`acceptRewrite` adopts a rewritten branch) and answers
 * with the fleet repository's diagnostics, so it needs the operator token the hub wrote to its
 * state directory: whoever may read that directory may already change the hub's database, and
 * nobody else may ask, whatever address the hub listens on.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Hub } from "./hub.js";
import { sendJson } from "./json-response.js";
import { revisionProgress } from "./progress.js";
import { attemptStoryOf, conditionStoryOf, instanceStory, nodeStory } from "./story.js";
import { sameSecret } from "./web/operators.js";
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
  /**
   * `POST /sync`: syncs now and resolves with what the sync did (JSON-serialisable); a rejection
   * is the sync's failure, answered 502 with its message and code. 404 when absent.
   */
  onSync?: (request: { acceptRewrite: boolean }) => Promise<unknown>;
  /** The bearer token `POST /sync` requires; without one, nobody may ask. */
  operatorToken?: string;
  host?: string;
  port?: number;
  /** The web view's operators, rollout control or feed; `false`: no web view (JSON only). */
  web?: Omit<WebViewOptions, "hub"> | false;
  /**
   * The single-file agent `GET /agent/steward-agent.mjs` serves (its bytes and sha256); throws,
   * with the fix in its message, when it is not built. 404 when absent.
   */
  agentFile?: () => { bytes: Uint8Array; sha256: string };
}

export interface HubHttp {
  server: Server;
  /** The web view, unless it was turned off. */
  web?: WebView;
  /** `http://host:port`. */
  url: string;
  close(): Promise<void>;
}

/** True when `request` carries `Authorization: Bearer <token>`; compared in constant time. */
function authorised(request: IncomingMessage, token: string | undefined): boolean {
  const given = /^Bearer (\S+)$/.exec(request.headers.authorization ?? "")?.[1];
  return token !== undefined && given !== undefined && sameSecret(given, token);
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
      const revision = await hub.store.desired.latestRevision();
      return sendJson(response, 200, {
        status: "ok",
        transports: hub.transportNames,
        revision: revision ? { sha: revision.sha, outcome: revision.outcome } : null,
        ...hub.activity,
        ...(hub.replica ? { replica: hub.replica } : {}),
      });
    }
    if (route === "GET /metrics") {
      const text = await hub.metrics.text();
      response.writeHead(200, { "content-type": hub.metrics.registry.contentType });
      response.end(text);
      return;
    }
    if (route === "GET /agent/steward-agent.mjs") {
      if (!options.agentFile) return sendJson(response, 404, { error: "this hub serves no agent file" });
      let agent: { bytes: Uint8Array; sha256: string };
      try {
        agent = options.agentFile();
      } catch (error) {
        return sendJson(response, 404, { error: (error as Error).message });
      }
      response.writeHead(200, {
        "content-type": "text/javascript; charset=utf-8",
        "content-length": agent.bytes.length,
        "content-disposition": 'attachment; filename="steward-agent.mjs"',
        "x-content-type-options": "nosniff",
        "cache-control": "no-cache",
      });
      response.end(agent.bytes);
      return;
    }
    if (route === "POST /webhook") {
      if (!options.webhook) return sendJson(response, 404, { error: "no webhook is configured on this hub" });
      return options.webhook(request, response);
    }
    if (route === "POST /nudge") {
      const text = await readBody(request);
      const scope = (text.trim() === "" ? {} : JSON.parse(text)) as {
        node?: string;
        revision?: string;
        sync?: boolean;
      };
      await hub.nudge({
        ...(typeof scope.node === "string" ? { node: scope.node } : {}),
        ...(typeof scope.revision === "string" ? { revision: scope.revision } : {}),
      });
      web?.lookAgain(typeof scope.node === "string" ? { node: scope.node } : {});
      options.onNudge?.(scope);
      response.writeHead(204);
      response.end();
      return;
    }
    if (route === "POST /sync") {
      if (!options.onSync) return sendJson(response, 404, { error: "this hub does not sync on request" });
      if (!authorised(request, options.operatorToken))
        return sendJson(response, 401, {
          error: "POST /sync needs the operator token from the hub's state directory (hub.json)",
        });
      const text = await readBody(request);
      const body = (text.trim() === "" ? {} : JSON.parse(text)) as { acceptRewrite?: unknown };
      try {
        const outcome = await options.onSync({ acceptRewrite: body.acceptRewrite === true });
        return sendJson(response, 200, { outcome });
      } catch (error) {
        const failure = error as { message?: string; code?: unknown };
        return sendJson(response, 502, {
          error: failure.message ?? String(error),
          ...(typeof failure.code === "string" ? { code: failure.code } : {}),
        });
      }
    }
    const revision = /^GET \/revisions\/([0-9a-f]{4,64})$/.exec(route);
    if (revision) {
      const sha = revision[1]!;
      const full =
        sha.length === 40 || sha.length === 64 ? sha : (await hub.store.desired.revisionByPrefix(sha))?.sha;
      const progress = full ? await revisionProgress(hub.store, full) : undefined;
      if (!progress)
        return sendJson(response, 404, { error: `no revision ${sha} has been synced by this hub` });
      return sendJson(response, 200, progress);
    }
    const story = /^GET \/(instances|nodes|conditions|attempts)\/([^/]+)$/.exec(route);
    if (story) {
      const [, kind, name] = story as unknown as [string, keyof typeof STORIES, string];
      const found = await STORIES[kind](hub.store, decodeURIComponent(name));
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
