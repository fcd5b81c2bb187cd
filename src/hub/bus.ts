/**
 * The hub on a bus: its open conditions shown where anyone can watch them, its tasks handed to a
 * queue of task agents, and their claims and resolutions coming back. The hub defines these ports;
 * the NATS transport implements them (KV `steward-conditions`, `steward.tasks` and the task events),
 * and only the CLI wires them together.
 *
 * `BusFeed` keeps the board level with the hub's records: every write to a condition (opened,
 * updated, observed again, resolved) puts or removes it, read back from the store once the writer's
 * transaction is over; at start, and after any failure to reach the bus, the whole board is replaced
 * by the open conditions. Tasks are an outbox: an open task not yet marked published is published
 * (the task id de-duplicates a second copy) and then marked, so a hub that dies in between publishes
 * it again and a task created while the bus was unreachable goes out once it is back.
 */
import type { Logger } from "pino";
import type { Clock } from "./clock.js";
import type { ConditionRecord, SubjectKind, TaskOutcome, TaskRecord } from "./records.js";
import type { Store } from "./store/store.js";

/** Where open conditions are shown besides the hub's own records. */
export interface ConditionBoard {
  /** Shows an opened or updated condition. */
  put(condition: ConditionRecord): Promise<void>;
  /** Removes a resolved condition. */
  resolve(id: string): Promise<void>;
  /** Makes the board hold exactly `open`. */
  replaceAll(open: readonly ConditionRecord[]): Promise<void>;
}

/** A task as handed to the task agents: the work, and what steward knows about it (its condition). */
export interface TaskMessage {
  id: string;
  type: ConditionRecord["type"];
  subjectKind: SubjectKind;
  subject: string;
  createdAt: string;
  condition: ConditionRecord;
  /** Room for more of what steward knows, without breaking task agents that ignore it. */
  [field: string]: unknown;
}

/** Where tasks go for a task agent (a person or a program) to take. */
export interface TaskQueue {
  /** Resolves once the queue holds the task; publishing the same task twice hands it out once. */
  publish(task: TaskMessage): Promise<void>;
}

/** A task agent's claim, resolution (with the action it took) or decline, as the hub receives it. */
export interface TaskEvent {
  kind: "claimed" | "resolved" | "declined";
  taskId: string;
  /** The task agent's name: the claimant or resolver recorded. */
  by: string;
  at: string;
  /** What the agent did, in its words (resolved). */
  action?: string;
  /** The decision the answer carries, for a task that takes one (resolved). */
  outcome?: TaskOutcome;
  /** Why it declined, or a remark. */
  note?: string;
}

/** What a hub on a bus is given. */
export interface HubBus {
  conditions?: ConditionBoard;
  tasks?: TaskQueue;
}

export interface BusFeedOptions {
  store: Store;
  bus: HubBus;
  clock: Clock;
  log: Logger;
  /** Wait before trying the bus again after a failure; default 5 s. */
  retryMs?: number;
}

/** The message a task is published as. */
export function taskMessage(task: TaskRecord, condition: ConditionRecord): TaskMessage {
  return {
    id: task.id,
    type: task.type,
    subjectKind: task.subjectKind,
    subject: task.subject,
    createdAt: task.createdAt,
    condition,
  };
}

/** Mirrors the hub's conditions to the board and publishes its tasks; see the module comment. */
export class BusFeed {
  private readonly dirty = new Set<string>();
  /** Replace the whole board (start, or after a failure: what was missed is unknown). */
  private full = true;
  private running: Promise<void> | undefined;
  private cancelRetry: (() => void) | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly options: BusFeedOptions) {}

  /** Starts following the store's condition writes (after they commit) and brings the bus level with the records. */
  start(): void {
    this.unsubscribe = this.options.store.onConditionWrite((id) => this.changed(id));
    this.resync();
  }

  /** Replaces the whole board and publishes pending tasks (another process may have written). */
  resync(): void {
    this.full = true;
    this.kick();
  }

  /** Resolves when nothing is waiting to go to the bus (or the bus is failing and a retry is due). */
  async settled(): Promise<void> {
    while (this.running) await this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.cancelRetry?.();
    await this.settled();
  }

  private changed(id: string): void {
    this.dirty.add(id);
    this.kick();
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    // After the current turn: the write that called us is then committed (or rolled back).
    this.running = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.drain());
  }

  private async drain(): Promise<void> {
    const { store, bus, log } = this.options;
    try {
      while (!this.stopped && (this.full || this.dirty.size > 0)) {
        if (this.full) {
          this.full = false;
          this.dirty.clear();
          await bus.conditions?.replaceAll(await store.conditions.list({ status: "open" }));
        } else {
          const ids = [...this.dirty];
          this.dirty.clear();
          for (const id of ids) {
            const condition = await store.conditions.get(id);
            if (!condition || !bus.conditions) continue;
            if (condition.status === "open") await bus.conditions.put(condition);
            else await bus.conditions.resolve(condition.id);
          }
        }
        await this.publishTasks();
      }
    } catch (error) {
      this.full = true;
      const retryMs = this.options.retryMs ?? 5_000;
      log.warn({ err: error, retryMs }, "could not bring the bus level with the hub's conditions and tasks");
      this.cancelRetry?.();
      this.cancelRetry = this.options.clock.schedule(retryMs, () => {
        this.cancelRetry = undefined;
        this.kick();
      });
    } finally {
      this.running = undefined;
    }
    // A write that came while the last await was returning.
    if (!this.stopped && (this.dirty.size > 0 || (this.full && !this.cancelRetry))) this.kick();
  }

  private async publishTasks(): Promise<void> {
    const { store, bus, clock, log } = this.options;
    if (!bus.tasks) return;
    for (const task of await store.tasks.unpublished()) {
      const condition = await store.conditions.get(task.conditionId);
      if (!condition) continue;
      await bus.tasks.publish(taskMessage(task, condition));
      await store.transaction((tx) => tx.tasks.markPublished(task.id, clock.now().toISOString()));
      log.info(
        { taskId: task.id, type: task.type, subject: task.subject },
        "task %s published for the task agents",
        task.id,
      );
    }
  }
}
