/**
 * What the forge providers share: turning an HTTP answer into a classified `StatusWriteError`
 * (rate limits with how long to wait, transient, permanent), and a JSON POST for the forges spoken
 * to with plain fetch (GitLab, Gitea). Messages never carry the token: it is redacted from anything
 * the forge echoes, and request headers are never part of an error.
 */
import {
  type CommitStatus,
  cleanDescription,
  fitDescription,
  StatusWriteError,
  type StatusWriter,
} from "../hub/status.js";

/** Header access that works for fetch's `Headers` and Octokit's plain header objects. */
export type HeaderLookup = (name: string) => string | undefined;

/** How long to wait when a forge says "rate limited" without saying for how long. */
export const DEFAULT_RATE_LIMIT_WAIT_MS = 60_000;

/** How long one request may take before the forge counts as unreachable. */
export const REQUEST_TIMEOUT_MS = 15_000;

/**
 * The wait a forge asks for: `Retry-After` (seconds or an HTTP date), else the reset time of the
 * rate-limit window (`X-RateLimit-Reset` on GitHub and Gitea, `RateLimit-Reset` on GitLab: epoch
 * seconds). Undefined when the answer names none.
 */
export function requestedWaitMs(header: HeaderLookup, now: number): number | undefined {
  const retryAfter = header("retry-after")?.trim();
  if (retryAfter) {
    if (/^\d+$/.test(retryAfter)) return Number(retryAfter) * 1000;
    const at = Date.parse(retryAfter);
    if (!Number.isNaN(at)) return Math.max(0, at - now);
  }
  const reset = (header("x-ratelimit-reset") ?? header("ratelimit-reset"))?.trim();
  if (reset && /^\d+$/.test(reset)) return Math.max(0, Number(reset) * 1000 - now);
  return undefined;
}

function isRateLimit(status: number, header: HeaderLookup, message: string): boolean {
  if (status === 429) return true;
  if (status !== 403) return false;
  return (
    header("retry-after") !== undefined ||
    header("x-ratelimit-remaining") === "0" ||
    header("ratelimit-remaining") === "0" ||
    /rate limit/i.test(message)
  );
}

const PERMANENT_REASONS: Record<number, string> = {
  400: "Rejected",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  422: "Rejected",
};

/**
 * Classifies a failed HTTP answer: 429, and 403 that says rate limit, → `rate-limited` with the
 * wait; 408, 5xx → `transient` (ForgeUnavailable); other 4xx → `permanent`.
 */
export function httpFailure(input: {
  provider: string;
  status: number;
  header: HeaderLookup;
  /** What the forge said (its `message`), redacted and shortened here. */
  forgeMessage: string;
  now: number;
  secrets: readonly string[];
}): StatusWriteError {
  const { provider, status, header, now } = input;
  const said = cleanDescription(input.forgeMessage, input.secrets).slice(0, 300);
  const suffix = said ? `: ${said}` : "";
  if (isRateLimit(status, header, said)) {
    const wait = requestedWaitMs(header, now) ?? DEFAULT_RATE_LIMIT_WAIT_MS;
    return new StatusWriteError(
      `${provider} rate-limited statuses (HTTP ${status}); waiting ${Math.ceil(wait / 1000)} s${suffix}`,
      {
        provider,
        failureClass: "rate-limited",
        reason: "RateLimited",
        httpStatus: status,
        retryAfterMs: wait,
      },
    );
  }
  if (status === 408 || status >= 500) {
    const wait = requestedWaitMs(header, now);
    return new StatusWriteError(`${provider} is unavailable (HTTP ${status})${suffix}`, {
      provider,
      failureClass: "transient",
      reason: "ForgeUnavailable",
      httpStatus: status,
      ...(wait === undefined ? {} : { retryAfterMs: wait }),
    });
  }
  const reason = PERMANENT_REASONS[status] ?? "Rejected";
  const fix =
    status === 401
      ? " — check the token in the variable named by tokenEnv"
      : status === 403 || status === 404
        ? " — check owner/repo (or project) and that the token may write commit statuses"
        : "";
  return new StatusWriteError(`${provider} refused the status (HTTP ${status})${suffix}${fix}`, {
    provider,
    failureClass: "permanent",
    reason,
    httpStatus: status,
  });
}

