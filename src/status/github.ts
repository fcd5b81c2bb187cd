/**
 * Commit statuses on GitHub (and GitHub Enterprise Server) through @octokit/rest:
 * `POST /repos/{owner}/{repo}/statuses/{sha}`. Authenticates with a token (personal, fine-grained or
 * `GITHUB_TOKEN`) or as a GitHub App: a JWT signed with the App's private key is exchanged for an
 * installation token, cached until shortly before it expires.
 */
import { createSign } from "node:crypto";
import { Octokit } from "@octokit/rest";
import { type CommitStatus, fitDescription, StatusWriteError, type StatusWriter } from "../hub/status.js";
import { httpFailure, networkFailure, REQUEST_TIMEOUT_MS } from "./http.js";

/** GitHub rejects longer descriptions with 422. */
export const GITHUB_DESCRIPTION_LIMIT = 140;

export const GITHUB_API_URL = "https://api.github.com";

/** A GitHub App installation: the App's id, the installation on the fleet repo's owner, its PEM key. */
export interface GithubAppCredentials {
  appId: number | string;
  installationId: number;
  privateKey: string;
}

export interface GithubStatusOptions {
  owner: string;
  repo: string;
  /** API base URL; GitHub Enterprise Server: `https://HOST/api/v3`. */
  baseUrl?: string;
  auth: { token: string } | { app: GithubAppCredentials };
  now?: () => number;
  fetch?: typeof fetch;
}

/** Installation tokens live an hour; refresh this long before they expire. */
const TOKEN_REFRESH_MARGIN_MS = 5 * 60_000;

const silent = { debug() {}, info() {}, warn() {}, error() {} };

interface OctokitFailure {
  status?: number;
  message?: string;
  response?: { headers: Record<string, string | number | undefined>; data?: unknown };
}

/** Signs the short-lived JWT a GitHub App authenticates with (RS256; `iat` backdated for clock drift). */
export function githubAppJwt(app: GithubAppCredentials, now: number): string {
  const seconds = Math.floor(now / 1000);
  const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const unsigned = `${encode({ alg: "RS256", typ: "JWT" })}.${encode({
    iat: seconds - 60,
    exp: seconds + 9 * 60,
    iss: String(app.appId),
  })}`;
  const signature = createSign("RSA-SHA256").update(unsigned).sign(app.privateKey).toString("base64url");
  return `${unsigned}.${signature}`;
}

/** Writes commit statuses to one GitHub repository. */
export class GithubStatusWriter implements StatusWriter {
  readonly name: string;
  readonly descriptionLimit = GITHUB_DESCRIPTION_LIMIT;
  readonly #options: GithubStatusOptions;
  readonly #octokit: Octokit;
  readonly #now: () => number;
  #installationToken: { token: string; expiresAt: number } | undefined;

  constructor(options: GithubStatusOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    const baseUrl = (options.baseUrl ?? GITHUB_API_URL).replace(/\/+$/, "");
    this.name = `github:${new URL(baseUrl).host}/${options.owner}/${options.repo}`;
    this.#octokit = new Octokit({
      baseUrl,
      userAgent: "steward",
      log: silent,
      request: { ...(options.fetch ? { fetch: options.fetch } : {}) },
    });
  }

  async write(status: CommitStatus): Promise<void> {
    const token = await this.#token();
    const description = fitDescription(status.description, GITHUB_DESCRIPTION_LIMIT, this.#secrets());
    try {
      await this.#octokit.rest.repos.createCommitStatus({
        owner: this.#options.owner,
        repo: this.#options.repo,
        sha: status.sha,
        state: status.state,
        context: status.context,
        description,
        ...(status.targetUrl ? { target_url: status.targetUrl } : {}),
        headers: { authorization: `token ${token}` },
        request: { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) },
      });
    } catch (error) {
      const failure = this.#failure(error);
      // A revoked or expired installation token: mint a new one next time.
      if (failure.httpStatus === 401) this.#installationToken = undefined;
      throw failure;
    }
  }

  #secrets(): string[] {
    const auth = this.#options.auth;
    const secrets = "token" in auth ? [auth.token] : [auth.app.privateKey];
    if (this.#installationToken) secrets.push(this.#installationToken.token);
    return secrets;
  }

  async #token(): Promise<string> {
    const auth = this.#options.auth;
    if ("token" in auth) return auth.token;
    const cached = this.#installationToken;
    if (cached && cached.expiresAt - TOKEN_REFRESH_MARGIN_MS > this.#now()) return cached.token;
    try {
      const { data } = await this.#octokit.rest.apps.createInstallationAccessToken({
        installation_id: auth.app.installationId,
        headers: { authorization: `Bearer ${githubAppJwt(auth.app, this.#now())}` },
        request: { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) },
      });
      this.#installationToken = { token: data.token, expiresAt: Date.parse(data.expires_at) };
      return data.token;
    } catch (error) {
      const failure = this.#failure(error);
      if (failure.failureClass !== "permanent") throw failure;
      throw new StatusWriteError(
        `${failure.message} — check the GitHub App id, installation id and private key`,
        {
          provider: this.name,
          failureClass: "permanent",
          reason: failure.reason,
          ...(failure.httpStatus === undefined ? {} : { httpStatus: failure.httpStatus }),
        },
      );
    }
  }

  /** Octokit's RequestError without a `response` means no HTTP answer arrived. */
  #failure(error: unknown): StatusWriteError {
    const failure = error as OctokitFailure;
    const response = failure.response;
    if (!response || typeof failure.status !== "number")
      return networkFailure(this.name, error, this.#secrets());
    const data = response.data as { message?: unknown } | string | undefined;
    const said = typeof data === "string" ? data : typeof data?.message === "string" ? data.message : "";
    return httpFailure({
      provider: this.name,
      status: failure.status,
      header: (name) => {
        const value = response.headers[name];
        return value === undefined ? undefined : String(value);
      },
      forgeMessage: said,
      now: this.#now(),
      secrets: this.#secrets(),
    });
  }
}
