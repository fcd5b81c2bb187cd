/**
 * Liveness: whether the hub hears from each node it reaches. A heartbeat or a report counts; nothing
 * within `heartbeat.interval × missed` gets one request for a report (a node that only answers when
 * asked, like an SSH host, is observed this way at the heartbeat cadence), and no answer to that is
 * `NodeSilent` until the node is heard again. Kept in memory; the store gets the last-heard time at
 * most once a second per node, so a chatty node costs no write per message.
 */
import type { Logger } from "pino";
import { fleetSettings } from "../model/fleet.js";
import type { Clock } from "./clock.js";
import { markOpen, markResolved } from "./conditions.js";
import type { NodeRecord } from "./records.js";
import type { Store } from "./store/store.js";

const SECOND = 1000;

export interface LivenessOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  newId: () => string;
  /** Whether the hub runs the node's transport (only those are watched). */
  reaches: (node: NodeRecord) => boolean;
  askForReport: (node: string) => void;
  /** A node became silent, or was heard again: rollouts stop (or start again) waiting for it. */
  silenceChanged?: (node: string) => void;
  /** Takes in events that already arrived, before a node is called silent. */
  beforeCheck: () => void;
}

export class Liveness {
  private readonly timers = new Map<string, () => void>();
  /** When each node was last heard, and last written to the store (ms). */
  private readonly heard = new Map<string, number>();
  private readonly written = new Map<string, number>();
  /** When each quiet node was last asked for a report. */
  private readonly askedAt = new Map<string, number>();
  /** Nodes with an open NodeSilent condition. */
  private readonly silent = new Set<string>();
  private stopped = false;

  constructor(private readonly options: LivenessOptions) {
    for (const condition of options.store.conditions({ status: "open", type: "NodeSilent" }))
      this.silent.add(condition.subject);
  }

  /** A node was heard (a heartbeat, or a report taken at `reportTakenAt`). */
  heardFrom(name: string, at: Date, reportTakenAt?: string): void {
    const { store } = this.options;
    const ms = at.getTime();
    if (ms > (this.heard.get(name) ?? 0)) this.heard.set(name, ms);
    if (reportTakenAt !== undefined || ms - (this.written.get(name) ?? 0) >= SECOND) {
      const iso = at.toISOString();
      store.touchNode(
        name,
        reportTakenAt ? { heartbeatAt: iso, reportAt: reportTakenAt } : { heartbeatAt: iso },
      );
      this.written.set(name, ms);
    }
    if (this.silent.delete(name)) {
      const now = this.options.clock.now().toISOString();
      const resolved = markResolved(
        store,
        "NodeSilent",
        "node",
        name,
        now,
        `heard from node ${name} at ${at.toISOString()}`,
      );
      if (resolved) {
        this.options.log.info({ node: name }, "node %s is heard again", name);
        this.options.silenceChanged?.(name);
      }
    }
    this.watch(name);
  }

  /** Arms the silence check of a node (if not armed): due when its window ends, or after `delay`. */
  watch(name: string, delay?: number): void {
    if (this.stopped || this.timers.has(name)) return;
    const node = this.options.store.node(name);
    if (!node || node.removedAt || !this.options.reaches(node)) return;
    const now = this.options.clock.now().getTime();
    const last = this.heard.get(name) ?? now;
    const due = delay ?? Math.max(0, last + this.windowMs() - now);
    this.timers.set(
      name,
      this.options.clock.schedule(due, () => this.check(name)),
    );
  }

  stop(): void {
    this.stopped = true;
    for (const cancel of this.timers.values()) cancel();
    this.timers.clear();
  }

  private settings() {
    return this.options.store.fleetSettings() ?? fleetSettings(undefined);
  }

  private windowMs(): number {
    const { heartbeat } = this.settings();
    return heartbeat.intervalMs * heartbeat.missed;
  }

  private check(name: string): void {
    this.timers.delete(name);
    this.options.beforeCheck();
    const { store, clock } = this.options;
    const node = store.node(name);
    if (!node || node.removedAt || !this.options.reaches(node)) return;
    const now = clock.now();
    const window = this.windowMs();
    const last = this.heard.get(name);
    if (last !== undefined && now.getTime() - last < window) {
      this.watch(name);
      return;
    }
    const asked = this.askedAt.get(name);
    if (asked === undefined || (last !== undefined && asked <= last)) {
      this.askedAt.set(name, now.getTime());
      this.options.askForReport(name);
      this.watch(name, this.settings().heartbeat.intervalMs);
      return;
    }
    const lastIso = last === undefined ? undefined : new Date(last).toISOString();
    const { change } = markOpen(
      store,
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
      this.options.silenceChanged?.(name);
    }
    // Look again later: the condition's lastObserved stays fresh while the node is silent.
    this.watch(name, window);
  }
}
