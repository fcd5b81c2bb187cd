/**
 * From configuration to status writers: steward.yaml's `spec.status` (providers, publicUrl),
 * overridden by command-line flags, becomes one `StatusWriter` per provider. Tokens come only from
 * the environment variable a provider names (`tokenEnv`, default `GITHUB_TOKEN`, `GITLAB_TOKEN`,
 * `GITEA_TOKEN`; a GitHub App's key from `privateKeyEnv`), never from the command line or the
 * repository, and never appear in a message.
 */

import type { StatusWriter } from "../hub/status.js";
import { EnvironmentError, UsageError } from "../model/errors.js";
import type { StatusProvider, StatusSettings } from "../model/generated.js";
import { GiteaStatusWriter } from "./gitea.js";
import { GithubStatusWriter } from "./github.js";
import { GitlabStatusWriter } from "./gitlab.js";
import { type GitNotesOptions, GitNotesStatusWriter } from "./gitnotes.js";

export type ProviderType = StatusProvider["type"];

/** The status flags a hub command accepts (see src/cli/status-flags.ts), as commander parses them. */
export interface StatusFlags {
  /** `gitnotes`, `github`, `gitlab`, `gitea`, or `none`: replaces steward.yaml's providers. */
  status?: string;
  /** `OWNER/REPO` (GitHub, Gitea) or the project id or path (GitLab). */
  statusRepo?: string;
  statusUrl?: string;
  statusTokenEnv?: string;
  statusAppId?: string;
  statusAppInstallation?: string;
  statusAppKeyEnv?: string;
  publicUrl?: string;
}

const PROVIDER_TYPES: readonly string[] = ["gitnotes", "github", "gitlab", "gitea"];

/** The variable a provider's token is read from when `tokenEnv` does not say. */
export const DEFAULT_TOKEN_ENV: Record<Exclude<ProviderType, "gitnotes">, string> = {
  github: "GITHUB_TOKEN",
  gitlab: "GITLAB_TOKEN",
  gitea: "GITEA_TOKEN",
};

const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

function positiveInteger(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(value)) throw new UsageError(`${flag} must be a positive integer (got "${value}")`);
  return Number(value);
}

function envName(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!ENV_NAME.test(value))
    throw new UsageError(
      `${flag} takes the NAME of an environment variable, like GITHUB_TOKEN (got something else) — never the secret itself`,
    );
  return value;
}

function httpUrl(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`${flag} must be a URL like https://host (got "${value}")`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new UsageError(`${flag} must be an http(s) URL (got "${value}")`);
  if (url.username || url.password)
    throw new UsageError(`${flag} must not carry credentials; use --status-token-env`);
  return value;
}

/** The provider the flags describe, or undefined when they name none. */
function providerFromFlags(flags: StatusFlags): StatusProvider | null | undefined {
  const provider = flags.status;
  const detail = [flags.statusRepo, flags.statusUrl, flags.statusTokenEnv, flags.statusAppId].some(
    (v) => v !== undefined,
  );
  if (provider === undefined) {
    if (detail)
      throw new UsageError(
        "--status-repo, --status-url, --status-token-env and --status-app-* need --status TYPE",
      );
    return undefined;
  }
  if (provider === "none") return null;
  if (!PROVIDER_TYPES.includes(provider))
    throw new UsageError(`--status must be one of gitnotes, github, gitlab, gitea, none (got "${provider}")`);
  const type = provider as ProviderType;
  const result: StatusProvider = { type };
  const url = httpUrl("--status-url", flags.statusUrl);
  if (url) result.url = url;
  const tokenEnv = envName("--status-token-env", flags.statusTokenEnv);
  if (tokenEnv) result.tokenEnv = tokenEnv;
  if (flags.statusRepo !== undefined) {
    if (type === "gitlab") result.project = flags.statusRepo;
    else {
      const [owner, repo, ...rest] = flags.statusRepo.split("/");
      if (!owner || !repo || rest.length > 0)
        throw new UsageError(`--status-repo must be OWNER/REPO for ${type} (got "${flags.statusRepo}")`);
      result.owner = owner;
      result.repo = repo;
    }
  }
  const appId = positiveInteger("--status-app-id", flags.statusAppId);
  const installationId = positiveInteger("--status-app-installation", flags.statusAppInstallation);
  const privateKeyEnv = envName("--status-app-key-env", flags.statusAppKeyEnv);
  if (appId !== undefined || installationId !== undefined || privateKeyEnv !== undefined) {
    if (type !== "github") throw new UsageError("--status-app-* only apply to --status github");
    if (appId === undefined || installationId === undefined || privateKeyEnv === undefined)
      throw new UsageError(
        "a GitHub App needs --status-app-id, --status-app-installation and --status-app-key-env together",
      );
    Object.assign(result, { appId, installationId, privateKeyEnv });
  }
  return result;
}

/**
 * steward.yaml's status settings with the flags applied: `--status` replaces the providers
 * (`none`: no statuses at all), `--public-url` replaces publicUrl. Without either, git notes.
 */
export function effectiveStatusSettings(
  spec: StatusSettings | undefined,
  flags: StatusFlags = {},
): StatusSettings {
  const settings: StatusSettings = { providers: spec?.providers ?? [{ type: "gitnotes" }] };
  const publicUrl = httpUrl("--public-url", flags.publicUrl) ?? spec?.publicUrl;
  if (publicUrl) settings.publicUrl = publicUrl;
  const fromFlags = providerFromFlags(flags);
  if (fromFlags === null) settings.providers = [];
  else if (fromFlags) settings.providers = [fromFlags];
  return settings;
}

