/**
 * Heartbeats: what an agent publishes on `steward.heartbeat.<node>[.<assignment>]`, and the hub's
 * watch that turns silence into a signal. The watch keeps one deadline per node (and per instance
 * with a running service), moved on by each beat; when one passes, its sender is silent. Nobody
 * polls: the deadlines share one timer (see hub/deadlines.ts), a beat costs a number written.
 */
import { systemClock } from "../../hub/clock.js";
import { Deadlines } from "../../hub/deadlines.js";

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

/** A watched sender; times in ms since the epoch. */
interface Watched {
  key: HeartbeatKey;
  lastBeat: number;
  intervalMs: number;
  silentSince?: number;
}

const MIN_INTERVAL_MS = 50;
const MAX_INTERVAL_MS = 10 * 60_000;

/** A deadline per sender, moved on by each beat; silence is reported once and cleared by the next beat. */
export class SilenceWatch {
  private readonly watched = new Map<string, Watched>();
  private readonly missedBeats: number;
  private readonly clock: () => Date;
  private readonly deadlines: Deadlines<string>;
  private suspended = false;

  constructor(private readonly options: SilenceWatchOptions) {
    this.missedBeats = options.missedBeats ?? 3;
    const clock = options.clock ?? (() => new Date());
    this.clock = clock;
    this.deadlines = new Deadlines({ now: clock, schedule: systemClock.schedule }, (ids) => {
      for (const id of ids) this.fell(id);
    });
  }

  /** A beat arrived. */
  beat(key: HeartbeatKey, intervalMs: number, at: Date = this.clock()): void {
    const id = keyId(key);
    const entry = this.watched.get(id) ?? { key, lastBeat: at.getTime(), intervalMs };
    entry.lastBeat = at.getTime();
    entry.intervalMs = clamp(intervalMs);
    this.watched.set(id, entry);
    const silentSince = entry.silentSince;
    entry.silentSince = undefined;
    this.arm(id, entry);
    if (silentSince !== undefined) this.options.onHeard(key, new Date(silentSince), at);
  }

  /**
   * Starts watching a sender that has not beaten yet (a node the hub expects, one known from its
   * last report): silent unless it beats within the allowance, counted from `lastSeen` or now.
   */
  expect(key: HeartbeatKey, intervalMs: number, lastSeen: Date = this.clock()): void {
    const id = keyId(key);
    if (this.watched.has(id)) return;
    const entry: Watched = { key, lastBeat: lastSeen.getTime(), intervalMs: clamp(intervalMs) };
    this.watched.set(id, entry);
    this.arm(id, entry);
  }

  /** Stops watching (an instance whose service was stopped on purpose); no signal is raised. */
  forget(key: HeartbeatKey): void {
    const id = keyId(key);
    this.deadlines.delete(id);
    this.watched.delete(id);
  }

  /** Since when the sender is silent, or undefined while it beats (or is not watched). */
  silentSince(key: HeartbeatKey): Date | undefined {
    const since = this.watched.get(keyId(key))?.silentSince;
    return since === undefined ? undefined : new Date(since);
  }

  /** Every silent sender with its since. */
  silent(): { key: HeartbeatKey; since: Date }[] {
    const silent: { key: HeartbeatKey; since: Date }[] = [];
    for (const entry of this.watched.values())
      if (entry.silentSince !== undefined)
        silent.push({ key: entry.key, since: new Date(entry.silentSince) });
    return silent;
  }

  /**
   * Pauses the deadlines while the watcher itself cannot hear anything (its connection to the
   * server is down): that is not the senders' silence. `resume` gives each a full allowance again.
   */
  suspend(): void {
    this.suspended = true;
    this.deadlines.clear();
  }

  resume(): void {
    if (!this.suspended) return;
    this.suspended = false;
    const now = this.clock().getTime();
    for (const [id, entry] of this.watched) {
      if (entry.silentSince !== undefined) continue;
      entry.lastBeat = now;
      this.arm(id, entry);
    }
  }

  /** Stops watching every sender. */
  stop(): void {
    this.deadlines.clear();
    this.watched.clear();
  }

  private arm(id: string, entry: Watched): void {
    if (this.suspended) return;
    this.deadlines.set(id, entry.lastBeat + entry.intervalMs * this.missedBeats);
  }

  /** The sender `id` let its allowance pass. */
  private fell(id: string): void {
    const entry = this.watched.get(id);
    if (!entry || entry.silentSince !== undefined) return;
    entry.silentSince = entry.lastBeat;
    this.options.onSilent(entry.key, new Date(entry.lastBeat));
  }
}

function keyId(key: HeartbeatKey): string {
  return key.assignment === undefined ? key.node : `${key.node}/${key.assignment}`;
}

function clamp(intervalMs: number): number {
  return Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, intervalMs));
}
