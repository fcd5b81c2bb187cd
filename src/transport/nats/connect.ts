/**
 * Opening a NATS connection as one steward identity (the hub, a node, a task agent): credentials
 * from a file, an inbox prefix of its own (so a node's permissions can confine it to its own
 * replies), TLS passed through, and reconnecting forever — a steward process outlives server restarts.
 */
import { readFileSync, statSync } from "node:fs";
import {
  type Authenticator,
  connect,
  credsAuthenticator,
  errors,
  type NatsConnection,
  nkeyAuthenticator,
  type TlsOptions,
} from "@nats-io/transport-node";
import { EnvironmentError, UsageError } from "../../model/errors.js";
import { subjects } from "./subjects.js";

/** TLS files handed to the client as they are (`--tls-ca`, `--tls-cert`, `--tls-key`). */
export interface NatsTls {
  ca?: string;
  cert?: string;
  key?: string;
}

export interface NatsConnectOptions {
  /** One URL or several (a cluster), e.g. `nats://127.0.0.1:4222`. */
  servers: string | string[];
  /**
   * Credentials file: an nkey seed (`SU...`, as `steward nats config` writes) or a `.creds` file
   * (user JWT and seed, for operator-mode servers). Absent: connect without authentication.
   */
  creds?: string;
  /** Who connects: `hub`, a node name, a task agent's name. Names the connection and its inbox prefix. */
  identity: string;
  tls?: NatsTls;
  /** Keep retrying until the server first answers (an agent started before its server); default false. */
  waitOnFirstConnect?: boolean;
  /**
   * Retry the first connection while the server cannot be reached (down, restarting, not yet up),
   * calling this before each retry; credentials the server refuses still fail at once. For a hub,
   * whose start must not depend on the moment its server restarts.
   */
  onWaitingForServer?: (error: Error, attempt: number, retryInMs: number) => void;
  /** Milliseconds between reconnect attempts; default 500. */
  reconnectTimeWaitMs?: number;
}

/** Reads a credentials file into an authenticator; a missing or malformed file is a one-line error. */
export function credentialsAuthenticator(file: string): Authenticator {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new EnvironmentError(
      `cannot read NATS credentials ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)} — pass the file \`steward nats config\` wrote for this identity`,
      { cause: error },
    );
  }
  const mode = statSync(file).mode & 0o077;
  if (mode !== 0)
    throw new EnvironmentError(
      `NATS credentials ${file} are readable by others (mode ${(statSync(file).mode & 0o777).toString(8)}): run \`chmod 600 ${file}\``,
    );
  if (text.includes("-----BEGIN NATS USER JWT-----"))
    return credsAuthenticator(new TextEncoder().encode(text));
  const seed = text.trim();
  if (!/^SU[A-Z2-7]{56}$/.test(seed))
    throw new UsageError(
      `NATS credentials ${file} hold neither a user nkey seed (SU...) nor a .creds file — regenerate them with \`steward nats config\``,
    );
  return nkeyAuthenticator(new TextEncoder().encode(seed));
}

/** The client's TLS options for the given files; undefined when none is given. */
export function tlsOptions(tls: NatsTls | undefined): TlsOptions | undefined {
  if (!tls || (!tls.ca && !tls.cert && !tls.key)) return undefined;
  if (Boolean(tls.cert) !== Boolean(tls.key))
    throw new UsageError("--tls-cert and --tls-key go together: give both or neither");
  return {
    ...(tls.ca ? { caFile: tls.ca } : {}),
    ...(tls.cert ? { certFile: tls.cert } : {}),
    ...(tls.key ? { keyFile: tls.key } : {}),
  };
}

/**
 * Connects as `identity`. Rejects with EnvironmentError when the server cannot be reached or refuses
 * the credentials (unless `waitOnFirstConnect`); afterwards the connection reconnects forever.
 */
export function connectNats(options: NatsConnectOptions): Promise<NatsConnection> {
  const waiting = options.onWaitingForServer;
  return waiting ? untilServerAnswers(() => connectOnce(options), waiting) : connectOnce(options);
}

async function connectOnce(options: NatsConnectOptions): Promise<NatsConnection> {
  const authenticator = options.creds ? credentialsAuthenticator(options.creds) : undefined;
  const tls = tlsOptions(options.tls);
  try {
    return await connect({
      servers: options.servers,
      name: `steward-${options.identity}`,
      inboxPrefix: subjects.inboxPrefix(options.identity),
      maxReconnectAttempts: -1,
      reconnectTimeWait: options.reconnectTimeWaitMs ?? 500,
      waitOnFirstConnect: options.waitOnFirstConnect ?? false,
      // Capturing a stack for every request (each JetStream publish is one) costs more than the
      // request itself under load; our errors say what failed without it.
      noAsyncTraces: true,
      ...(authenticator ? { authenticator } : {}),
      ...(tls ? { tls } : {}),
    });
  } catch (error) {
    const servers = Array.isArray(options.servers) ? options.servers.join(",") : options.servers;
    throw new EnvironmentError(
      `cannot connect to NATS at ${servers} as ${options.identity}: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/** Socket errors that say the server is not there (yet): down, restarting, or a network in between. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);

/**
 * True when connecting failed because the server could not be reached — worth waiting for — rather
 * than because it refused us (credentials, TLS, permissions), which waiting does not mend.
 */
export function serverUnreachable(error: unknown): boolean {
  let current: unknown = error;
  while (current instanceof Error) {
    if (current instanceof errors.TimeoutError) return true;
    // JetStream answers a moment after the server does: no responders on $JS.API for now.
    if (current instanceof errors.NoRespondersError) return true;
    if (UNREACHABLE.has((current as NodeJS.ErrnoException).code ?? "")) return true;
    if (/disconnect/i.test(current.message)) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Runs `step` (idempotent: a request to the server) until it succeeds, waiting between tries while
 * the server is away (restarting, JetStream not ready yet) and telling `onWaiting`; any other
 * failure is thrown at once.
 */
export async function untilServerAnswers<T>(
  step: () => Promise<T>,
  onWaiting: (error: Error, attempt: number, retryInMs: number) => void,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (error) {
      if (!serverUnreachable(error)) throw error;
      const retryInMs = Math.min(5_000, 250 * 2 ** Math.min(attempt - 1, 5));
      onWaiting(error as Error, attempt, retryInMs);
      await new Promise((resolve) => setTimeout(resolve, retryInMs));
    }
  }
}

/** True when `error` or an error in its `cause` chain is a `type`. */
export function causedBy(error: unknown, type: abstract new (...args: never[]) => Error): boolean {
  let current: unknown = error;
  while (current instanceof Error) {
    if (current instanceof type) return true;
    current = (current as Error).cause;
  }
  return false;
}
