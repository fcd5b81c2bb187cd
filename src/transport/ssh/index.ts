/**
 * Entry of the SSH transport: `createSshTransport(options)` builds the adapter from the hub's flags
 * (`--ssh-key`, `--ssh-known-hosts`, `--ssh-concurrency`, `--ssh-tofu`) and checks them at once, so a
 * wrong key path is one clear line at start-up rather than a failure on the first dispatch.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import ssh2 from "ssh2";
import { EnvironmentError, UsageError } from "../../model/errors.js";
import { defaultAgentFile } from "./artifact.js";
import type { SshEndpoint } from "./connection.js";
import { SSH_DEFAULTS } from "./flags.js";
import { fingerprint, KnownHostsFile, type PublicKey } from "./hostkeys.js";
import { type SshLogger, type SshProgress, SshTransport } from "./transport.js";

export { type AgentArtifact, AgentArtifactError, loadAgentArtifact } from "./artifact.js";
export { SSH_DEFAULTS, SSH_HUB_FLAGS, type SshHubFlags, sshOptionsFromFlags } from "./flags.js";
export { KnownHostsFile } from "./hostkeys.js";
export { ObservationScheduler, type ObservationSchedulerOptions } from "./observer.js";
export { endpointsOf, type SshLogger, type SshProgress, SshTransport } from "./transport.js";

/** What the hub passes in; every field is optional. */
export interface SshTransportOptions {
  /** Private key file (`--ssh-key FILE`). Unencrypted; load encrypted keys into ssh-agent instead. */
  keyFile?: string;
  /** ssh-agent socket; default `SSH_AUTH_SOCK` from `env`. `null` turns the agent off. */
  agentSocket?: string | null;
  /** known_hosts file for hosts whose Node pins no key (`--ssh-known-hosts FILE`); default `~/.ssh/known_hosts`. */
  knownHostsFile?: string;
  /** Accept and record unknown host keys (`--ssh-tofu`). Off by default: unknown keys are refused. */
  trustOnFirstUse?: boolean;
  /** Hosts worked on at once (`--ssh-concurrency N`); default 16. */
  concurrency?: number;
  /** Per hop: connect, handshake and authentication; default 10 s. */
  connectTimeoutMs?: number;
  /** Per host for one job (connect, upload, run); default 10 min. Past it, a started attempt is lost. */
  hostTimeoutMs?: number;
  /** How long `stop()` lets running jobs finish; default 10 s. */
  stopGraceMs?: number;
  /** How long a node's connection stays open after a job, for the next one (like ControlPersist); default 60 s, 0: never kept. */
  idleMs?: number;
  /** The single-file agent to upload; default `dist/steward-agent.mjs` of this package. */
  agentFile?: string;
  /** Called as each host finishes a job. */
  onProgress?: (progress: SshProgress) => void;
  /** Told about keys accepted on first use (they are recorded in the known_hosts file too). */
  onTrustedFirstUse?: (endpoint: SshEndpoint, key: PublicKey, node: string) => void;
  logger?: SshLogger;
  now?: () => Date;
  /** Environment for `SSH_AUTH_SOCK` and `HOME`; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Builds the SSH transport. Throws UsageError for a bad number and EnvironmentError for a key file
 * that cannot be read or used, naming the flag and the fix.
 */
export function createSshTransport(options: SshTransportOptions = {}): SshTransport {
  const env = options.env ?? process.env;
  const concurrency = options.concurrency ?? SSH_DEFAULTS.concurrency;
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new UsageError(`--ssh-concurrency must be a whole number >= 1 (got ${concurrency})`);
  for (const [flag, value] of [
    ["connect timeout", options.connectTimeoutMs],
    ["host timeout", options.hostTimeoutMs],
  ] as const)
    if (value !== undefined && !(value > 0))
      throw new UsageError(`the SSH ${flag} must be positive (got ${value})`);
  let privateKey: Buffer | undefined;
  if (options.keyFile) {
    try {
      privateKey = readFileSync(options.keyFile);
    } catch (error) {
      throw new EnvironmentError(
        `--ssh-key ${options.keyFile}: cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)}) — give the path of the hub's private key`,
        { cause: error },
      );
    }
    const parsed = ssh2.utils.parseKey(privateKey);
    if (parsed instanceof Error)
      throw new EnvironmentError(
        /encrypted|passphrase/i.test(parsed.message)
          ? `--ssh-key ${options.keyFile}: the key is encrypted — load it into ssh-agent (ssh-add) and start the hub with SSH_AUTH_SOCK set instead`
          : `--ssh-key ${options.keyFile}: not a private key ssh2 can read (${parsed.message}) — give an OpenSSH or PEM private key`,
        { cause: parsed },
      );
  }
  const agentSocket = options.agentSocket === null ? undefined : (options.agentSocket ?? env.SSH_AUTH_SOCK);
  const knownHosts = new KnownHostsFile(
    options.knownHostsFile ?? join(env.HOME ?? homedir(), ".ssh", "known_hosts"),
  );
  return new SshTransport({
    credentials: {
      ...(privateKey ? { privateKey } : {}),
      ...(agentSocket ? { agentSocket } : {}),
    },
    hostKeys: {
      knownHosts,
      trustOnFirstUse: options.trustOnFirstUse ?? false,
      // A key trusted on first use is recorded in the file and said out loud in the log.
      onTrustedFirstUse: (endpoint, key, node) => {
        options.logger?.warn(
          {
            node,
            host: endpoint.host,
            port: endpoint.port,
            key: `${key.type} ${fingerprint(key)}`,
            file: knownHosts.path,
          },
          "trusted an unknown host key on first use (--ssh-tofu) and recorded it",
        );
        options.onTrustedFirstUse?.(endpoint, key, node);
      },
    },
    concurrency,
    connectTimeoutMs: options.connectTimeoutMs ?? SSH_DEFAULTS.connectTimeoutMs,
    hostTimeoutMs: options.hostTimeoutMs ?? SSH_DEFAULTS.hostTimeoutMs,
    stopGraceMs: options.stopGraceMs ?? SSH_DEFAULTS.stopGraceMs,
    idleMs: options.idleMs ?? SSH_DEFAULTS.idleMs,
    agentFile: options.agentFile ?? defaultAgentFile(),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    now: options.now ?? (() => new Date()),
  });
}
