/**
 * The fleet as the views show it, kept current: every live instance's view (views.ts) and a stream
 * of small changes — one instance's new view, one condition opened or resolved, a node drained, a
 * revision taken in — for the web view's pages and their server-sent events.
 *
 * `FleetFeed` is the port. `HubFleetFeed` feeds it from this hub's own event bus: its reconcile
 * outcomes (every report, result, sync and operator change that alters an instance goes through a
 * reconcile of it) and the store's condition writes. When several hub replicas share a store, each
 * reconciles only its own nodes: a feed on the shared store (or its bus) implements the same port,
 * so every replica's view shows the whole fleet.
 *
 * The hub-fed feed costs nothing while nobody looks: it keeps its snapshot only while it has
 * listeners or was read within `idleMs`, and rebuilds it (one pass over the store) when next asked.
 */
import type { Hub } from "./hub.js";
import type { ConditionRecord } from "./records.js";
import type { Store } from "./store/store.js";
import { type InstanceView, instanceViewByKey, instanceViews } from "./views.js";

/** One change, small enough to send as it happens. `at`: when the feed learned of it (epoch ms). */
export type FleetChange =
  | {
      kind: "instance";
      instance: string;
      node: string;
      assignment: string;
      /** The instance as it stands now; absent when it is no longer live (retired, or gone). */
      view?: InstanceView;
      at: number;
    }
  | {
      kind: "condition";
      condition: Pick<
        ConditionRecord,
        "id" | "type" | "status" | "subjectKind" | "subject" | "node" | "revision" | "assignment"
      >;
      at: number;
    }
  | { kind: "node"; node: string; at: number }
  | { kind: "task"; id: string; at: number }
  | { kind: "revision"; sha: string; at: number }
  /** Something changed that the feed cannot name (another process wrote): look again at everything. */
  | { kind: "resync"; at: number };

/** The fleet as the views show it, and what changes in it. */
export interface FleetFeed {
  /** Every live instance's view, now (sorted by instance key). */
  instances(): Promise<readonly InstanceView[]>;
  /** Calls `listener` with every change from now on; returns a function that stops it. */
  subscribe(listener: (change: FleetChange) => void): () => void;
  /**
   * Another writer (the CLI, an action of the web view) changed what the feed cannot see in its
   * own events; `node` narrows it to one node, `task` to a task.
   */
  lookAgain(scope?: { node?: string; task?: string }): void;
}

/** What the hub-fed feed follows, and how often it speaks. */
export interface HubFleetFeedOptions {
  hub: Pick<Hub, "store" | "onReconcile">;
  /** Changes coalesce for this long before they go out (ms); default 25. */
  coalesceMs?: number;
  /** The snapshot is dropped after this long with nobody listening or reading (ms); default 5 min. */
  idleMs?: number;
  now?: () => number;
}

/** What of a view a watcher sees change: an event only when one of these differs. */
function shownAs(view: InstanceView | undefined): string {
  if (!view) return "";
  return [
    view.state,
    view.generation,
    view.observedGeneration ?? "",
    view.failures,
    view.holdReason ?? "",
    view.reason ?? "",
    view.lastAttemptId ?? "",
    view.openConditions.join(","),
  ].join("|");
}

/** The hub-fed FleetFeed (see the module comment). */
export class HubFleetFeed implements FleetFeed {
  private readonly store: Store;
  private readonly listeners = new Set<(change: FleetChange) => void>();
  /** The snapshot, by instance key; undefined while nobody looks. */
  private views: Map<string, InstanceView> | undefined;
  private sorted: InstanceView[] | undefined;
  private loading: Promise<void> | undefined;
  /** Instances to look at again, with when the feed learned they changed. */
  private readonly dirty = new Map<string, number>();
  private readonly dirtyConditions = new Set<string>();
  private readonly dirtyRevisions = new Set<string>();
  private readonly pending: FleetChange[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** The flush running or last run: flushes go one after another (see flush). */
  private flushing: Promise<void> = Promise.resolve();
  private lastRead = 0;
  private readonly stops: (() => void)[] = [];
  private readonly coalesceMs: number;
  private readonly idleMs: number;
  private readonly now: () => number;

  constructor(options: HubFleetFeedOptions) {
    this.store = options.hub.store;
    this.coalesceMs = options.coalesceMs ?? 25;
    this.idleMs = options.idleMs ?? 300_000;
    this.now = options.now ?? Date.now;
    this.stops.push(
      options.hub.onReconcile((outcome) => {
        if (!this.watched()) return;
        this.markDirty(outcome.key);
        for (const sha of outcome.revisions) this.dirtyRevisions.add(sha);
        this.kick();
      }),
      // Inside the writer's transaction: read the condition when the feed flushes, after it.
      this.store.onConditionWrite((id) => {
        if (!this.watched()) return;
        this.dirtyConditions.add(id);
        this.kick();
      }),
    );
  }

  async instances(): Promise<readonly InstanceView[]> {
    this.lastRead = this.now();
    if (!this.views) {
      this.loading ??= this.load();
      await this.loading;
    }
    if (this.dirty.size > 0) await this.flush();
    this.sorted ??= [...(this.views?.values() ?? [])].sort((a, b) =>
      a.instance < b.instance ? -1 : a.instance > b.instance ? 1 : 0,
    );
    return this.sorted;
  }

  subscribe(listener: (change: FleetChange) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.lastRead = this.now();
    };
  }

