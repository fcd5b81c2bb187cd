/**
 * Liveness: whether the hub hears from each node it reaches. A heartbeat or a report counts; nothing
 * within `heartbeat.interval × missed` gets one request for a report (a node that only answers when
 * asked, like an SSH host, is observed this way at the heartbeat cadence), and no answer to that is
 * `NodeSilent` until the node is heard again. Kept in memory; the store gets the last-heard time at
 * most every HEARD_WRITE_MS per node, and a heartbeat that has nothing else to record never reaches
 * the store (`heartbeat`): 10,000 nodes beating every 5 s were 2,000 writes a second, and enough
 * garbage that V8 held its young generation at its largest for a hub with nothing to do.
 */
import type { Logger } from "pino";
import { type FleetSettings, fleetSettings } from "../model/fleet.js";
import type { Clock } from "./clock.js";
import { markOpen, markResolved } from "./conditions.js";
import { Deadlines } from "./deadlines.js";
import type { NodeRecord } from "./records.js";
import type { Store, UnitOfWork } from "./store/store.js";

const SECOND = 1000;
/** How often a node's last-heard time is written to the store at most (what `steward get nodes` shows). */
const HEARD_WRITE_MS = 30 * SECOND;

export interface LivenessOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  newId: () => string;
  /** Whether the hub runs the node's transport (only those are watched). */
  reaches: (node: NodeRecord) => boolean;
  askForReport: (node: string) => void;
  /** A node became silent, or was heard again (in unit of work `tx`): rollouts stop (or start again) waiting for it. */
  silenceChanged?: (node: string, tx: UnitOfWork) => Promise<void>;
  /** Takes in events that already arrived, before a node is called silent. */
  beforeCheck: () => Promise<void>;
}

export class Liveness {
  /** When each watched node is checked next: one timer for the fleet. */
  private readonly checks: Deadlines<string>;
  /** Nodes whose check is running: it arms the next one itself. */
  private readonly checking = new Set<string>();
  /** Nodes being read before their check is armed (a second call arms nothing). */
  private readonly arming = new Set<string>();
  /** Nodes with a heartbeat waiting to be recorded (see `heartbeat`). */
  private readonly recording = new Set<string>();
  /** When each node was last heard, and last written to the store (ms). */
  private readonly heard = new Map<string, number>();
  private readonly written = new Map<string, number>();
  /** When each quiet node was last asked for a report. */
  private readonly askedAt = new Map<string, number>();
  /** Nodes with an open NodeSilent condition. */
  private readonly silent = new Set<string>();
  private settings: FleetSettings = fleetSettings(undefined);
  private stopped = false;

  constructor(private readonly options: LivenessOptions) {
    this.checks = new Deadlines(options.clock, (names) => {
      for (const name of names) {
        this.checking.add(name);
        this.check(name)
          .catch((error: unknown) => {
            this.options.log.error(
              { node: name, err: error },
              "checking whether node %s is heard failed",
              name,
            );
            return this.arm(name, this.windowMs()).catch(() => undefined);
          })
          .finally(() => this.checking.delete(name));
      }
    });
  }

  /** Reads which nodes are silent now and the fleet's heartbeat settings (at start). */
  async load(): Promise<void> {
    const { store } = this.options;
    for (const condition of await store.conditions.list({ status: "open", type: "NodeSilent" }))
      this.silent.add(condition.subject);
    await this.settingsChanged();
  }

  /** The fleet settings may have changed (a revision's declarations were recorded). */
  async settingsChanged(): Promise<void> {
    this.settings = (await this.options.store.desired.fleetSettings()) ?? fleetSettings(undefined);
  }

  /** A node was heard (a heartbeat, or a report taken at `reportTakenAt`), recorded in unit of work `tx`. */
  async heardFrom(tx: UnitOfWork, name: string, at: Date, reportTakenAt?: string): Promise<void> {
    const ms = this.hear(name, at);
    if (reportTakenAt !== undefined || ms - (this.written.get(name) ?? 0) >= HEARD_WRITE_MS) {
      const iso = at.toISOString();
      await tx.nodes.touch(
        name,
        reportTakenAt ? { heartbeatAt: iso, reportAt: reportTakenAt } : { heartbeatAt: iso },
      );
      this.written.set(name, ms);
    }
    if (this.silent.delete(name)) {
      const now = this.options.clock.now().toISOString();
      const resolved = await markResolved(
        tx,
        "NodeSilent",
        "node",
        name,
        now,
        `heard from node ${name} at ${at.toISOString()}`,
      );
      if (resolved) {
        this.options.log.info({ node: name }, "node %s is heard again", name);
        await this.options.silenceChanged?.(name, tx);
      }
    }
    await this.watch(name);
  }

