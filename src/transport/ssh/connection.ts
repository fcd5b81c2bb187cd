/**
 * One SSH connection to a node, optionally through a jump host (OpenSSH's ProxyJump): key
 * authentication (a key file, ssh-agent, or both), host keys checked against what we hold before any
 * credential is sent, and every failure before a command runs turned into a DispatchError whose class
 * says whether retrying can help.
 */
import type { Readable } from "node:stream";
import { Client, type ClientChannel, type ConnectConfig, type SFTPWrapper } from "ssh2";
import { DispatchError } from "../../hub/transport.js";
import {
  checkHostKey,
  fingerprint,
  type HostKeyVerdict,
  hostKeyAlgorithms,
  type KnownHostsFile,
  type KnownKeys,
  knownHostsName,
  type PublicKey,
  parsePublicKey,
  publicKeyFromBlob,
} from "./hostkeys.js";

/** Where to connect: one hop. */
export interface SshEndpoint {
  host: string;
  port: number;
  user: string;
  /** Pinned key (`type base64`) from the Node document; known_hosts is consulted when absent. */
  hostKey?: string;
}

/** How the hub proves who it is. At least one must be present. */
export interface SshCredentials {
  /** Contents of a private key file (OpenSSH or PEM, unencrypted). */
  privateKey?: Buffer;
  /** Path of an ssh-agent socket (`SSH_AUTH_SOCK`). */
  agentSocket?: string;
}

/** How host keys are judged. */
export interface HostKeyPolicy {
  knownHosts: KnownHostsFile;
  /** Accept an unknown key once and record it in `knownHosts`. Off unless the operator asks. */
  trustOnFirstUse: boolean;
  /** Told about every key accepted on first use (for logs); the key is already recorded. */
  onTrustedFirstUse?: (endpoint: SshEndpoint, key: PublicKey, node: string) => void;
}

export interface ConnectOptions {
  credentials: SshCredentials;
  hostKeys: HostKeyPolicy;
  /** Per hop: TCP connect, handshake and authentication together. */
  timeoutMs: number;
  /** The node's name, for messages and the first-use record. */
  node: string;
  /** Gives up connecting when it aborts (the per-host timeout, or the transport stopping). */
  signal?: AbortSignal;
}

/** What a remote command did. */
export interface ExecOutcome {
  /** Exit status; null when the command ended by a signal or the session dropped first. */
  code: number | null;
  signal?: string;
  stdout: Buffer;
  /** The last 16 KiB of standard error. */
  stderr: string;
  /** The connection went away before the command's exit status arrived. */
  dropped: boolean;
  /** Standard output passed `maxStdoutBytes` and was cut. */
  truncated: boolean;
}

export interface ExecOptions {
  /** Written to standard input, which is then closed. */
  stdin?: string | Buffer;
  /** Sees standard error as it arrives (the launcher's "started" line). */
  onStderr?: (text: string) => void;
  maxStdoutBytes?: number;
}

const STDERR_TAIL = 16 * 1024;

/** An open connection; `close` ends it and any hop it went through. */
export class SshConnection {
  private closedFlag = false;

