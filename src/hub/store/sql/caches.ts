/**
 * What a store keeps in memory between units of work, to spare the database work a record already
 * in hand answers: parsed specs (many instances share one text) and the last
 * stored body of each observation (a report that repeats it rewrites nothing). The observation
 * caches are dropped whenever a unit of work rolls back, and per node whenever another writer may
 * have written the node's observations (a node's lease changed hands between hub replicas: only
 * the replica that owns a node records its reports, see hub/replicas/replica.ts).
 */

import * as crypto from "node:crypto";
import type { Observation } from "../../records.js";

/** A map that keeps at most `max` entries: past it, the one least recently read or written goes. */
export class Recent<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(private readonly max: number) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as K);
    this.entries.set(key, value);
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}

/**
 * Parsed JSON by its text, for the few texts many rows share: an assignment's spec is the same on
 * every node it renders alike, its rollout and budget on all of them. Memory is bounded by the
 * texts kept, not by instances or generations: past `max`, the one least recently read goes.
 */
export class ParsedJson {
  private readonly parsed: Recent<string, unknown>;

  constructor(max = 4_096) {
    this.parsed = new Recent(max);
  }

  parse(text: string): unknown {
    let value = this.parsed.get(text);
    if (value === undefined) {
      value = frozen(JSON.parse(text));
      this.parsed.set(text, value);
    }
    return value;
  }
}

/**
 * What the store compares a stored observation body by: 48 bits of its SHA-1, a number that a map
 * holds in 16 bytes where the body is hundreds (one per instance, for the life of the hub). A
 * collision (one in 2^48 changes) would only skip rewriting an observation that changed, until the
 * instance's next report; SHA-1's are made on purpose, and an agent gains nothing by one.
 */
export function bodyDigest(body: string): number {
  return sha1(body).readUIntBE(0, 6);
}

/**
 * SHA-1 of a text: the one-shot form where Node has it (20.12 and later), which makes no Hash object
 * per body — every report hashes each of its bodies.
 */
const sha1: (text: string) => Buffer =
  typeof crypto.hash === "function"
    ? (text) => crypto.hash("sha1", text, "buffer")
    : (text) => crypto.createHash("sha1").update(text).digest();

/** `value`, frozen all the way down: a reader that changed a shared value would change it for all. */
function frozen<T>(value: T): T {
  if (value !== null && typeof value === "object") {
    for (const member of Object.values(value)) frozen(member);
    Object.freeze(value);
  }
  return value;
}

export class StoreCaches {
  /** Desired instances' specs, rollouts and budgets (shared: never to be changed by a reader). */
  readonly specs = new ParsedJson();
  /**
   * By node, the assignments it has a stored observation of (read once per node, then kept), each
   * with the digest of its last stored body (-1 while not known): a report that repeats a body
   * rewrites nothing.
   */
  readonly observed = new Map<string, Map<string, number>>();
  /**
   * The observations read last, parsed: a rollout reads each instance's a few times in a short
   * while (dispatch, result, report), so the recent ones are what is read again. A few hundred
   * instances are in that short while at once; each entry holds a body (hundreds of bytes) twice,
   * as text and parsed, so 8,192 of them were 9 MiB of a 100,000-instance hub at rest, to spare a
   * JSON.parse of microseconds.
   */
  readonly parsedObservations = new Recent<
    string,
    { body: string; takenAt: string; observation: Observation }
  >(1_024);

  /** After a rollback: what was cached may be ahead of the database. */
  rolledBack(): void {
    this.observed.clear();
  }

  /** Another writer may have written `node`'s observations. */
  forgetNode(node: string): void {
    this.observed.delete(node);
  }
}
