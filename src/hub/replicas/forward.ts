/**
 * Work about another replica's nodes, handed to it: instance keys a replica queued (a sync it took
 * in, a timer) but does not own go out on the store's signals, and each replica queues those of its
 * own nodes it hears. A key no replica owns at that moment is dropped: the replica that takes its
 * node over reconciles every instance of it anyway.
 */
import type { Logger } from "pino";
import type { Signals } from "../store/store.js";

const CHANNEL = "steward_instances";
/** Below PostgreSQL's 8,000-byte payload limit. */
const MAX_PAYLOAD = 7_000;

export class Forwarder {
  private pending: string[] = [];
  private scheduled = false;

  constructor(
    private readonly signals: Signals,
    private readonly log: Logger,
  ) {}

  /** Calls `take` with the keys other replicas hand over (each replica keeps those it owns). */
  listen(take: (keys: string[]) => void): Promise<void> {
    return this.signals.listen(CHANNEL, (payload) => {
      if (payload !== "") take(payload.split("\n"));
    });
  }

  /** Hands `keys` to whichever replica owns their nodes (sent together at the end of this turn). */
  forward(keys: readonly string[]): void {
    this.pending.push(...keys);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    const keys = [...new Set(this.pending.splice(0))];
    let chunk: string[] = [];
    let size = 0;
    const send = async () => {
      if (chunk.length === 0) return;
      const payload = chunk.join("\n");
      chunk = [];
      size = 0;
      await this.signals.send(CHANNEL, payload);
    };
    try {
      for (const key of keys) {
        if (size + key.length + 1 > MAX_PAYLOAD) await send();
        chunk.push(key);
        size += key.length + 1;
      }
      await send();
    } catch (error) {
      this.log.warn({ err: error, instances: keys.length }, "handing instances to other replicas failed");
    }
  }
}
