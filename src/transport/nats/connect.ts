/**
 * Opening a NATS connection as one steward identity (the hub, a node, a task agent): credentials
 * from a file (read and checked by `readNatsCredentials`, which also tells whose they say they are), an inbox prefix of its own (so a node's permissions can confine it to its own
 * replies), TLS passed through, and reconnecting forever — a steward process outlives server restarts.
 */
import { readFileSync, statSync } from "node:fs";
import { JetStreamApiError } from "@nats-io/jetstream";
import { fromSeed } from "@nats-io/nkeys";
import {
  type Authenticator,
  AuthorizationError,
  connect,
  credsAuthenticator,
  errors,
  type NatsConnection,
  nkeyAuthenticator,
  type TlsOptions,
} from "@nats-io/transport-node";
import { EnvironmentError, UsageError } from "../../model/errors.js";
import { credentialsOwner, credentialsPath } from "./config.js";
import { identities, subjects } from "./subjects.js";

/** TLS files handed to the client as they are (`--tls-ca`, `--tls-cert`, `--tls-key`). */
export interface NatsTls {
  ca?: string;
  cert?: string;
  key?: string;
}

export interface NatsConnectOptions {
  /**
   * One URL or several (a cluster): a list, or one string with commas as `--nats` takes it
   * (`nats://10.0.0.1:4222,nats://10.0.0.2:4222`).
   */
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
  /** Credentials already read (`readNatsCredentials`); wins over `creds`. */
  credentials?: NatsCredentials;
  /** How a refusal names who connects; default `identityLabel(identity)`. */
  label?: NatsIdentityLabel;
}

const USER_SEED = /^SU[A-Z2-7]{56}$/;

/** A credentials file, read and checked: how to authenticate, and whose it says it is. */
export interface NatsCredentials {
  file: string;
  authenticator: Authenticator;
  /** The user's public key (`U...`): what the server knows it by. */
  publicKey: string;
  /**
   * Whose the file says it is, when it says: `node "edge-2"`, `the hub`, ... — from the first line
   * `steward nats config` writes, or the name in a `.creds` file's user JWT.
   */
  owner?: string;
  /**
   * What a refusal of these credentials means, when not what it means for a file `steward nats
   * config` wrote (a key the server does not know yet): e.g. credentials the hub issued and revoked.
   */
  refusal?: string;
}

/** The claims of a user JWT (not verified: the server does that), for its name and subject. */
function jwtClaims(text: string): { name?: string; sub?: string } {
  const jwt = /-----BEGIN NATS USER JWT-----\s*([^\s-]+)\s*------END NATS USER JWT------/.exec(text)?.[1];
  try {
    return JSON.parse(Buffer.from(jwt?.split(".")[1] ?? "", "base64url").toString("utf8"));
  } catch {
    return {};
  }
}

/**
 * Reads credentials for `flag` (`--creds`: an nkey seed as `steward nats config` writes, or a
 * `.creds` file with a user JWT; `--nkey`: a seed only, as the nats CLI takes it). A file that is
 * missing, readable by others or neither is a one-line error naming the fix.
 */
export function readNatsCredentials(file: string, flag = "--creds"): NatsCredentials {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new EnvironmentError(
      flag === "--token-file"
        ? `cannot read --token-file ${file}: ${code} — pass a copy of the enrolment credential \`steward nats config\` wrote (credentials/enrol.creds)`
        : `cannot read NATS credentials ${file}: ${code} — pass the file \`steward nats config\` wrote for this identity`,
      { cause: error },
    );
  }
  const mode = statSync(file).mode & 0o077;
  if (mode !== 0)
    throw new EnvironmentError(
      `NATS credentials ${file} are readable by others (mode ${(statSync(file).mode & 0o777).toString(8)}): run \`chmod 600 ${file}\``,
    );
  if (text.includes("-----BEGIN NATS USER JWT-----")) {
    if (flag === "--nkey")
      throw new UsageError(
        `--nkey ${file} is a .creds file (a user JWT and its seed), not an nkey seed: pass it with --creds`,
      );
    const claims = jwtClaims(text);
    const owner = credentialsOwner(text) ?? (claims.name ? `user "${claims.name}"` : undefined);
    return {
      file,
      authenticator: credsAuthenticator(new TextEncoder().encode(text)),
      publicKey: claims.sub ?? "unknown",
      ...(owner ? { owner } : {}),
    };
  }
  const seed = text
    .split("\n")
    .map((line) => line.trim())
    .find((line) => line !== "" && !line.startsWith("#"));
  let publicKey: string | undefined;
  try {
    if (seed && USER_SEED.test(seed)) publicKey = fromSeed(new TextEncoder().encode(seed)).getPublicKey();
  } catch {
    // A seed whose checksum is wrong: said below like any other text that is no seed.
  }
  if (!seed || !publicKey)
    throw new UsageError(
      flag === "--nkey"
        ? `--nkey ${file} holds no user nkey seed (SU...): give the seed file \`steward nats config\` wrote (credentials/nodes/NODE.nk)`
        : `NATS credentials ${file} hold neither a user nkey seed (SU...) nor a .creds file — regenerate them with \`steward nats config\``,
    );
  const owner = credentialsOwner(text);
  return {
    file,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
    publicKey,
    ...(owner ? { owner } : {}),
  };
}

