/**
 * One hub replica among those sharing a store: every replica works, none idles. The nodes are
 * split into a fixed number of shards (a node's shard is a hash of its name); each shard is a lease
 * in the store (`shard:N`), and the live replicas divide the shards between them by rendezvous
 * hashing, so every replica computes the same division and a replica joining or leaving moves only
 * its share. A replica renews its leases every third of the replica lease; one that dies stops
 * renewing, and the survivors take its shards once the leases ran out — or at once where the store
 * sees its process die (a PostgreSQL session it kept open ended: Store.announce). One replica at a time holds
 * the `sync` lease: it syncs the repository and takes revisions in, so generations are numbered once.
 *
 * Every lease carries a fencing token that grows each time the lease changes hands. A unit of work
 * about a node's intents and attempts checks it in the store (`UnitOfWork.fence`), and a replica
 * also stops counting on its leases by its own clock once a renewal is overdue: a replica that was
 * paused or cut off past its lease writes nothing more for those nodes, and gives them up.
 */
import { createHash, randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { SHARDS, shardOf } from "../../model/shards.js";
import type { Clock } from "../clock.js";
import type { Fencing, Store } from "../store/store.js";

export const SYNC_LEASE = "sync";

/** How often a replica looks for replicas whose session ended (at most; a third of the lease if shorter). */
const GONE_CHECK_MS = 1_000;

const shardLease = (shard: number) => `shard:${shard}`;

/** Which live replica should hold `shard`: the highest score of rendezvous hashing. */
export function shardOwner(shard: number, replicas: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const id of replicas) {
    const score = createHash("sha1").update(`${id}\0${shard}`).digest().readUInt32BE(0);
    if (score > bestScore || (score === bestScore && best !== undefined && id < best)) {
      best = id;
      bestScore = score;
    }
  }
  return best;
}

/** A fresh replica id: the host, the process and a few random characters. */
export function newReplicaId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
}

export interface ReplicaOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  /** How long a lease lasts without renewal (`--replica-lease`); renewed every third of it. */
  leaseMs: number;
  id?: string;
  /** Where this replica's HTTP endpoints answer, for `steward get replicas`. */
  address?: string;
}

/** What changed in what a replica holds, told after the store says so. */
export interface LeaseChange {
  /** Shards taken, with who held each before (undefined: nobody, or this replica). */
  gained: { shard: number; from?: string }[];
  lost: number[];
  /** Whether the sync lease was taken (true) or lost (false) in this renewal; undefined: unchanged. */
  leader?: boolean;
}

/** The leases of one replica (see the module comment). */
export class Replica implements Fencing {
  readonly holder: string;
  private readonly held = new Map<number, number>();
  private syncToken: number | undefined;
  /** Until when (epoch ms, this clock) the leases count, as of the last renewal that succeeded. */
  private validUntil = 0;
  private readonly startedAt: string;
  private cancel: (() => void) | undefined;
  private cancelWatch: (() => void) | undefined;
  private ticking: Promise<void> | undefined;
  /**
   * The listeners' work on the changes so far, one change after another, beside the renewals:
   * taking over thousands of nodes takes longer than a lease, and a replica whose renewals waited
   * for it lost the very nodes it was taking over (and the other replica took them back, and so on).
   */
  private acting: Promise<void> = Promise.resolve();
  private stopped = false;
  private readonly listeners = new Set<(change: LeaseChange) => void | Promise<void>>();
  /** Nodes per shard, as last counted (for the replica row and /healthz). */
  private countNodes: (shards: ReadonlySet<number>) => Promise<number> = async () => 0;
  /** Fenced units of work (a lease lost while work was under way). */
  fenced = 0;
  /** Nodes in the held shards, as last counted (again when they change, and every tenth renewal). */
  private nodes = 0;
  private counted = "";
  private ticks = 0;

  private address: string | undefined;

  constructor(private readonly options: ReplicaOptions) {
    this.address = options.address;
    this.holder = options.id ?? newReplicaId();
    this.startedAt = options.clock.now().toISOString();
  }

  /** Where this replica's HTTP endpoints answer (said in its row from the next renewal). */
  serveAt(address: string): void {
    this.address = address;
  }

