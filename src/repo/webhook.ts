/**
 * The push webhook the hub serves at `POST /webhook`: verifies that a forge sent it, then asks for
 * a sync. GitHub signs the body with HMAC-SHA256 (`X-Hub-Signature-256: sha256=<hex>`), Gitea and
 * Forgejo likewise (`X-Gitea-Signature: <hex>`), GitLab sends the shared secret
 * (`X-Gitlab-Token`). Comparisons are constant-time. A request that fails verification gets 401
 * and never reaches `onPush`; the secret is never echoed or logged.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

/** The forges whose webhooks are understood. */
export type Forge = "github" | "gitlab" | "gitea";

/** A verified push notification. */
export interface PushNotice {
  forge: Forge;
  /** The pushed ref, e.g. `refs/heads/main`, when the payload says. */
  ref?: string;
  /** The new head, when the payload says. */
  after?: string;
}

/** The webhook's secret, what to call on a verified push, and limits. */
export interface WebhookOptions {
  /** The shared secret configured on the forge's webhook. */
  secret: string;
  /** Called for each verified push to `branch` (or any branch when `branch` is not set). Not awaited. */
  onPush(notice: PushNotice): void;
  /** Only pushes to this branch trigger a sync; others are acknowledged and ignored. */
  branch?: string;
  /** Bodies larger than this are refused (413). Default 1 MiB. */
  maxBytes?: number;
}

/** Why a request was refused, for the response body (never includes the secret or the signature). */
type Refusal = { status: number; message: string };

function equalSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function hmacHex(secret: string, body: Buffer): string {
  return createHmac("sha256", secret).update(body).digest("hex");
}

function header(headers: IncomingMessage["headers"], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Which forge sent the request and whether its proof holds. */
export function verifyWebhook(
  headers: IncomingMessage["headers"],
  body: Buffer,
  secret: string,
): { forge: Forge } | Refusal {
  const get = (name: string) => header(headers, name);
  const gitea = get("x-gitea-signature");
  if (gitea !== undefined)
    return equalSecret(gitea.toLowerCase(), hmacHex(secret, body))
      ? { forge: "gitea" }
      : { status: 401, message: "X-Gitea-Signature does not match the body" };
  const gitlab = get("x-gitlab-token");
  if (gitlab !== undefined)
    return equalSecret(gitlab, secret)
      ? { forge: "gitlab" }
      : { status: 401, message: "X-Gitlab-Token is wrong" };
  const github = get("x-hub-signature-256");
  if (github !== undefined)
    return equalSecret(github.toLowerCase(), `sha256=${hmacHex(secret, body)}`)
      ? { forge: "github" }
      : { status: 401, message: "X-Hub-Signature-256 does not match the body" };
  return {
    status: 401,
    message:
      "no X-Hub-Signature-256, X-Gitlab-Token or X-Gitea-Signature header: configure the webhook's secret",
  };
}

/** Whether the event is a push (pings and other events are acknowledged without a sync). */
function isPush(forge: Forge, request: IncomingMessage): boolean {
  const event = (name: string) => header(request.headers, name);
  if (forge === "github") return event("x-github-event") === "push";
  if (forge === "gitlab") return event("x-gitlab-event") === "Push Hook";
  return (event("x-gitea-event") ?? event("x-gogs-event")) === "push";
}

function reply(response: ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
  });
  response.end(text);
}

/**
 * A Node `(request, response)` handler for forge push webhooks. Answers 202 when a sync was
 * requested, 200 for verified events that need none (pings, other branches), 401 for a failed
 * verification, 405 for a method other than POST, 413 for an oversized body.
 */
export function createWebhookHandler(
  options: WebhookOptions,
): (request: IncomingMessage, response: ServerResponse) => void {
  if (!options.secret) throw new Error("createWebhookHandler needs a non-empty secret");
  const maxBytes = options.maxBytes ?? 1024 * 1024;
  return (request, response) => {
    if (request.method !== "POST") {
      response.setHeader("Allow", "POST");
      reply(response, 405, { error: "use POST" });
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    request.on("data", (chunk: Buffer) => {
      if (refused) return;
      size += chunk.length;
      if (size > maxBytes) {
        refused = true;
        reply(response, 413, { error: `body larger than ${maxBytes} bytes` });
        request.resume();
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => {
      if (refused) return;
      const body = Buffer.concat(chunks);
      const verdict = verifyWebhook(request.headers, body, options.secret);
      if ("status" in verdict) {
        reply(response, verdict.status, { error: verdict.message });
        return;
      }
      if (!isPush(verdict.forge, request)) {
        reply(response, 200, { ok: true, sync: false, reason: "not a push event" });
        return;
      }
      let payload: { ref?: unknown; after?: unknown } = {};
      try {
        payload = JSON.parse(body.toString("utf8")) as typeof payload;
      } catch {
        // A verified push with an unreadable body still means "something changed": sync anyway.
      }
      const notice: PushNotice = { forge: verdict.forge };
      if (typeof payload.ref === "string") notice.ref = payload.ref;
      if (typeof payload.after === "string") notice.after = payload.after;
      if (options.branch && notice.ref && notice.ref !== `refs/heads/${options.branch}`) {
        reply(response, 200, {
          ok: true,
          sync: false,
          reason: `push to ${notice.ref}, not the tracked branch`,
        });
        return;
      }
      options.onPush(notice);
      reply(response, 202, { ok: true, sync: true });
    });
    request.on("error", () => {
      if (!response.headersSent) reply(response, 400, { error: "request aborted" });
    });
  };
}
