/**
 * The NATS flags of `steward hub` (the hub's transport) and `steward status` (a viewer watching the
 * open conditions), kept apart from the transport so the CLI can declare them without loading the
 * NATS client. Both take the same connection flags; only what they are for differs.
 */
import { resolve } from "node:path";
import { UsageError } from "../../model/errors.js";
import type { NatsTls } from "./connect.js";
import type { NatsTransportOptions } from "./hub.js";

const TLS_FLAGS = [
  ["--nats-tls-ca <file>", "with --nats: CA that signed the server's certificate"],
  ["--nats-tls-cert <file>", "with --nats: client certificate, when the server verifies clients"],
  ["--nats-tls-key <file>", "with --nats: the client certificate's key"],
] as const;

/** Commander option specs and help for `steward hub`. */
export const NATS_HUB_FLAGS = [
  ["--nats <url>", "also reach nodes declared `transport: nats` over this NATS server"],
  ["--nats-creds <file>", "with --nats: the hub's credentials (from `steward nats config`)"],
  [
    "--nats-issuer <file>",
    "with --nats, for an operator-mode server: the hub's signing keys (credentials/hub-issuer.json from `steward nats config`), so it admits hosts enrolled in Git and revokes those removed",
  ],
  [
    "--nats-replicas <n>",
    "with --nats: copies JetStream keeps of steward's streams and buckets (default 3 on a cluster, 1 on a single server)",
  ],
  ...TLS_FLAGS,
] as const;

/** Commander option specs and help for `steward status`. */
export const NATS_VIEWER_FLAGS = [
  [
    "--nats <url>",
    "read the open conditions from this NATS server (KV steward-conditions), not the local hub",
  ],
  [
    "--nats-creds <file>",
    "with --nats: a viewer's credentials (credentials/viewer.nk from `steward nats config`)",
  ],
  ...TLS_FLAGS,
] as const;

/** The values of NATS_HUB_FLAGS (or NATS_VIEWER_FLAGS) as commander hands them over. */
export interface NatsHubFlags {
  nats?: string;
  natsCreds?: string;
  /** `steward hub` only: the issuer file of an operator-mode server. */
  natsIssuer?: string;
  /** `steward hub` only: replicas of the streams and buckets. */
  natsReplicas?: string;
  natsTlsCa?: string;
  natsTlsCert?: string;
  natsTlsKey?: string;
}

/**
 * Where and how to connect, from the flags (files resolved from `cwd`); undefined without --nats.
 * A credentials or TLS flag without --nats is a usage error: it would be silently ignored.
 */
export function natsConnectionFromFlags(
  flags: NatsHubFlags,
  cwd: string,
): { servers: string; creds?: string; tls?: NatsTls } | undefined {
  if (!flags.nats) {
    const stray = (
      [
        ["--nats-creds", flags.natsCreds],
        ["--nats-tls-ca", flags.natsTlsCa],
        ["--nats-tls-cert", flags.natsTlsCert],
        ["--nats-tls-key", flags.natsTlsKey],
      ] as const
    ).find(([, value]) => value !== undefined);
    if (stray) throw new UsageError(`${stray[0]} only applies with --nats URL: add --nats, or leave it out`);
    return undefined;
  }
  const file = (path: string | undefined) => (path ? resolve(cwd, path) : undefined);
  const tls = { ca: file(flags.natsTlsCa), cert: file(flags.natsTlsCert), key: file(flags.natsTlsKey) };
  return {
    servers: flags.nats,
    ...(flags.natsCreds ? { creds: resolve(cwd, flags.natsCreds) } : {}),
    ...(tls.ca || tls.cert || tls.key ? { tls } : {}),
  };
}

/** Options for `createNatsTransport` from the hub's flags; undefined without --nats. */
export function natsOptionsFromFlags(flags: NatsHubFlags, cwd: string): NatsTransportOptions | undefined {
  const connection = natsConnectionFromFlags(flags, cwd);
  if (flags.natsReplicas === undefined) return connection;
  if (!connection)
    throw new UsageError("--nats-replicas only applies with --nats URL: add --nats, or leave it out");
  if (!/^[1-5]$/.test(flags.natsReplicas))
    throw new UsageError(
      `--nats-replicas ${flags.natsReplicas} must be a number of copies from 1 to 5 (JetStream's limit), e.g. 3 on a three-server cluster`,
    );
  return { ...connection, replicas: Number(flags.natsReplicas) };
}
