/**
 * The fleet's nodes fall into a fixed number of shards, a node's shard a hash of its name. Hub
 * replicas divide the shards between them (hub/replicas/replica.ts), and what agents send back on
 * the bus carries the shard in its subject (transport/nats/subjects.ts), so each replica consumes
 * only its own shards' reports and results. Part of the wire protocol: agents and hubs must agree.
 */
import { createHash } from "node:crypto";

/** Enough to balance a few dozen replicas, few enough to renew and consume at once. */
export const SHARDS = 64;

/** Shards of the names seen, up to a fleet's worth: every report and result asks for its node's. */
const known = new Map<string, number>();
const MAX_KNOWN = 1 << 17;

/** The shard of node `name`. */
export function shardOf(name: string): number {
  let shard = known.get(name);
  if (shard === undefined) {
    shard = createHash("sha1").update(name).digest().readUInt32BE(0) % SHARDS;
    if (known.size >= MAX_KNOWN) known.clear();
    known.set(name, shard);
  }
  return shard;
}

/** Every shard, 0 … SHARDS − 1. */
export function everyShard(): ReadonlySet<number> {
  return new Set(Array.from({ length: SHARDS }, (_, shard) => shard));
}