  /** Calls `listener` after each renewal that changed what this replica holds. */
  onChange(listener: (change: LeaseChange) => void | Promise<void>): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** How the replica row counts the nodes of its shards. */
  countNodesWith(count: (shards: ReadonlySet<number>) => Promise<number>): void {
    this.countNodes = count;
  }

  /** Whether the leases still count by this replica's own clock (a renewal is not overdue). */
  private valid(): boolean {
    return this.options.clock.now().getTime() < this.validUntil;
  }

  /** Whether this replica holds node `name`'s shard now. */
  owns(name: string): boolean {
    return this.valid() && this.held.has(shardOf(name));
  }

  /** Whether this replica holds the sync lease now. */
  get leader(): boolean {
    return this.valid() && this.syncToken !== undefined;
  }

  /** The shards held now. */
  get heldShards(): ReadonlySet<number> {
    return new Set(this.valid() ? this.held.keys() : []);
  }

  leasesFor(nodes: Iterable<string>): { name: string; token: number }[] | undefined {
    if (!this.valid()) return undefined;
    const leases = new Map<number, number>();
    for (const node of nodes) {
      const shard = shardOf(node);
      const token = this.held.get(shard);
      if (token === undefined) return undefined;
      leases.set(shard, token);
    }
    return [...leases].map(([shard, token]) => ({ name: shardLease(shard), token }));
  }

