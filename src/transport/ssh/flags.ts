/**
 * The flags of `steward hub` that configure the SSH transport, kept apart from the transport so the
 * CLI can declare them without loading ssh2.
 */
import { resolve } from "node:path";
import { UsageError } from "../../model/errors.js";
import type { SshTransportOptions } from "./index.js";

/** Defaults: 16 hosts at once, 10 s to connect, 10 min per host for one job, connections kept 60 s. */
export const SSH_DEFAULTS = {
  concurrency: 16,
  connectTimeoutMs: 10_000,
  hostTimeoutMs: 10 * 60_000,
  stopGraceMs: 10_000,
  idleMs: 60_000,
} as const;

/** The flags of `steward hub` that configure this transport: commander option specs and help. */
export const SSH_HUB_FLAGS = [
  ["--ssh-key <file>", "private key for SSH nodes (default: the keys of ssh-agent at SSH_AUTH_SOCK)"],
  [
    "--ssh-known-hosts <file>",
    "known_hosts for SSH nodes that pin no spec.ssh.hostKey (default: ~/.ssh/known_hosts)",
  ],
  ["--ssh-concurrency <n>", `SSH hosts worked on at once (default: ${SSH_DEFAULTS.concurrency})`],
  ["--ssh-tofu", "trust an unknown SSH host key on first use and record it in the known_hosts file"],
] as const;

/** The values of SSH_HUB_FLAGS as commander hands them over. */
export interface SshHubFlags {
  sshKey?: string;
  sshKnownHosts?: string;
  sshConcurrency?: string;
  sshTofu?: boolean;
}

/**
 * Turns the hub's SSH flags into options for `createSshTransport` (paths resolved from `cwd`).
 * Throws UsageError for a concurrency that is not a whole number >= 1.
 */
export function sshOptionsFromFlags(
  flags: SshHubFlags,
  cwd: string,
  env: NodeJS.ProcessEnv,
): SshTransportOptions {
  const options: SshTransportOptions = { env, trustOnFirstUse: flags.sshTofu === true };
  if (flags.sshKey) options.keyFile = resolve(cwd, flags.sshKey);
  if (flags.sshKnownHosts) options.knownHostsFile = resolve(cwd, flags.sshKnownHosts);
  if (flags.sshConcurrency !== undefined) {
    if (!/^[1-9][0-9]*$/.test(flags.sshConcurrency.trim()))
      throw new UsageError(
        `--ssh-concurrency must be a whole number >= 1 (got ${JSON.stringify(flags.sshConcurrency)})`,
      );
    options.concurrency = Number(flags.sshConcurrency);
  }
  return options;
}
