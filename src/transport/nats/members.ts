/**
 * The servers a `steward nats config` writes configurations for: one (`nats-server.conf`), or a
 * cluster of N on consecutive ports of one host (`nats-1.conf`..`nats-N.conf`), each with its own
 * `server_name`, client and route ports, JetStream store and account resolver directory, and routes
 * to the others. Pure: addresses in, servers out.
 */
import { join } from "node:path";
import { UsageError } from "../../model/errors.js";

/** The name of the cluster the servers form (`cluster { name }`). */
export const CLUSTER_NAME = "steward";

/** What sets one server of the configuration apart from the others. */
export interface ServerMember {
  /** `server_name`: unique within a cluster (JetStream requires it). */
  name: string;
  /** Its configuration file, relative to the output directory. */
  file: string;
  /** host:port clients connect to. */
  listen: string;
  /** Absolute JetStream store directory. */
  storeDir: string;
  /** Absolute directory of its account resolver (operator mode; each server keeps its own). */
  resolverDir: string;
  /** Absent on a single server. */
  cluster?: { name: string; listen: string; routes: string[] };
}

export interface ServerMembersInput {
  /** Absolute output directory. */
  dir: string;
  /** host:port of the (first) server; default `127.0.0.1:4222`. */
  listen?: string;
  /** Absolute JetStream store directory (a cluster's servers get one each below it). */
  storeDir?: string;
  /** How many servers; absent or 1: a single server, unchanged from before clusters. */
  cluster?: number;
  /** host:port of the first server's routes; default the listen host, port 6222. */
  clusterListen?: string;
}

const HOST_PORT = /^([^\s:]+):(\d{1,5})$/;

function hostPort(value: string, flag: string, example: string): { host: string; port: number } {
  const match = HOST_PORT.exec(value);
  const port = Number(match?.[2]);
  if (!match || port < 1 || port > 65_535)
    throw new UsageError(`${flag} ${value} must be host:port, e.g. ${example}`);
  return { host: match[1]!, port };
}

/**
 * The servers to configure. Throws UsageError on a bad address, a cluster of fewer than 3 (JetStream
 * needs a majority of its servers: 2 cannot lose one) or ports that would run past 65535 or collide.
 */
export function serverMembers(input: ServerMembersInput): ServerMember[] {
  const listen = input.listen ?? "127.0.0.1:4222";
  const client = hostPort(listen, "--listen", "0.0.0.0:4222");
  const storeBase = input.storeDir ?? join(input.dir, "jetstream");
  const resolverBase = join(input.dir, "jwt");
  const size = input.cluster ?? 1;
  if (size === 1 && input.clusterListen === undefined)
    return [
      { name: "steward", file: "nats-server.conf", listen, storeDir: storeBase, resolverDir: resolverBase },
    ];
  if (!Number.isInteger(size) || size < 3 || size > 9)
    throw new UsageError(
      `--cluster ${input.cluster} must be a whole number from 3 to 9: JetStream keeps a stream while a majority of its servers is up, so fewer than 3 cannot lose one`,
    );
  const routes = hostPort(input.clusterListen ?? `${client.host}:6222`, "--cluster-listen", "0.0.0.0:6222");
  if (client.port + size - 1 > 65_535 || routes.port + size - 1 > 65_535)
    throw new UsageError(`--listen and --cluster-listen need ${size} consecutive ports each below 65536`);
  const overlaps = Math.abs(client.port - routes.port) < size && client.host === routes.host;
  if (overlaps)
    throw new UsageError(
      `--listen ${listen} and --cluster-listen ${routes.host}:${routes.port} overlap: ${size} servers take ${size} consecutive ports from each`,
    );
  const routeOf = (index: number) => `nats-route://${routes.host}:${routes.port + index}`;
  return Array.from({ length: size }, (_, index) => ({
    name: `steward-${index + 1}`,
    file: `nats-${index + 1}.conf`,
    listen: `${client.host}:${client.port + index}`,
    storeDir: join(storeBase, `nats-${index + 1}`),
    resolverDir: join(resolverBase, `nats-${index + 1}`),
    cluster: {
      name: CLUSTER_NAME,
      listen: `${routes.host}:${routes.port + index}`,
      routes: Array.from({ length: size }, (_, other) => other)
        .filter((other) => other !== index)
        .map(routeOf),
    },
  }));
}

/** The lines of a server's `cluster` block (none on a single server). */
export function clusterBlock(member: ServerMember): string[] {
  if (!member.cluster) return [];
  return [
    "cluster {",
    `  name: ${JSON.stringify(member.cluster.name)}`,
    `  listen: ${JSON.stringify(member.cluster.listen)}`,
    `  routes: [${member.cluster.routes.map((route) => JSON.stringify(route)).join(", ")}]`,
    "}",
  ];
}
