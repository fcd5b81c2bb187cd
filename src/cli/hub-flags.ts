/**
 * The flags of `steward hub`, checked all at once before the hub touches anything: an address it
 * could not listen on, a duration it could not parse, a file that is not there, a transport it
 * could not reach with what it was given, or a directory that is no fleet repository is one line
 * (exit 2) before the first sync, the database or an SSH connection. Each check says the flag, what
 * it got and what would do.
 */
import { existsSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { resolve } from "node:path";
import { FLEET_FILE } from "../model/documents.js";
import { formatDuration, parseDuration } from "../model/duration.js";
import { EnvironmentError, UsageError } from "../model/errors.js";
import { checkFleetRepository, FLEET_DIRECTORIES, type FleetRepositoryCheck } from "../repo/fleet-check.js";
import { checkStatusFlags, type StatusFlags } from "../status/settings.js";
import { type NatsHubFlags, natsOptionsFromFlags } from "../transport/nats/flags.js";
import type { NatsTransportOptions } from "../transport/nats/hub.js";
import { type SshHubFlags, sshOptionsFromFlags } from "../transport/ssh/flags.js";
import type { SshTransportOptions } from "../transport/ssh/index.js";

/** The values of `steward hub`'s flags as commander hands them over. */
export interface HubFlags extends StatusFlags, SshHubFlags, NatsHubFlags {
  /** Absent: the working directory, which must then be a fleet repository. */
  repo?: string;
  branch: string;
  root?: string;
  listen: string;
  syncInterval: string;
  webhookSecretEnv?: string;
  lease: string;
  /** How long a hub replica's leases on its nodes last without renewal (several hubs on PostgreSQL). */
  replicaLease: string;
  /** Who may act in the web view: a file of `name token` lines (see src/hub/web/operators.ts). */
  operatorTokens?: string;
}

/** What the flags say, checked and resolved. */
export interface HubSettings {
  /** The fleet repository: an absolute path or an http(s) URL. */
  repo: string;
  branch: string;
  /** Absolute. */
  root?: string;
  listen: { host: string; port: number };
  syncIntervalMs: number;
  leaseMs: number;
  replicaLeaseMs: number;
  webhookSecret?: string;
  /** The SSH transport's options (its key is read when the transport is made). */
  ssh: SshTransportOptions;
  /** The NATS transport's options, with --nats. */
  nats?: NatsTransportOptions;
  /** With --nats-issuer: the hub's signing keys, to admit enrolled hosts and revoke removed ones. */
  natsIssuer?: import("../transport/nats/operator.js").NatsIssuer;
}

/** The directory the hub was started in is not a fleet repository (and no --repo was given). */
export class NotAFleetRepositoryError extends EnvironmentError {
  override readonly name = "NotAFleetRepositoryError";
  constructor(check: Extract<FleetRepositoryCheck, { ok: false }>, flag: string) {
    super(notAFleetMessage(check, flag), {
      code: "E_NOT_FLEET_REPOSITORY",
      data: { dir: check.dir, reason: check.reason },
    });
  }
}

function notAFleetMessage(check: Extract<FleetRepositoryCheck, { ok: false }>, flag: string): string {
  const where = flag === "." ? `this directory (${check.dir})` : `--repo ${check.dir}`;
  switch (check.reason) {
    case "missing":
      return `${where} does not exist: give the path of a clone of the fleet repository`;
    case "not-a-directory":
      return `${where} is not a directory: give the path of a clone of the fleet repository`;
    case "not-git":
      return `${where} is not a git repository: run steward hub in a clone of the fleet repository, or pass --repo PATH|URL`;
    case "not-top":
      return `${where} is inside the git repository ${check.top}, not its top: run steward hub there, or pass --repo ${check.top}`;
    case "no-documents":
      return `${where} is not a fleet repository: it has no ${FLEET_FILE}, and no ${FLEET_DIRECTORIES.map((d) => `${d}/`).join(" or ")} with steward documents (apiVersion: steward.dev/v1). Run steward hub in your fleet repository or pass --repo PATH|URL; \`steward up\` makes an example fleet to start from`;
  }
}

/** `HOST:PORT`, `[IPv6]:PORT` or `PORT` as host and port; a UsageError naming `flag` otherwise. */
export function listenAddress(flag: string, text: string): { host: string; port: number } {
  const match = /^(?:(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+):)?([0-9]{1,5})$/.exec(text.trim());
  const port = Number(match?.[2]);
  if (!match || port > 65535)
    throw new UsageError(`${flag} ${JSON.stringify(text)} is not host:port (e.g. 127.0.0.1:7117)`);
  return { host: match[1]?.replace(/^\[(.*)\]$/, "$1") ?? "127.0.0.1", port };
}

/** Why listening on `host:port` would fail, said as the fix; undefined when it would work. */
export async function listenProblem(host: string, port: number): Promise<string | undefined> {
  const server = createServer();
  try {
    await new Promise<void>((resolveListen, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolveListen());
    });
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE")
      return "the address is in use by another process: stop it, or pass another --listen (port 0 takes any free one)";
    if (code === "EACCES") return "this user may not listen on that port: use a port above 1023";
    if (code === "EADDRNOTAVAIL")
      return "no interface of this machine has that address: use 127.0.0.1 or one it has";
    if (code === "ENOTFOUND" || code === "EAI_AGAIN")
      return "that host name does not resolve: give an IP address";
    return `cannot listen there (${code ?? (error as Error).message})`;
  } finally {
    await new Promise((done) => server.close(() => done(undefined)));
  }
}