  constructor(
    private readonly client: Client,
    private readonly hops: readonly Client[],
    /** `user@host:port` (and `via` the jump host), for messages. */
    readonly label: string,
    /** The host key each hop presented and we trusted: the jump host's first, then the target's. */
    readonly hostKeys: readonly PublicKey[] = [],
  ) {
    client.once("close", () => {
      this.closedFlag = true;
    });
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Runs `command` through the login shell and collects its output until it exits or the session drops. */
  exec(command: string, options: ExecOptions = {}): Promise<ExecOutcome> {
    const maxStdout = options.maxStdoutBytes ?? 64 * 1024 * 1024;
    return new Promise((resolve, reject) => {
      this.client.exec(command, (error: Error | undefined, channel: ClientChannel) => {
        if (error) {
          reject(error);
          return;
        }
        const stdout: Buffer[] = [];
        let stdoutBytes = 0;
        let truncated = false;
        let stderr = "";
        let exit: { code: number | null; signal?: string } | undefined;
        channel.on("data", (chunk: Buffer) => {
          if (stdoutBytes + chunk.length > maxStdout) {
            truncated = true;
            return;
          }
          stdout.push(chunk);
          stdoutBytes += chunk.length;
        });
        channel.stderr.setEncoding("utf8");
        channel.stderr.on("data", (text: string) => {
          stderr = (stderr + text).slice(-STDERR_TAIL);
          options.onStderr?.(text);
        });
        channel.on("exit", (code: number | null, signal?: string) => {
          exit = signal ? { code: null, signal } : { code };
        });
        channel.on("close", () => {
          resolve({
            code: exit?.code ?? null,
            ...(exit?.signal ? { signal: exit.signal } : {}),
            stdout: Buffer.concat(stdout),
            stderr,
            dropped: exit === undefined,
            truncated,
          });
        });
        // A write after the far end went away raises EPIPE-like errors; the close above reports it.
        channel.on("error", () => {});
        if (options.stdin !== undefined) channel.end(options.stdin);
        else channel.end();
      });
    });
  }

  /** Opens the SFTP subsystem. */
  sftp(): Promise<SFTPWrapper> {
    return new Promise((resolve, reject) => {
      this.client.sftp((error, sftp) => (error ? reject(error) : resolve(sftp)));
    });
  }

  /** Ends the connection at once (and the jump host's); pending commands see a dropped session. */
  close(): void {
    this.client.destroy();
    for (const hop of this.hops) hop.destroy();
  }
}

function describe(endpoint: SshEndpoint): string {
  return `${endpoint.user}@${endpoint.host}:${endpoint.port}`;
}

function knownKeysFor(
  endpoint: SshEndpoint,
  options: Pick<ConnectOptions, "hostKeys" | "node">,
  field: string,
): KnownKeys {
  if (endpoint.hostKey) {
    const key = parsePublicKey(endpoint.hostKey);
    // The schema's pattern normally prevents this; a pin we cannot read must never mean "anything goes".
    if (!key)
      throw new DispatchError(
        `node "${options.node}": ${field} is not a public key (expected "ssh-ed25519 AAAA...") — fix the Node document`,
        "permanent",
        "HostKeyInvalid",
      );
    return { trusted: [key], revoked: [], source: field };
  }
  return options.hostKeys.knownHosts.keysFor(endpoint.host, endpoint.port);
}

/**
 * Connects to `target`, through `jump` when given. Rejects with a DispatchError: `transient` for
 * what may heal by itself (refused, timed out, unreachable, reset), `permanent` for what will not
 * until someone acts (unknown, changed or revoked host key; authentication refused).
 */
export async function connect(
  target: SshEndpoint,
  jump: SshEndpoint | undefined,
  options: ConnectOptions,
): Promise<SshConnection> {
  if (!jump) {
    const { client, key } = await connectHop(target, undefined, options, "spec.ssh.hostKey", "");
    return new SshConnection(client, [], describe(target), [key]);
  }
  const { client: bastion, key: bastionKey } = await connectHop(
    jump,
    undefined,
    options,
    "spec.ssh.jump.hostKey",
    "jump host ",
  );
  try {
    const stream = await new Promise<ClientChannel>((resolve, reject) => {
      bastion.forwardOut("127.0.0.1", 0, target.host, target.port, (error, channel) =>
        error ? reject(error) : resolve(channel),
      );
    });
    const via = ` via jump host ${describe(jump)}`;
    const { client, key } = await connectHop(target, stream, options, "spec.ssh.hostKey", "", via);
    return new SshConnection(client, [bastion], `${describe(target)}${via}`, [bastionKey, key]);
  } catch (error) {
    bastion.destroy();
    if (error instanceof DispatchError) throw error;
    throw new DispatchError(
      `node "${options.node}": jump host ${describe(jump)} could not reach ${target.host}:${target.port} (${errorText(error)}) — check that the host is up and that the jump host may forward to it`,
      "transient",
      "JumpForwardFailed",
      { cause: error },
    );
  }
}

/**
 * Whether an open connection may carry another job: every hop's key is still one we hold now (the
 * Node's pin as declared now, or known_hosts as it reads now). A kept connection was trusted when it
 * was made; a key no longer pinned must not be trusted for one more job.
 */
export function stillTrusted(
  connection: SshConnection,
  target: SshEndpoint,
  jump: SshEndpoint | undefined,
  options: Pick<ConnectOptions, "hostKeys" | "node">,
): boolean {
  const hops: [SshEndpoint, string][] = jump
    ? [
        [jump, "spec.ssh.jump.hostKey"],
        [target, "spec.ssh.hostKey"],
      ]
    : [[target, "spec.ssh.hostKey"]];
  if (connection.hostKeys.length !== hops.length) return false;
  return hops.every(([endpoint, field], i) => {
    try {
      const known = knownKeysFor(endpoint, options, field);
      return checkHostKey(connection.hostKeys[i]!, known).kind === "trusted";
    } catch {
      return false;
    }
  });
}

function connectHop(
  endpoint: SshEndpoint,
  sock: Readable | undefined,
  options: ConnectOptions,
  pinField: string,
  role: string,
  via = "",
): Promise<{ client: Client; key: PublicKey }> {
  const known = knownKeysFor(endpoint, options, pinField);
  let presented: PublicKey | undefined;
  let verdict: HostKeyVerdict | undefined;
  const config: ConnectConfig = {
    host: endpoint.host,
    port: endpoint.port,
    username: endpoint.user,
    readyTimeout: options.timeoutMs,
    // A kept connection whose host went away is noticed and closed instead of hanging the next job.
    keepaliveInterval: 15_000,
    keepaliveCountMax: 3,
    // Ask for a key of a type we hold, so a host with several keys presents the pinned one.
    ...(known.trusted.length > 0
      ? { algorithms: { serverHostKey: hostKeyAlgorithms(known.trusted) as never } }
      : {}),
    hostVerifier: (blob: Buffer) => {
      presented = publicKeyFromBlob(blob);
      verdict = checkHostKey(presented, known);
      if (verdict.kind === "unknown" && options.hostKeys.trustOnFirstUse && !endpoint.hostKey) {
        options.hostKeys.knownHosts.record(
          endpoint.host,
          endpoint.port,
          presented,
          `steward-tofu node=${options.node} at=${new Date().toISOString()}`,
        );
        options.hostKeys.onTrustedFirstUse?.(endpoint, presented, options.node);
        verdict = { kind: "trusted" };
      }
      return verdict.kind === "trusted";
    },
  };
  if (options.credentials.privateKey) config.privateKey = options.credentials.privateKey;
  if (options.credentials.agentSocket) config.agent = options.credentials.agentSocket;
  if (sock) config.sock = sock;
  return new Promise((resolve, reject) => {
    const client = new Client();
    let settled = false;
    const signal = options.signal;
    const onAbort = () => {
      if (settled) return;
      settled = true;
      client.destroy();
      const stopping = String(signal?.reason).includes("stopping");
      reject(
        new DispatchError(
          stopping
            ? `node "${options.node}": stopped connecting to ${role}${describe(endpoint)}${via}: the SSH transport is stopping`
            : `node "${options.node}": ${role}${describe(endpoint)}${via} did not complete the connection within the per-host timeout — retrying`,
          "transient",
          stopping ? "TransportStopped" : "ConnectTimeout",
        ),
      );
    };
    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    client.once("ready", () => {
      signal?.removeEventListener("abort", onAbort);
      if (settled) {
        client.destroy();
        return;
      }
      settled = true;
      // Ready only after hostVerifier accepted the key it was shown.
      resolve({ client, key: presented! });
    });
    client.on("error", (error: Error & { level?: string; code?: string }) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      client.destroy();
      reject(classifyConnectError(error, { endpoint, known, presented, verdict, options, role, via }));
    });
    client.once("close", () => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      reject(
        new DispatchError(
          `node "${options.node}": ${role}${describe(endpoint)}${via} closed the connection before it was ready — retrying`,
          "transient",
          "ConnectionClosed",
        ),
      );
    });
    try {
      client.connect(config);
    } catch (error) {
      settled = true;
      reject(
        new DispatchError(
          `node "${options.node}": cannot connect to ${role}${describe(endpoint)}: ${errorText(error)}`,
          "permanent",
          "ConnectConfigInvalid",
          { cause: error },
        ),
      );
    }
  });
}