/** Reads a credentials file into an authenticator (see `readNatsCredentials`). */
export function credentialsAuthenticator(file: string): Authenticator {
  return readNatsCredentials(file).authenticator;
}

/**
 * The server refused to let an identity connect (`Authorization Violation`): no credentials where
 * it wants some, or a key it does not know. Exit 2; the message says whose credentials, for whom,
 * and what to do.
 */
export class NatsAuthorizationError extends EnvironmentError {
  override readonly name = "NatsAuthorizationError";
  constructor(message: string, data: Record<string, unknown>, cause?: unknown) {
    super(message, { code: "E_NATS_AUTHORIZATION", data, cause });
  }
}

/** `key` shortened for a message: enough to tell keys apart, not a line of its own. */
export function shortKey(key: string): string {
  return key.length > 16 ? `${key.slice(0, 12)}…` : key;
}

/** Who connects, as a message says it, and the flag that gives its credentials. */
export interface NatsIdentityLabel {
  /** `node "edge-2"`, `the hub`. */
  who: string;
  /** `--creds FILE or --nkey FILE`, `--nats-creds FILE`. */
  flag: string;
  /** Where `steward nats config` writes its credentials, relative to its output directory. */
  file: string;
}

/** How refusals name `identity` (see `identities`) and the flag and file of its credentials. */
export function identityLabel(identity: string): NatsIdentityLabel {
  if (identity === identities.hub)
    return { who: "the hub", flag: "--nats-creds FILE", file: credentialsPath("hub", "hub") };
  if (identity === identities.viewer)
    return { who: "the viewer", flag: "--nats-creds FILE", file: credentialsPath("viewer", "viewer") };
  const node = /^node_(.+)$/.exec(identity)?.[1];
  if (node)
    return {
      who: `node "${node}"`,
      flag: "--creds FILE or --nkey FILE",
      file: credentialsPath("node", node),
    };
  const agent = /^task_(.+)$/.exec(identity)?.[1] ?? identity;
  return { who: `task agent "${agent}"`, flag: "credentials", file: credentialsPath("task-agent", agent) };
}

/** `who`'s own credentials, and where `steward nats config` puts them. */
export function ownCredentials(label: NatsIdentityLabel): string {
  return `${label.who}'s own credentials (\`steward nats config\` writes them as ${label.file})`;
}

/**
 * The credentials are another identity's: the server lets them in but refuses this identity's own
 * subjects to them. Exit 2: nothing this process does with them can work.
 */
export class NatsWrongCredentialsError extends EnvironmentError {
  override readonly name = "NatsWrongCredentialsError";
  constructor(message: string, data: Record<string, unknown>, cause?: unknown) {
    super(message, { code: "E_NATS_WRONG_CREDENTIALS", data, cause });
  }
}

/** What NatsWrongCredentialsError says: whose the credentials are, for whom they were used, the fix. */
export function wrongCredentials(
  label: NatsIdentityLabel,
  credentials: NatsCredentials | undefined,
  refusal: string,
): NatsWrongCredentialsError {
  const data = {
    who: label.who,
    ...(credentials ? { file: credentials.file, owner: credentials.owner } : {}),
  };
  const own = ownCredentials(label);
  if (!credentials)
    return new NatsWrongCredentialsError(
      `the NATS server let ${label.who} in without credentials but refuses its subjects to it (${refusal}): pass ${label.flag} with ${own}`,
      data,
    );
  const whose = credentials.owner
    ? `are ${credentials.owner}'s, not ${label.who}'s`
    : `(public key ${shortKey(credentials.publicKey)}) are not ${label.who}'s`;
  const otherNode = label.who.startsWith("node ")
    ? /^node "(.+)"$/.exec(credentials.owner ?? "")?.[1]
    : undefined;
  return new NatsWrongCredentialsError(
    `the credentials ${credentials.file} ${whose}: the NATS server refuses ${label.who}'s subjects to them (${refusal}) — pass ${own}${otherNode ? `, or run this agent as --node ${otherNode}` : ""}`,
    data,
  );
}

/**
 * Resolves once the server lets `nc` subscribe to `subject`; rejects with the server's refusal.
 * One round trip: the server answers a refused subscription before it answers the flush.
 */
