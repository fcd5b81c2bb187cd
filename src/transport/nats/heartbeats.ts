/**
 * Heartbeats: what an agent publishes on `steward.heartbeat.<node>[.<assignment>]`, and the hub's
 * watch that turns silence into a signal. The watch keeps one timer per node (and per instance with
 * a running service), reset by each beat; when it fires the key is silent. Nobody polls: a silent
 * node costs one pending timer, a beating one a timer reset.
 */

/** The body of a heartbeat message. */
export interface HeartbeatMessage {
  node: string;
  /** Present on an instance's beat (an instance with a running service). */
  assignment?: string;
  at: string;
  /** How often the sender beats; the watch allows `missedBeats` of them before calling it silent. */
  intervalMs: number;
  /** An instance's last beat says `stopped`: its service was stopped on purpose, stop watching it. */
  state?: "running" | "stopped";
}

/** Parses a heartbeat body; undefined when it is not one. */
export function parseHeartbeat(data: string): HeartbeatMessage | undefined {
  try {
    const value = JSON.parse(data) as Partial<HeartbeatMessage>;
    if (typeof value.node !== "string" || typeof value.at !== "string") return undefined;
    if (typeof value.intervalMs !== "number" || !(value.intervalMs > 0)) return undefined;
    if (value.assignment !== undefined && typeof value.assignment !== "string") return undefined;
    return value as HeartbeatMessage;
  } catch {
    return undefined;
  }
}

/** One watched sender: a node, or an instance (node and assignment). */
export interface HeartbeatKey {
  node: string;
  assignment?: string;
}

export interface SilenceWatchOptions {
  /** Beats that may be missed before the sender is silent; default 3. */
  missedBeats?: number;
  /** Called once when a sender falls silent; `since` is its last beat (or when watching began). */
  onSilent(key: HeartbeatKey, since: Date): void;
  /** Called when a silent sender beats again. */
  onHeard(key: HeartbeatKey, silentSince: Date, at: Date): void;
  clock?: () => Date;
}

interface Watched {
  key: HeartbeatKey;
  lastBeat: Date;
  intervalMs: number;
  silentSince?: Date;
  timer?: NodeJS.Timeout;
}

const MIN_INTERVAL_MS = 50;
const MAX_INTERVAL_MS = 10 * 60_000;

/** Timers per sender, reset on each beat; silence is reported once and cleared by the next beat. */
export class SilenceWatch {
  private readonly watched = new Map<string, Watched>();
  private readonly missedBeats: number;
  private readonly clock: () => Date;
  private suspended = false;

  constructor(private readonly options: SilenceWatchOptions) {
    this.missedBeats = options.missedBeats ?? 3;
    this.clock = options.clock ?? (() => new Date());
  }

  /** A beat arrived. */
  beat(key: HeartbeatKey, intervalMs: number, at: Date = this.clock()): void {
    const id = keyId(key);
    const entry = this.watched.get(id) ?? { key, lastBeat: at, intervalMs };
    entry.lastBeat = at;
    entry.intervalMs = clamp(intervalMs);
    this.watched.set(id, entry);
    const silentSince = entry.silentSince;
    entry.silentSince = undefined;
    this.arm(entry);
    if (silentSince) this.options.onHeard(key, silentSince, at);
  }

  /**
   * Starts watching a sender that has not beaten yet (a node the hub expects, one known from its
   * last report): silent unless it beats within the allowance, counted from `lastSeen` or now.
   */
  expect(key: HeartbeatKey, intervalMs: number, lastSeen: Date = this.clock()): void {
    const id = keyId(key);
    if (this.watched.has(id)) return;
    const entry: Watched = { key, lastBeat: lastSeen, intervalMs: clamp(intervalMs) };
    this.watched.set(id, entry);
    this.arm(entry);
  }

  /** Stops watching (an instance whose service was stopped on purpose); no signal is raised. */
  forget(key: HeartbeatKey): void {
    const entry = this.watched.get(keyId(key));
    if (entry?.timer) clearTimeout(entry.timer);
    this.watched.delete(keyId(key));
  }

  /** Since when the sender is silent, or undefined while it beats (or is not watched). */
  silentSince(key: HeartbeatKey): Date | undefined {
    return this.watched.get(keyId(key))?.silentSince;
  }

  /** Every silent sender with its since. */
  silent(): { key: HeartbeatKey; since: Date }[] {
    return [...this.watched.values()]
      .filter((entry) => entry.silentSince)
      .map((entry) => ({ key: entry.key, since: entry.silentSince as Date }));
  }

  /**
   * Pauses the timers while the watcher itself cannot hear anything (its connection to the server
   * is down): that is not the senders' silence. `resume` re-arms each with a full allowance.
   */
  suspend(): void {
    this.suspended = true;
    for (const entry of this.watched.values()) if (entry.timer) clearTimeout(entry.timer);
  }

  resume(): void {
    if (!this.suspended) return;
    this.suspended = false;
    const now = this.clock();
    for (const entry of this.watched.values()) {
      if (entry.silentSince) continue;
      entry.lastBeat = now;
      this.arm(entry);
    }
  }

  /** Clears every timer. */
  stop(): void {
    for (const entry of this.watched.values()) if (entry.timer) clearTimeout(entry.timer);
    this.watched.clear();
  }

  private arm(entry: Watched): void {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = undefined;
    if (this.suspended) return;
    const allowance = entry.intervalMs * this.missedBeats;
    const remaining = Math.max(0, entry.lastBeat.getTime() + allowance - this.clock().getTime());
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      if (entry.silentSince) return;
      entry.silentSince = entry.lastBeat;
      this.options.onSilent(entry.key, entry.lastBeat);
    }, remaining);
    entry.timer.unref?.();
  }
}

function keyId(key: HeartbeatKey): string {
  return key.assignment === undefined ? key.node : `${key.node}/${key.assignment}`;
}

function clamp(intervalMs: number): number {
  return Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, intervalMs));
}