  lookAgain(scope: { node?: string; task?: string } = {}): void {
    const at = this.now();
    if (scope.task) this.pending.push({ kind: "task", id: scope.task, at });
    if (scope.node) {
      this.pending.push({ kind: "node", node: scope.node, at });
      const node = scope.node;
      void this.store.desired
        .activeKeysOfNode(node)
        .then((keys) => {
          for (const key of keys) this.markDirty(key);
          this.kick();
        })
        .catch(() => this.lookAgain());
    } else if (!scope.task) {
      // Anything may have changed: the next read rebuilds the snapshot.
      this.views = undefined;
      this.sorted = undefined;
      this.pending.push({ kind: "resync", at });
    }
    this.kick();
  }

  /** Stops following the hub. */
  close(): void {
    for (const stop of this.stops.splice(0)) stop();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.listeners.clear();
  }

  /** Someone looks: listeners, or a read not long ago. Otherwise the snapshot is let go. */
  private watched(): boolean {
    if (this.listeners.size > 0 || this.now() - this.lastRead < this.idleMs) return true;
    this.views = undefined;
    this.sorted = undefined;
    return false;
  }

  private markDirty(key: string): void {
    if (!this.dirty.has(key)) this.dirty.set(key, this.now());
  }

  private kick(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush().catch(() => this.lookAgain());
    }, this.coalesceMs);
    this.timer.unref?.();
  }

  /** Reads the snapshot; what changes while it is read is marked dirty, and looked at after it. */
  private async load(): Promise<void> {
    try {
      this.dirty.clear();
      this.views = new Map((await instanceViews(this.store)).map((v) => [v.instance, v]));
      this.sorted = undefined;
    } finally {
      this.loading = undefined;
    }
  }

  /**
   * Looks at what is dirty and sends the changes. One flush at a time, in order: two at once (the
   * timer's and a read's) could each read one instance, the older read finishing last and putting
   * back a view the newer one had replaced — with the instance no longer dirty, for good.
   */
  private flush(): Promise<void> {
    const next = this.flushing.catch(() => undefined).then(() => this.flushNow());
    this.flushing = next;
    return next;
  }

  private async flushNow(): Promise<void> {
    if (this.loading) await this.loading.catch(() => undefined);
    const at = this.now();
    const changes = this.pending.splice(0);
    const conditionIds = [...this.dirtyConditions];
    this.dirtyConditions.clear();
    for (const id of conditionIds) {
      const condition = await this.store.conditions.get(id);
      if (!condition) continue;
      if (condition.subjectKind === "instance") this.markDirty(condition.subject);
      const shown: Extract<FleetChange, { kind: "condition" }>["condition"] = {
        id: condition.id,
        type: condition.type,
        status: condition.status,
        subjectKind: condition.subjectKind,
        subject: condition.subject,
      };
      if (condition.node) shown.node = condition.node;
      if (condition.revision) shown.revision = condition.revision;
      if (condition.assignment) shown.assignment = condition.assignment;
      changes.push({ kind: "condition", condition: shown, at });
    }
    const dirty = [...this.dirty];
    this.dirty.clear();
    // A snapshot loaded while this flush reads is newer than what it read: left as it is.
    const snapshot = this.views;
    for (const [key, learnedAt] of dirty) {
      const view = await instanceViewByKey(this.store, key);
      const live = view && !view.retired ? view : undefined;
      if (snapshot) {
        const shown = shownAs(snapshot.get(key)) !== shownAs(live);
        // The snapshot takes every change (a read must equal the views); watchers only what they see.
        if (this.views === snapshot) {
          if (live) snapshot.set(key, live);
          else snapshot.delete(key);
          this.sorted = undefined;
        }
        if (!shown) continue;
      }
      const split = key.lastIndexOf("@");
      const change: FleetChange = {
        kind: "instance",
        instance: key,
        assignment: live?.assignment ?? key.slice(0, split),
        node: live?.node ?? key.slice(split + 1),
        at: learnedAt,
      };
      if (live) change.view = live;
      changes.push(change);
    }
    const revisions = [...this.dirtyRevisions];
    this.dirtyRevisions.clear();
    for (const sha of revisions) changes.push({ kind: "revision", sha, at });
    for (const change of changes) for (const listener of this.listeners) listener(change);
  }
}