/** A duration flag of at least `minMs`; a UsageError naming the flag otherwise. */
export function durationAtLeast(flag: string, value: string, minMs: number): number {
  let ms: number;
  try {
    ms = parseDuration(value.trim());
  } catch {
    throw new UsageError(`${flag} ${JSON.stringify(value)} is not a duration: write e.g. 30s, 5m or 1h`);
  }
  if (ms < minMs)
    throw new UsageError(
      `${flag} ${JSON.stringify(value)} is too short: give at least ${formatDuration(minMs)}`,
    );
  return ms;
}

/** Throws unless `path` (as given in `flag`) is a readable file. */
export function assertFile(flag: string, given: string, path: string, fix: string): void {
  if (!existsSync(path)) throw new EnvironmentError(`${flag} ${given}: no such file — ${fix}`);
  if (!statSync(path).isFile()) throw new EnvironmentError(`${flag} ${given}: not a file — ${fix}`);
}

/** The URL shapes nats.js takes: `nats://`, `tls://`, `ws(s)://` with a host, or `host:port`. */
const NATS_SERVER =
  /^(?:(?:nats|tls|wss?):\/\/(?:[^\s/@]+@)?[^\s/:@]+(?::[0-9]{1,5})?\/?|[^\s/:@]+:[0-9]{1,5})$/;

/**
 * The NATS transport's options from the flags, checked: the server URLs, the files they name, the
 * credentials readable and well-formed. Undefined without --nats (a NATS flag without it is an error).
 */
export async function natsSettings(
  flags: NatsHubFlags,
  cwd: string,
): Promise<NatsTransportOptions | undefined> {
  const options = natsOptionsFromFlags(flags, cwd);
  if (options === undefined || flags.nats === undefined) return undefined;
  for (const server of flags.nats.split(",")) {
    if (!NATS_SERVER.test(server.trim()))
      throw new UsageError(
        `--nats ${JSON.stringify(flags.nats)} is not a NATS server URL (e.g. nats://127.0.0.1:4222; several separated by commas)`,
      );
    if (/^(?:nats|tls|wss?):\/\/[^\s/]*@/.test(server.trim()))
      throw new UsageError(
        "--nats must not carry credentials: pass the hub's credentials file with --nats-creds FILE",
      );
  }
  for (const [flag, value, what] of [
    ["--nats-tls-ca", flags.natsTlsCa, "the CA certificate that signed the server's"],
    ["--nats-tls-cert", flags.natsTlsCert, "the hub's client certificate"],
    ["--nats-tls-key", flags.natsTlsKey, "the client certificate's key"],
  ] as const)
    if (value !== undefined) assertFile(flag, value, resolve(cwd, value), `give the path of ${what}`);
  if (Boolean(flags.natsTlsCert) !== Boolean(flags.natsTlsKey))
    throw new UsageError("--nats-tls-cert and --nats-tls-key go together: give both or neither");
  if (options.creds !== undefined) {
    const { credentialsAuthenticator } = await import("../transport/nats/connect.js");
    credentialsAuthenticator(options.creds);
  }
  return options;
}