/** What building writers needs from outside: the environment, and for git notes the fleet repository. */
export interface StatusEnvironment {
  env: NodeJS.ProcessEnv;
  /** The hub's clone of the fleet repo (and where to push); required when a gitnotes provider is configured. */
  gitnotes?: Omit<GitNotesOptions, "now">;
  now?: () => number;
  fetch?: typeof fetch;
}

function label(provider: StatusProvider, index: number): string {
  return `spec.status.providers[${index}] (${provider.type})`;
}

function secretFrom(env: NodeJS.ProcessEnv, name: string, what: string, owner: string): string {
  const value = env[name];
  if (!value?.trim())
    throw new EnvironmentError(
      `${owner} needs ${what}: set ${name} in the hub's environment (or name another variable with ${what === "a token" ? "tokenEnv / --status-token-env" : "privateKeyEnv / --status-app-key-env"})`,
    );
  return value.trim();
}

function ownerRepo(provider: StatusProvider, where: string): { owner: string; repo: string } {
  if (!provider.owner || !provider.repo)
    throw new EnvironmentError(
      `${where} needs owner and repo — ${where.startsWith("--") ? "" : "add them to steward.yaml or "}pass --status-repo OWNER/REPO`,
    );
  return { owner: provider.owner, repo: provider.repo };
}

/**
 * Checks the status flags on their own, before the hub has read steward.yaml: their values, and
 * for a forge named by `--status` (which replaces steward.yaml's providers) what its writer needs
 * (OWNER/REPO, the token's variable set in `env`). Throws the first problem, naming the flag.
 */
export function checkStatusFlags(flags: StatusFlags, env: NodeJS.ProcessEnv): void {
  httpUrl("--public-url", flags.publicUrl);
  const provider = providerFromFlags(flags);
  if (!provider || provider.type === "gitnotes") return;
  writerFor(provider, 0, { env }, `--status ${provider.type}`);
}

/** One writer per configured provider. Throws a one-line error naming the provider and the fix. */
export function createStatusWriters(
  settings: StatusSettings,
  environment: StatusEnvironment,
): StatusWriter[] {
  return (settings.providers ?? []).map((provider, index) => writerFor(provider, index, environment));
}

function writerFor(
  provider: StatusProvider,
  index: number,
  environment: StatusEnvironment,
  where = label(provider, index),
): StatusWriter {
  const clock = environment.now ? { now: environment.now } : {};
  const fetcher = environment.fetch ? { fetch: environment.fetch } : {};
  switch (provider.type) {
    case "gitnotes":
      if (!environment.gitnotes)
        throw new EnvironmentError(`${where} writes into the fleet repository, and this command has none`);
      return new GitNotesStatusWriter({ ...environment.gitnotes, ...clock });
    case "github": {
      const { owner, repo } = ownerRepo(provider, where);
      const baseUrl = provider.url ? { baseUrl: githubApiBase(provider.url) } : {};
      const base = { owner, repo, ...baseUrl, ...clock, ...fetcher };
      if (provider.appId === undefined) {
        const token = secretFrom(
          environment.env,
          provider.tokenEnv ?? DEFAULT_TOKEN_ENV.github,
          "a token",
          where,
        );
        return new GithubStatusWriter({ ...base, auth: { token } });
      }
      if (provider.installationId === undefined || !provider.privateKeyEnv)
        throw new EnvironmentError(`${where} with appId needs installationId and privateKeyEnv`);
      const privateKey = secretFrom(environment.env, provider.privateKeyEnv, "the App's private key", where);
      const app = { appId: provider.appId, installationId: provider.installationId, privateKey };
      return new GithubStatusWriter({ ...base, auth: { app } });
    }
    case "gitlab": {
      if (!provider.project)
        throw new EnvironmentError(
          `${where} needs project (id or group/name) — add it to steward.yaml or pass --status-repo PROJECT`,
        );
      const token = secretFrom(
        environment.env,
        provider.tokenEnv ?? DEFAULT_TOKEN_ENV.gitlab,
        "a token",
        where,
      );
      const url = provider.url ? { url: provider.url } : {};
      return new GitlabStatusWriter({ project: provider.project, token, ...url, ...clock, ...fetcher });
    }
    case "gitea": {
      const { owner, repo } = ownerRepo(provider, where);
      if (!provider.url)
        throw new EnvironmentError(
          `${where} needs url (the Gitea or Forgejo instance) — add it or pass --status-url`,
        );
      const token = secretFrom(
        environment.env,
        provider.tokenEnv ?? DEFAULT_TOKEN_ENV.gitea,
        "a token",
        where,
      );
      return new GiteaStatusWriter({ owner, repo, url: provider.url, token, ...clock, ...fetcher });
    }
    default:
      throw new EnvironmentError(`${where}: unknown provider type "${String(provider.type)}"`);
  }
}

/**
 * GitHub's API base for a configured URL: api.github.com as given; a GitHub Enterprise host given
 * bare (`https://ghe.example.com`) gets `/api/v3`.
 */
export function githubApiBase(url: string): string {
  const parsed = new URL(url);
  const path = parsed.pathname.replace(/\/+$/, "");
  if (parsed.host === "api.github.com" || path !== "") return url.replace(/\/+$/, "");
  return `${parsed.origin}/api/v3`;
}