/** A request that got no HTTP answer at all (refused, reset, DNS, timeout): the forge is unreachable. */
export function networkFailure(
  provider: string,
  cause: unknown,
  secrets: readonly string[],
): StatusWriteError {
  const inner = cause instanceof Error && cause.cause instanceof Error ? cause.cause : cause;
  const text = inner instanceof Error ? inner.message : String(inner);
  return new StatusWriteError(
    `${provider} is unreachable: ${cleanDescription(text, secrets).slice(0, 200)}`,
    { provider, failureClass: "transient", reason: "ForgeUnavailable", cause },
  );
}

/** The `message` (GitHub, Gitea) or `message`/`error` (GitLab) of an error body, or the raw text. */
export function forgeMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { message?: unknown; error?: unknown };
    const said = parsed.message ?? parsed.error;
    if (typeof said === "string") return said;
    if (said !== undefined) return JSON.stringify(said);
  } catch {
    // not JSON: the text is the message
  }
  return body;
}

/** The API base of a forge instance: `suffix` (`/api/v4`) is added unless the URL already ends with it. */
export function apiBase(url: string, suffix: string): string {
  const trimmed = url.replace(/\/+$/, "");
  return trimmed.endsWith(suffix) ? trimmed : `${trimmed}${suffix}`;
}

/** POSTs JSON and resolves with the parsed answer; rejects with a classified `StatusWriteError`. */
export async function postJson(request: {
  provider: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
  fetch: typeof fetch;
  now: () => number;
  secrets: readonly string[];
  /** Lets a provider accept an answer the generic rules would call a failure. */
  accept?: (status: number, text: string) => boolean;
}): Promise<unknown> {
  let response: Response;
  let text: string;
  try {
    response = await request.fetch(request.url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json", ...request.headers },
      body: JSON.stringify(request.body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    text = await response.text();
  } catch (error) {
    throw networkFailure(request.provider, error, request.secrets);
  }
  if (response.ok || request.accept?.(response.status, text)) {
    try {
      return text ? JSON.parse(text) : undefined;
    } catch {
      return text;
    }
  }
  throw httpFailure({
    provider: request.provider,
    status: response.status,
    header: (name) => response.headers.get(name) ?? undefined,
    forgeMessage: forgeMessage(text),
    now: request.now(),
    secrets: request.secrets,
  });
}

/** How a token-authenticated forge is reached: its instance URL, the token, and injectable I/O. */
export interface ForgeConnection {
  token: string;
  now?: () => number;
  fetch?: typeof fetch;
}

/**
 * What the GitLab and Gitea writers share: an API base under the instance URL, a token that is
 * redacted from everything, and one JSON POST per status. Subclasses say where and what to post.
 */
export abstract class JsonForgeWriter implements StatusWriter {
  abstract readonly name: string;
  abstract readonly descriptionLimit: number;
  /** The API base, e.g. `https://gitlab.example.com/api/v4`. */
  protected readonly api: string;
  protected readonly token: string;
  readonly #connection: ForgeConnection;

  constructor(url: string, apiSuffix: string, connection: ForgeConnection) {
    this.api = apiBase(url, apiSuffix);
    this.token = connection.token;
    this.#connection = connection;
  }

  abstract write(status: CommitStatus): Promise<void>;

  /** The status's description, cleaned and cut to this forge's limit. */
  protected description(status: CommitStatus): string {
    return fitDescription(status.description, this.descriptionLimit, [this.token]);
  }

  /** POSTs `body` to `path` under the API base with the forge's auth `headers`. */
  protected async post(
    path: string,
    headers: Record<string, string>,
    body: unknown,
    accept?: (status: number, text: string) => boolean,
  ): Promise<void> {
    await postJson({
      provider: this.name,
      url: `${this.api}${path}`,
      headers,
      body,
      fetch: this.#connection.fetch ?? fetch,
      now: this.#connection.now ?? Date.now,
      secrets: [this.token],
      ...(accept ? { accept } : {}),
    });
  }
}
