/**
 * The flags of `steward hub` that configure the NATS transport, kept apart from the transport so the
 * CLI can declare them without loading the NATS client.
 */
import { resolve } from "node:path";
import type { NatsTransportOptions } from "./hub.js";

/** Commander option specs and help for `steward hub`. */
export const NATS_HUB_FLAGS = [
  ["--nats <url>", "also reach nodes declared `transport: nats` over this NATS server"],
  ["--nats-creds <file>", "with --nats: the hub's credentials (from `steward nats config`)"],
  ["--nats-tls-ca <file>", "with --nats: CA that signed the server's certificate"],
  ["--nats-tls-cert <file>", "with --nats: client certificate, when the server verifies clients"],
  ["--nats-tls-key <file>", "with --nats: the client certificate's key"],
] as const;

/** The values of NATS_HUB_FLAGS as commander hands them over. */
export interface NatsHubFlags {
  nats?: string;
  natsCreds?: string;
  natsTlsCa?: string;
  natsTlsCert?: string;
  natsTlsKey?: string;
}

/** Options for `createNatsTransport` from the hub's flags (files resolved from `cwd`); undefined without --nats. */
export function natsOptionsFromFlags(flags: NatsHubFlags, cwd: string): NatsTransportOptions | undefined {
  if (!flags.nats) return undefined;
  const file = (path: string | undefined) => (path ? resolve(cwd, path) : undefined);
  const tls = { ca: file(flags.natsTlsCa), cert: file(flags.natsTlsCert), key: file(flags.natsTlsKey) };
  return {
    servers: flags.nats,
    ...(flags.natsCreds ? { creds: resolve(cwd, flags.natsCreds) } : {}),
    ...(tls.ca || tls.cert || tls.key ? { tls } : {}),
  };
}
