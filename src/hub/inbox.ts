/**
 * The hub's inbox: transport events (reports, results, losses, heartbeats, health, task agents'
 * answers) are recorded in one transaction per turn of the event loop, so a burst of results and
 * reports costs one commit, not one each. Each event runs in its own savepoint: one that fails
 * rolls back alone. Each event's promise settles after the commit — resolved when recorded, rejected
 * when not — so a transport that acknowledges (NATS) never acknowledges what a crash could lose.
 */
import type { Logger } from "pino";
import { StewardError } from "../model/errors.js";
import type { Store } from "./store/store.js";

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

/** A transport event waiting for the inbox's next transaction, with its handler's promise. */
interface InboxEvent {
  event: string;
  transport: string;
  run: () => void;
  recorded: () => void;
  failed: (error: unknown) => void;
}

export interface InboxOptions {
  store: Store;
  log: Logger;
  /** Called after every flush (the hub may have become idle). */
  flushed: () => void;
}

/** Transport events, recorded in batches (see the module comment). */
export class Inbox {
  private readonly waiting: InboxEvent[] = [];
  private scheduled = false;
  private closed = false;

  constructor(private readonly options: InboxOptions) {}

  /** Whether events wait for their transaction. */
  get busy(): boolean {
    return this.waiting.length > 0 || this.scheduled;
  }

  /**
   * Records `run` with the next batch; resolves once committed. Rejects with HubStoppedError once
   * the inbox is closed.
   */
  deliver(event: string, transport: string, run: () => void): Promise<void> {
    if (this.closed) return Promise.reject(new HubStoppedError(event));
    return new Promise<void>((recorded, failed) => {
      this.waiting.push({ event, transport, run, recorded, failed });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => this.flush());
    });
  }

  /** Records what waits now, in one transaction. */
  flush(): void {
    const { store, log } = this.options;
    this.scheduled = false;
    const batch = this.waiting.splice(0);
    if (batch.length === 0) {
      this.options.flushed();
      return;
    }
    const failures = new Map<InboxEvent, unknown>();
    try {
      store.transaction(() => {
        for (const entry of batch) {
          try {
            store.transaction(entry.run);
          } catch (error) {
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
      // Nothing of the batch is committed.
      log.error({ err: error, events: batch.length }, "recording %d transport events failed", batch.length);
      for (const entry of batch) entry.failed(error);
      return;
    } finally {
      this.options.flushed();
    }
    for (const entry of batch) {
      if (failures.has(entry)) entry.failed(failures.get(entry));
      else entry.recorded();
    }
  }

  /** Records what is left and refuses anything later. */
  close(): void {
    this.flush();
    this.closed = true;
  }
}