interface FailureContext {
  endpoint: SshEndpoint;
  known: KnownKeys;
  presented: PublicKey | undefined;
  verdict: HostKeyVerdict | undefined;
  options: ConnectOptions;
  role: string;
  via: string;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Turns an ssh2 connect error into the DispatchError the hub acts on. */
function classifyConnectError(
  error: Error & { level?: string; code?: string },
  c: FailureContext,
): DispatchError {
  const where = `${c.role}${describe(c.endpoint)}${c.via}`;
  const subject = `node "${c.options.node}": ${where}`;
  const name = knownHostsName(c.endpoint.host, c.endpoint.port);
  const fail = (message: string, failureClass: DispatchError["failureClass"], reason: string) =>
    new DispatchError(`${subject} ${message}`, failureClass, reason, { cause: error });
  if (c.verdict && c.verdict.kind !== "trusted" && c.presented) {
    const got = `${c.presented.type} ${fingerprint(c.presented)}`;
    if (c.verdict.kind === "unknown")
      return fail(
        `presented an unknown host key (${got}); refusing to connect — pin it in the Node's ${c.role ? "spec.ssh.jump.hostKey" : "spec.ssh.hostKey"} or add "${name} ${c.presented.type} ${c.presented.base64}" to ${c.known.source} after checking it out of band (or run the hub with --ssh-tofu to trust and record first-seen keys)`,
        "permanent",
        "HostKeyUnknown",
      );
    if (c.verdict.kind === "revoked")
      return fail(
        `presented a revoked host key (${got}, revoked in ${c.known.source}); refusing to connect`,
        "permanent",
        "HostKeyRevoked",
      );
    const expected = c.verdict.expected.map((key) => `${key.type} ${fingerprint(key)}`).join(", ");
    return fail(
      `presented host key ${got}, but ${c.known.source} pins ${expected}; refusing to connect — if the host was re-installed, verify the new key out of band and update ${c.known.source}`,
      "permanent",
      "HostKeyChanged",
    );
  }
  if (/no matching host key format/.test(error.message) && c.known.trusted.length > 0) {
    const expected = c.known.trusted.map((key) => key.type).join(", ");
    return fail(
      `offers no host key of the pinned type (${expected} in ${c.known.source}); refusing to connect — the host's keys changed: verify them out of band and update ${c.known.source}`,
      "permanent",
      "HostKeyChanged",
    );
  }
  if (error.level === "client-authentication")
    return fail(
      `refused our credentials for user "${c.endpoint.user}" (${error.message}) — authorise the hub's public key for that user, or give the hub the right key with --ssh-key or ssh-agent`,
      "permanent",
      "AuthFailed",
    );
  if (error.level === "agent")
    return fail(
      `could not use ssh-agent: ${error.message} — check SSH_AUTH_SOCK`,
      "transient",
      "AgentUnavailable",
    );
  if (error.level === "client-timeout")
    return fail(`did not answer within ${c.options.timeoutMs} ms — retrying`, "transient", "ConnectTimeout");
  switch (error.code) {
    case "ECONNREFUSED":
      return fail(
        "refused the connection (is sshd running on that port?) — retrying",
        "transient",
        "ConnectionRefused",
      );
    case "ETIMEDOUT":
      return fail("timed out — retrying", "transient", "ConnectTimeout");
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return fail("is unreachable — retrying", "transient", "HostUnreachable");
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return fail(`has a name that does not resolve (${error.code}) — retrying`, "transient", "HostNotFound");
    case "ECONNRESET":
    case "EPIPE":
      return fail("reset the connection — retrying", "transient", "ConnectionReset");
  }
  if (error.level === "handshake" || error.level === "protocol")
    return fail(`handshake failed: ${error.message}`, "permanent", "HandshakeFailed");
  return fail(`connection failed: ${error.message} — retrying`, "transient", "ConnectFailed");
}
