/**
 * The agent's configuration file (`/etc/steward/agent.json`, written by `steward agent install`,
 * read by `steward agent --config FILE`): the same settings as the long-running agent's flags, so a
 * service's command line stays one path. Flags given as well win over the file. Holds no secret: the
 * enrolment credential is a file of its own (`tokenFile`), readable by root only.
 */
import { readFileSync } from "node:fs";
import { arch, hostname, release, type } from "node:os";
import { resolve } from "node:path";
import { UsageError } from "../model/errors.js";

/** What the file holds; `nats` and `node` are required. */
export interface AgentConfig {
  nats: string;
  node: string;
  /** The state directory (absolute). */
  state?: string;
  /** The shared enrolment credential, to ask for this host's credentials when it has none. */
  tokenFile?: string;
  /** Labels to ask for when enrolling. */
  labels?: Record<string, string>;
  /** Credentials given instead of enrolment (a seed or .creds file). */
  creds?: string;
  tls?: { ca?: string; cert?: string; key?: string };
  heartbeat?: string;
  root?: string;
}

const KEYS: readonly (keyof AgentConfig)[] = [
  "nats",
  "node",
  "state",
  "tokenFile",
  "labels",
  "creds",
  "tls",
  "heartbeat",
  "root",
];

/** The agent configuration in `file`, checked: a one-line error naming the field and the fix. */
export function readAgentConfig(file: string): AgentConfig {
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(
      code
        ? `cannot read --config ${file}: ${code} — give the agent.json \`steward agent install\` wrote`
        : `--config ${file} is not JSON: ${(error as Error).message}`,
    );
  }
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw new UsageError(`--config ${file} must hold a JSON object (nats, node, state, ...)`);
  for (const key of Object.keys(value))
    if (!KEYS.includes(key as keyof AgentConfig))
      throw new UsageError(`--config ${file}: unknown setting "${key}" (known: ${KEYS.join(", ")})`);
  for (const key of ["nats", "node"] as const)
    if (typeof value[key] !== "string" || value[key] === "")
      throw new UsageError(`--config ${file}: "${key}" is required (a string)`);
  for (const key of ["state", "tokenFile", "creds", "heartbeat", "root"] as const)
    if (value[key] !== undefined && typeof value[key] !== "string")
      throw new UsageError(`--config ${file}: "${key}" must be a string`);
  const labels = value.labels;
  if (
    labels !== undefined &&
    (typeof labels !== "object" ||
      labels === null ||
      Object.values(labels as Record<string, unknown>).some((v) => typeof v !== "string"))
  )
    throw new UsageError(`--config ${file}: "labels" must map names to strings`);
  return value as unknown as AgentConfig;
}

/** `--labels k=v,k2=v2` as a map; a malformed pair is a usage error. */
export function parseLabels(text: string | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  if (!text) return labels;
  for (const pair of text.split(",")) {
    const [key, value, ...rest] = pair.split("=");
    if (!key || value === undefined || rest.length > 0 || value === "")
      throw new UsageError(`--labels ${text}: "${pair}" is not key=value (e.g. --labels role=web,zone=eu)`);
    labels[key.trim()] = value.trim();
  }
  return labels;
}

/** What this host says of itself when it asks to join. */
export function hostFacts(agentVersion: string): {
  hostname: string;
  os: string;
  arch: string;
  agentVersion: string;
} {
  let os = `${type()} ${release()}`;
  try {
    const pretty = /^PRETTY_NAME="?([^"\n]+)"?$/m.exec(readFileSync("/etc/os-release", "utf8"))?.[1];
    if (pretty) os = `${pretty}, ${os}`;
  } catch {
    // No os-release (not Linux, a minimal image): the kernel's name says enough.
  }
  return { hostname: hostname(), os, arch: arch(), agentVersion };
}

/** The TLS files of `--tls-ca`, `--tls-cert` and `--tls-key`, resolved from `cwd` (only those given). */
export function tlsFlags(
  flags: { tlsCa?: string; tlsCert?: string; tlsKey?: string },
  cwd: string,
): { ca?: string; cert?: string; key?: string } {
  const tls: { ca?: string; cert?: string; key?: string } = {};
  if (flags.tlsCa) tls.ca = resolve(cwd, flags.tlsCa);
  if (flags.tlsCert) tls.cert = resolve(cwd, flags.tlsCert);
  if (flags.tlsKey) tls.key = resolve(cwd, flags.tlsKey);
  return tls;
}