  /**
   * Takes this replica's first leases, then renews them every third of the lease until `stop`.
   * Where the store has sessions, it also looks every second for a replica whose session ended (its
   * process died) and renews at once: that replica's shards are taken without waiting out its lease.
   */
  async start(): Promise<void> {
    const watching = (await this.options.store.announce(this.holder)) !== undefined;
    // Replicas starting together take the same rows: a renewal that lost the race is tried again.
    for (let tries = 1; ; tries++) {
      try {
        await this.renewNow();
        await this.acting;
        break;
      } catch (error) {
        if (tries >= 10) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 200 * tries));
      }
    }
    this.schedule();
    if (watching) this.watch();
  }

  private watch(): void {
    if (this.stopped) return;
    const { store, clock, leaseMs } = this.options;
    this.cancelWatch = clock.schedule(Math.min(GONE_CHECK_MS, Math.floor(leaseMs / 3)), () => {
      store.replicas
        .gone(clock.now().toISOString(), this.holder)
        .then((gone) => {
          if (gone.length === 0 || this.stopped) return;
          this.options.log.info({ replicas: gone }, "replica %s is gone: taking its shards", gone.join(", "));
          return this.renewNow();
        })
        .catch((error: unknown) =>
          this.options.log.warn({ err: error }, "looking for replicas that are gone failed; retrying"),
        )
        .finally(() => this.watch());
    });
  }

  /** Renews now (one renewal at a time); resolves once it is done. */
  renewNow(): Promise<void> {
    this.ticking ??= this.tick().finally(() => {
      this.ticking = undefined;
    });
    return this.ticking;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.cancel = this.options.clock.schedule(Math.max(200, Math.floor(this.options.leaseMs / 3)), () => {
      this.renewNow()
        .catch((error: unknown) =>
          this.options.log.warn({ err: error }, "renewing this replica's leases failed; retrying"),
        )
        .finally(() => this.schedule());
    });
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const { store, clock, leaseMs } = this.options;
    const began = clock.now();
    const at = began.toISOString();
    const until = new Date(began.getTime() + leaseMs).toISOString();
    // Renewed where the store still says they are ours (a lease nobody took while this replica was
    // paused is still its own, with the same token); a changed token is a lease taken anew. After a
    // lapse (no renewal for a whole lease, by this clock) every shard held again counts as gained:
    // work handed around while this replica owned nothing may have been dropped, and is looked at again.
    const previous = new Map(this.held);
    const before = this.valid() ? previous : new Map<number, number>();
    // By its own clock: a sync lease that lapsed (a renewal came late) and is held again is taken
    // again, so whoever stopped syncing on the lapse starts again.
    const wasLeader = this.leader;
    const owners = new Map<number, string>();
    const session = store.session();
    const outcome = await store.leaseTransaction(async (tx) => {
      // Who held each shard last, run out or not: a shard taken from another replica (gone, paused
      // or giving it up) is a takeover, whose attempts in flight are that replica's.
      owners.clear();
      for (const lease of await tx.replicas.leases())
        if (lease.name.startsWith("shard:")) owners.set(Number(lease.name.slice(6)), lease.holder);
      await tx.replicas.heartbeat({
        id: this.holder,
        ...(this.address ? { address: this.address } : {}),
        startedAt: this.startedAt,
        renewedAt: at,
        expiresAt: until,
        shards: this.held.size,
        nodes: this.nodes,
        ...(session ? { session } : {}),
      });
      // A replica whose process died is gone now, its lease run out or not.
      await tx.replicas.expireGone(at, this.holder);
      const live = (await tx.replicas.live(at)).map((r) => r.id);
      const wanted = new Set<number>();
      for (let shard = 0; shard < SHARDS; shard++)
        if (shardOwner(shard, live) === this.holder) wanted.add(shard);
      const kept = await tx.replicas.renew(
        this.holder,
        [...previous.keys()].filter((s) => wanted.has(s)).map(shardLease),
        until,
      );
      const held = new Map<number, number>();
      for (const [name, token] of kept) held.set(Number(name.slice(6)), token);
      // Shards held but now another live replica's: given up, for it to take on its next renewal.
      await tx.replicas.release(
        this.holder,
        [...previous.keys()].filter((s) => !wanted.has(s)).map(shardLease),
      );
      for (const shard of wanted) {
        if (held.has(shard)) continue;
        const token = await tx.replicas.acquire(shardLease(shard), this.holder, at, until);
        if (token !== undefined) held.set(shard, token);
      }
      const syncToken = await tx.replicas.acquire(SYNC_LEASE, this.holder, at, until);
      return { held, syncToken };
    });
    if (this.stopped) return;
    this.held.clear();
    for (const [shard, token] of outcome.held) this.held.set(shard, token);
    this.syncToken = outcome.syncToken;
    this.validUntil = began.getTime() + leaseMs;
    const heldNow = [...this.held.keys()].sort((a, b) => a - b).join(",");
    if (heldNow !== this.counted || ++this.ticks % 10 === 0) {
      this.counted = heldNow;
      this.nodes = await this.countNodes(new Set(this.held.keys()));
    }
    const change: LeaseChange = {
      gained: [...this.held.keys()]
        .filter((s) => before.get(s) !== this.held.get(s))
        .map((shard) => {
          const from = owners.get(shard);
          return from && from !== this.holder ? { shard, from } : { shard };
        }),
      lost: [...previous.keys()].filter((s) => !this.held.has(s)),
    };
    if (wasLeader !== (this.syncToken !== undefined)) change.leader = this.syncToken !== undefined;
    if (change.gained.length === 0 && change.lost.length === 0 && change.leader === undefined) return;
    this.options.log.info(
      {
        replica: this.holder,
        gained: change.gained.length,
        lost: change.lost.length,
        shards: this.held.size,
        leader: this.syncToken !== undefined,
      },
      "replica %s holds %d shards now",
      this.holder,
      this.held.size,
    );
    this.acting = this.acting
      .then(async () => {
        for (const listener of this.listeners) await listener(change);
      })
      .catch((error: unknown) =>
        this.options.log.warn({ err: error }, "acting on a change of this replica's leases failed"),
      );
  }

  /** What this replica holds, for /healthz, /metrics and its row. */
  state(): { id: string; shards: number; nodes: number; leader: boolean; fenced: number } {
    const valid = this.valid();
    return {
      id: this.holder,
      shards: valid ? this.held.size : 0,
      nodes: valid ? this.nodes : 0,
      leader: this.leader,
      fenced: this.fenced,
    };
  }

  /** A unit of work was fenced: the leases are looked at again now. */
  fencedOut(): void {
    this.fenced++;
    this.validUntil = 0;
    void this.renewNow().catch(() => undefined);
  }

  /** Stops renewing and gives every lease up, so the others take its shards at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancel?.();
    this.cancelWatch?.();
    await this.ticking?.catch(() => undefined);
    await this.acting;
    this.held.clear();
    this.syncToken = undefined;
    await this.options.store.leaseTransaction((tx) => tx.replicas.remove(this.holder)).catch(() => undefined);
  }
}