  /**
   * A heartbeat from `name` at `at`, heard at once in memory: a backlog of events waiting for the
   * store never makes a beating node look silent. Says whether the store must hear of it too, when
   * no recording of an earlier beat is waiting: `now` when something there changes with it (the
   * node is silent, its check is not armed, or `record` says so), `soon` when only its last-heard
   * time is due to be written — the caller may gather those, a second's worth in one unit of work
   * rather than one for each. The caller then records it (`heardFrom` with `lastHeard`, the latest
   * beat by then) and calls `recorded` once that is committed or refused. So at most one beat per
   * node waits for the store, however far behind it is.
   */
  heartbeat(name: string, at: Date, record = false): "now" | "soon" | undefined {
    this.hear(name, at);
    if (this.recording.has(name)) return undefined;
    const now = record || this.silent.has(name) || (!this.checks.has(name) && !this.checking.has(name));
    if (!now && at.getTime() - (this.written.get(name) ?? 0) < HEARD_WRITE_MS) return undefined;
    this.recording.add(name);
    return now ? "now" : "soon";
  }

  /** The recording `heartbeat` asked for is done (committed, or refused: the next beat asks again). */
  recorded(name: string): void {
    this.recording.delete(name);
  }

  /** When `name` was last heard, as far as this hub knows. */
  lastHeard(name: string): Date | undefined {
    const ms = this.heard.get(name);
    return ms === undefined ? undefined : new Date(ms);
  }

  /** Notes `name` heard at `at` (the last-heard time only moves forward); returns `at` in ms. */
  private hear(name: string, at: Date): number {
    const ms = at.getTime();
    if (ms > (this.heard.get(name) ?? 0)) this.heard.set(name, ms);
    return ms;
  }

  /** Arms the silence check of a node (if not armed, nor running): due when its window ends, or after `delay`. */
  async watch(name: string, delay?: number): Promise<void> {
    if (!this.checking.has(name)) await this.arm(name, delay);
  }

  /** `watch` for nodes whose records are in hand (a hub's start, a takeover): no read each. */
  watchNodes(nodes: readonly NodeRecord[]): void {
    for (const node of nodes)
      if (!this.checking.has(node.name) && !this.checks.has(node.name) && !this.arming.has(node.name))
        this.armFor(node);
  }

  private async arm(name: string, delay?: number): Promise<void> {
    if (this.stopped || this.checks.has(name) || this.arming.has(name)) return;
    this.arming.add(name);
    let node: NodeRecord | undefined;
    try {
      node = await this.options.store.nodes.get(name);
    } finally {
      this.arming.delete(name);
    }
    if (node) this.armFor(node, delay);
  }

  private armFor(node: NodeRecord, delay?: number): void {
    if (node.removedAt || !this.options.reaches(node) || this.stopped) return;
    const now = this.options.clock.now().getTime();
    const last = this.heard.get(node.name) ?? now;
    this.checks.set(node.name, delay === undefined ? Math.max(now, last + this.windowMs()) : now + delay);
  }

  stop(): void {
    this.stopped = true;
    this.checks.clear();
  }

  private windowMs(): number {
    const { heartbeat } = this.settings;
    return heartbeat.intervalMs * heartbeat.missed;
  }

  private async check(name: string): Promise<void> {
    await this.options.beforeCheck();
    const { store, clock } = this.options;
    const now = clock.now();
    const window = this.windowMs();
    const last = this.heard.get(name);
    // Heard within its window: checked again when the window ends, with no read — a fleet at rest
    // is checked node by node every window (10,000 nodes every 15 s). A node removed meanwhile is
    // heard no more, and its next check finds it so.
    if (last !== undefined && now.getTime() - last < window) {
      if (!this.stopped && !this.checks.has(name)) this.checks.set(name, last + window);
      return;
    }
    const node = await store.nodes.get(name);
    if (!node || node.removedAt || !this.options.reaches(node) || this.stopped) return;
    const asked = this.askedAt.get(name);
    if (asked === undefined || (last !== undefined && asked <= last)) {
      this.askedAt.set(name, now.getTime());
      this.options.askForReport(name);
      await this.arm(name, this.settings.heartbeat.intervalMs);
      return;
    }
    const lastIso = last === undefined ? undefined : new Date(last).toISOString();
    await store.transaction(async (tx) => {
      const { change } = await markOpen(
        tx,
        {
          type: "NodeSilent",
          subjectKind: "node",
          subject: name,
          reason: last === undefined ? "NeverHeard" : "HeartbeatMissed",
          message:
            last === undefined
              ? `node ${name} has not been heard from since the hub started`
              : `node ${name} silent since ${lastIso} (window ${Math.round(window / SECOND)}s), and did not answer a request for a report`,
          evidence: { lastHeardAt: lastIso, lastReportAt: node.lastReportAt, transport: node.transport },
          resolver: "operator",
          node: name,
        },
        now.toISOString(),
        this.options.newId,
      );
      this.silent.add(name);
      if (change === "opened") {
        this.options.log.warn({ node: name }, "node %s is silent", name);
        await this.options.silenceChanged?.(name, tx);
      }
    });
    // Look again later: the condition's lastObserved stays fresh while the node is silent.
    await this.arm(name, window);
  }
}
