/**
 * The hub's inbox: transport events (reports, results, losses, heartbeats, health, task agents'
 * answers) are recorded in one transaction per turn of the event loop, so a burst of results and
 * reports costs one commit, not one each. Each event is a step of it: one that fails rolls back
 * alone. Each event's promise settles after the commit — resolved when recorded, rejected
 * when not — so a transport that acknowledges (NATS) never acknowledges what a crash could lose.
 * Among hub replicas a batch checks the leases of the nodes its events are about once (the fence):
 * a replica that lost one records none of the batch, and its events are refused as not owned, for
 * the transport to hand to the replica that owns them now.
 */
import type { Logger } from "pino";
import { StewardError } from "../model/errors.js";
import { FencedError, StepsRerun, type Store, type UnitOfWork } from "./store/store.js";
import { NotOwnedError } from "./transport.js";

/** An event handed to a stopped hub: not recorded, so a transport must not acknowledge it. */
export class HubStoppedError extends StewardError {
  override readonly name = "HubStoppedError";
  constructor(event: string) {
    super(
      "E_HUB_STOPPED",
      `the hub has stopped: ${event} not recorded (not acknowledged, so it comes again)`,
      {
        data: { event },
      },
    );
  }
}

/**
 * Events recorded in one unit of work at most: a burst of 100,000 results is many commits of this
 * size, each short, so what waits for the store between them (a reconcile batch, a replica's
 * fence) waits for one of them only.
 */
const MAX_BATCH = 1_024;

/** What an event is, as the inbox records it. */
export interface EventAbout {
  /** Its kind and its transport (for the log). */
  event: string;
  transport: string;
  /** The node it is about, whose lease the batch checks (none: an event about no node's attempts). */
  node?: string;
  /** What its handler reads first, read ahead for the whole batch (InboxOptions.readAhead). */
  reads?: EventReads;
}

/** What an event's handler reads first: the attempt a result or loss is about, the node that reported. */
export interface EventReads {
  attempt?: string;
  reported?: string;
}

/** A transport event waiting for the inbox's next unit of work, with its handler's promise. */
interface InboxEvent extends EventAbout {
  run: (tx: UnitOfWork) => Promise<void>;
  recorded: () => void;
  failed: (error: unknown) => void;
}

export interface InboxOptions {
  store: Store;
  log: Logger;
  /** Called after every flush (the hub may have become idle). */
  flushed: () => void;
  /** A batch was fenced: the replica lost leases it counted on. */
  fencedOut?: () => void;
  /** Reads ahead, in the batch's unit of work, what its events read first (their `reads`, gathered). */
  readAhead?: (tx: UnitOfWork, reads: { attempts: string[]; reported: string[] }) => Promise<void>;
}

/** Transport events, recorded in batches (see the module comment). */
export class Inbox {
  /** Events waiting for a unit of work: `waiting` from `head` on (taking a batch moves `head`). */
  private waiting: InboxEvent[] = [];
  private head = 0;
  private scheduled = false;
  /** The flush now running: batches are recorded one after another, in the order they came. */
  private flushing: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly options: InboxOptions) {}

  /** Whether events wait for their unit of work, or one is being recorded. */
  get busy(): boolean {
    return this.waiting.length > this.head || this.scheduled || this.flushing !== undefined;
  }

  /**
   * Records `run` with the next batch; resolves once committed. Rejects with HubStoppedError once
   * the inbox is closed.
   */
  deliver(about: EventAbout, run: (tx: UnitOfWork) => Promise<void>): Promise<void> {
    if (this.closed) return Promise.reject(new HubStoppedError(about.event));
    return new Promise<void>((recorded, failed) => {
      this.waiting.push({ ...about, run, recorded, failed });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => void this.flush());
    });
  }

  /** Records what waits now, in one unit of work, after the batch before it. */
  async flush(): Promise<void> {
    this.scheduled = false;
    while (this.flushing) await this.flushing;
    const batch = this.take();
    if (this.waiting.length > this.head && !this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.flush());
    }
    if (batch.length === 0) {
      this.options.flushed();
      return;
    }
    this.flushing = this.record(batch);
    try {
      await this.flushing;
    } finally {
      this.flushing = undefined;
      this.options.flushed();
    }
  }

  /**
   * The next batch, oldest first. Taking it moves a cursor rather than shifting the rest (a splice
   * of a long backlog copies all of it for every batch); the array is compacted once half of it is
   * taken.
   */
  private take(): InboxEvent[] {
    const batch = this.waiting.slice(this.head, this.head + MAX_BATCH);
    this.head += batch.length;
    if (this.head >= this.waiting.length) {
      this.waiting = [];
      this.head = 0;
    } else if (this.head * 2 >= this.waiting.length) {
      this.waiting = this.waiting.slice(this.head);
      this.head = 0;
    }
    return batch;
  }

  private async record(batch: readonly InboxEvent[]): Promise<void> {
    const { store, log } = this.options;
    const failures = new Map<InboxEvent, unknown>();
    const nodes = new Set<string>();
    const reads = { attempts: [] as string[], reported: [] as string[] };
    for (const entry of batch) {
      if (entry.node !== undefined) nodes.add(entry.node);
      if (entry.reads?.attempt !== undefined) reads.attempts.push(entry.reads.attempt);
      if (entry.reads?.reported !== undefined) reads.reported.push(entry.reads.reported);
    }
    try {
      await store.transaction(async (tx) => {
        // Run again from the start if the store retries the unit (PostgreSQL, another replica).
        failures.clear();
        await tx.fence(nodes);
        await this.options.readAhead?.(tx, reads);
        for (const entry of batch) {
          try {
            await tx.transaction(entry.run);
          } catch (error) {
            // The unit runs again with a savepoint per event, where this one fails alone.
            if (error instanceof StepsRerun) throw error;
            failures.set(entry, error);
            log.error(
              { err: error, transport: entry.transport, event: entry.event },
              "handling a %s event failed",
              entry.event,
            );
          }
        }
      });
    } catch (error) {
      if (error instanceof FencedError) {
        log.warn({ events: batch.length }, "%s: the batch is left to their owners", error.message);
        this.options.fencedOut?.();
        for (const entry of batch)
          entry.failed(entry.node === undefined ? error : new NotOwnedError(entry.node));
        return;
      }
      // Nothing of the batch is committed.
      log.error({ err: error, events: batch.length }, "recording %d transport events failed", batch.length);
      for (const entry of batch) entry.failed(error);
      return;
    }
    for (const entry of batch) {
      if (failures.has(entry)) entry.failed(failures.get(entry));
      else entry.recorded();
    }
  }

  /** Records what is left and refuses anything later. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }
}