/** Throws unless `branch` exists in the local repository at `dir`, listing the ones that do. */
async function assertBranch(dir: string, branch: string): Promise<void> {
  const { FleetRepository } = await import("../repo/git.js");
  const repository = FleetRepository.open({ kind: "path", path: dir });
  try {
    await repository.fetch(branch);
  } catch {
    const git = (await import("isomorphic-git")).default;
    const fs = await import("node:fs");
    const branches = await git.listBranches({ fs, gitdir: repository.gitdir }).catch(() => []);
    throw new UsageError(
      branches.length === 0
        ? `--branch ${branch}: ${dir} has no commits yet: commit the fleet first (git commit), then start the hub`
        : `--branch ${branch}: ${dir} has no such branch (it has ${branches.join(", ")}): pass --branch ${branches[0]}, or push ${branch}`,
    );
  } finally {
    repository.close();
  }
}

/**
 * Checks every flag of `steward hub` and resolves them; throws the first problem as a one-line
 * UsageError or EnvironmentError (exit 2). Reads files and binds the listen address for a moment;
 * writes nothing.
 */
export async function hubSettings(
  flags: HubFlags,
  context: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<HubSettings> {
  const listen = listenAddress("--listen", flags.listen);
  const syncIntervalMs = durationAtLeast("--sync-interval", flags.syncInterval, 1_000);
  const leaseMs = durationAtLeast("--lease", flags.lease, 1_000);
  const replicaLeaseMs = durationAtLeast("--replica-lease", flags.replicaLease, 1_000);
  const root = flags.root === undefined ? undefined : resolve(context.cwd, flags.root);
  if (root && existsSync(root) && !statSync(root).isDirectory())
    throw new EnvironmentError(
      `--root ${flags.root} is not a directory: give the directory local nodes apply under`,
    );
  let webhookSecret: string | undefined;
  if (flags.webhookSecretEnv !== undefined) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(flags.webhookSecretEnv))
      throw new UsageError(
        `--webhook-secret-env takes the NAME of an environment variable (got ${JSON.stringify(flags.webhookSecretEnv)}), never the secret itself`,
      );
    webhookSecret = context.env[flags.webhookSecretEnv];
    if (!webhookSecret)
      throw new UsageError(
        `--webhook-secret-env ${flags.webhookSecretEnv}: that variable is not set: export it with the webhook's secret`,
      );
  }
  if (flags.sshKnownHosts !== undefined && !flags.sshTofu) {
    const file = resolve(context.cwd, flags.sshKnownHosts);
    if (!existsSync(file))
      throw new EnvironmentError(
        `--ssh-known-hosts ${flags.sshKnownHosts}: no such file — give an existing known_hosts file, or add --ssh-tofu to record keys in it on first use`,
      );
  }
  if (flags.sshKey !== undefined)
    assertFile(
      "--ssh-key",
      flags.sshKey,
      resolve(context.cwd, flags.sshKey),
      "give the path of the hub's private key",
    );
  const ssh = sshOptionsFromFlags(flags, context.cwd, context.env);
  const nats = await natsSettings(flags, context.cwd);
  if (flags.natsIssuer !== undefined && !nats)
    throw new UsageError("--nats-issuer only applies with --nats URL: add --nats, or leave it out");
  const natsIssuer =
    flags.natsIssuer !== undefined
      ? (await import("../transport/nats/operator.js")).readNatsIssuer(resolve(context.cwd, flags.natsIssuer))
      : undefined;
  checkStatusFlags(flags, context.env);

  const given = flags.repo ?? ".";
  let repo: string;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(given)) {
    const { parseLocation, describeLocation } = await import("../repo/git.js");
    repo = describeLocation(parseLocation(given, context.cwd));
  } else {
    repo = resolve(context.cwd, given);
    const check = checkFleetRepository(repo);
    // An explicit --repo may be a fleet still to be written; the working directory has to be one.
    if (!check.ok && (flags.repo === undefined || check.reason !== "no-documents"))
      throw new NotAFleetRepositoryError(check, flags.repo === undefined ? "." : given);
    await assertBranch(repo, flags.branch);
  }
  const problem = await listenProblem(listen.host, listen.port);
  if (problem) throw new UsageError(`--listen ${flags.listen}: ${problem}`);
  return {
    repo,
    branch: flags.branch,
    ...(root ? { root } : {}),
    listen,
    syncIntervalMs,
    leaseMs,
    replicaLeaseMs,
    ...(webhookSecret ? { webhookSecret } : {}),
    ssh,
    ...(nats ? { nats } : {}),
    ...(natsIssuer ? { natsIssuer } : {}),
  };
}