export async function subscribeRefusal(nc: NatsConnection, subject: string): Promise<Error | undefined> {
  let refused: Error | undefined;
  const subscription = nc.subscribe(subject, {
    callback: (error) => {
      if (error) refused = error;
    },
  });
  await nc.flush();
  if (!refused) subscription.unsubscribe();
  return refused;
}

function authorizationMessage(
  servers: string,
  label: NatsIdentityLabel,
  credentials: NatsCredentials | undefined,
  reason: string,
): string {
  // In operator mode a node has no file of its own to pass: it asks the hub, which issues them.
  const ask = label.who.startsWith("node ")
    ? "; on an operator-mode server, pass --token-file FILE (the enrolment credential) for the hub to issue them"
    : "";
  if (!credentials)
    return `the NATS server at ${servers} refused ${label.who} without credentials (${reason}): pass ${label.flag} with ${ownCredentials(label)}${ask}`;
  const whose = credentials.owner ? `${credentials.owner}'s, ` : "";
  if (credentials.refusal)
    return `the NATS server at ${servers} refused the credentials ${credentials.file} (${whose}public key ${shortKey(credentials.publicKey)}) for ${label.who} (${reason}): ${credentials.refusal}`;
  return `the NATS server at ${servers} refused the credentials ${credentials.file} (${whose}public key ${shortKey(credentials.publicKey)}) for ${label.who} (${reason}): it does not know this key — pass ${ownCredentials(label)}; after \`steward nats config\` added a key, reload the server (nats-server --signal reload)`;
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
 * Connects as `identity`. Rejects with NatsAuthorizationError when the server refuses the
 * credentials (or their absence), NatsWrongCredentialsError when they are another identity's (it
 * refuses this identity's inbox to them), EnvironmentError when the server cannot be reached
 * (unless `waitOnFirstConnect`); afterwards the connection reconnects forever.
 */
export function connectNats(options: NatsConnectOptions): Promise<NatsConnection> {
  const waiting = options.onWaitingForServer;
  return waiting ? untilServerAnswers(() => connectOnce(options), waiting) : connectOnce(options);
}

/** The URLs of `servers`: a comma-separated string split (nats.js would take it as one URL). */
export function serverList(servers: string | string[]): string[] {
  return (Array.isArray(servers) ? servers : servers.split(","))
    .map((server) => server.trim())
    .filter((server) => server !== "");
}

async function connectOnce(options: NatsConnectOptions): Promise<NatsConnection> {
  const credentials = options.credentials ?? (options.creds ? readNatsCredentials(options.creds) : undefined);
  const authenticator = credentials?.authenticator;
  const tls = tlsOptions(options.tls);
  const label = options.label ?? identityLabel(options.identity);
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: serverList(options.servers),
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
    if (error instanceof AuthorizationError) {
      throw new NatsAuthorizationError(
        authorizationMessage(servers, label, credentials, error.message),
        { servers, identity: options.identity, ...(credentials ? { file: credentials.file } : {}) },
        error,
      );
    }
    throw new EnvironmentError(
      `cannot connect to NATS at ${servers} as ${options.identity}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  // Every identity may listen on its own inbox: credentials refused that are another identity's.
  let refused: Error | undefined;
  try {
    refused = await subscribeRefusal(nc, `${subjects.inboxPrefix(options.identity)}.steward-check`);
  } catch (error) {
    // The check itself failed (the server went away meanwhile): no connection is left behind.
    await nc.close().catch(() => undefined);
    throw error;
  }
  if (refused) {
    await nc.close().catch(() => undefined);
    throw wrongCredentials(label, credentials, refused.message);
  }
  return nc;
}

/** How long JetStream may stay silent after a server (re)start before it is taken to be off. */
const JETSTREAM_GRACE_MS = 30_000;

/** "JetStream system temporarily unavailable". */
const JETSTREAM_UNAVAILABLE = 10_008;

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
    // A cluster electing a leader (a server died, a stream changed its replicas) answers 10008.
    if (current instanceof JetStreamApiError && current.code === JETSTREAM_UNAVAILABLE) return true;
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
  jetStreamGraceMs = JETSTREAM_GRACE_MS,
): Promise<T> {
  let jetStreamSilentSince: number | undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (error) {
      if (!serverUnreachable(error)) throw error;
      // A server that answers while JetStream never does was started without it: waiting is no cure.
      if (causedBy(error, errors.NoRespondersError) && !causedBy(error, errors.TimeoutError)) {
        jetStreamSilentSince ??= Date.now();
        if (Date.now() - jetStreamSilentSince > jetStreamGraceMs)
          throw new EnvironmentError(
            `the NATS server answers, but JetStream does not (no responders for $JS.API for ${Math.round(jetStreamGraceMs / 1000)}s): start nats-server with -js, or give its configuration a jetstream {} block`,
            { cause: error },
          );
      } else jetStreamSilentSince = undefined;
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
