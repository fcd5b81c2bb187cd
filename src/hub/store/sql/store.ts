/**
 * The store ports over one SQL database, whatever runs it: the ports of committed reads, units of
 * work (each port bound to the unit's connection, its steps run without savepoints until one fails),
 * and the listeners told of condition writes once a unit committed. A subclass says how a unit of
 * work gets its connection and its BEGIN … COMMIT (SQLite: one at a time under a lock; PostgreSQL:
 * from a pool).
 */
import type { GenerationStore } from "../../../repo/store.js";
import type { IntentStatus } from "../../records.js";
import { FencedError, type Fencing, StepsRerun, type Store, type UnitOfWork } from "../store.js";
import { AttemptsSql } from "./attempts.js";
import { StoreCaches } from "./caches.js";
import { ConditionsSql } from "./conditions.js";
import { DesiredStateSql } from "./desired.js";
import { EnrolmentsSql } from "./enrolments.js";
import { SqlGenerationStore } from "./generations.js";
import { IntentsSql } from "./intents.js";
import { MetaSql } from "./meta.js";
import { NodesSql } from "./nodes.js";
import { ObservationsSql } from "./observations.js";
import { ReadAhead } from "./read-ahead.js";
import { ReplicasSql } from "./replicas.js";
import { RolloutsSql } from "./rollouts.js";
import type { Sql } from "./sql.js";
import { StatusesSql } from "./statuses.js";
import { TasksSql } from "./tasks.js";

/** Every port, bound to one connection. */
class Ports {
  readonly desired: DesiredStateSql;
  readonly nodes: NodesSql;
  readonly intents: IntentsSql;
  readonly rollouts: RolloutsSql;
  readonly attempts: AttemptsSql;
  readonly observations: ObservationsSql;
  readonly conditions: ConditionsSql;
  readonly tasks: TasksSql;
  readonly meta: MetaSql;
  readonly statuses: StatusesSql;
  readonly enrolments: EnrolmentsSql;
  readonly replicas: ReplicasSql;

  constructor(sql: Sql, caches: StoreCaches, conditionWritten?: (id: string) => void, ahead?: ReadAhead) {
    this.desired = new DesiredStateSql(sql, caches, ahead);
    this.nodes = new NodesSql(sql, ahead);
    this.intents = new IntentsSql(sql, ahead);
    this.rollouts = new RolloutsSql(sql, ahead);
    this.attempts = new AttemptsSql(sql, ahead);
    this.observations = new ObservationsSql(sql, caches, ahead);
    this.conditions = new ConditionsSql(sql, conditionWritten, ahead);
    this.tasks = new TasksSql(sql);
    this.meta = new MetaSql(sql);
    this.statuses = new StatusesSql(sql);
    this.enrolments = new EnrolmentsSql(sql);
    this.replicas = new ReplicasSql(sql);
  }
}

/**
 * A unit of work on one connection: its ports, and its steps. A unit runs its steps without
 * savepoints first (a savepoint is a round trip per step on PostgreSQL): when one fails, the unit
 * is run again (StepsRerun), this time with a savepoint per step.
 */
class SqlUnitOfWork extends Ports implements UnitOfWork {
  private depth = 0;
  /** A step failed while steps ran without savepoints: the unit must not commit. */
  stepFailed: StepsRerun | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly caches: StoreCaches,
    conditionWritten: (id: string) => void,
    private readonly fencing: Fencing | undefined,
    private readonly savepoints: boolean,
    private readonly ahead = new ReadAhead(),
  ) {
    super(sql, caches, conditionWritten, ahead);
  }

  async readAhead(keys: readonly string[]): Promise<void> {
    const unique = [...new Set(keys)];
    if (unique.length === 0) return;
    await this.desired.readAhead(unique);
    await this.intents.readAhead(unique);
    await this.attempts.readAhead();
    const nodes = new Set<string>();
    for (const desired of this.ahead.desired.values()) if (desired) nodes.add(desired.node);
    await this.nodes.readAhead([...nodes]);
    // An instance that converges releases the instances of its node waiting for it (dependsOn).
    await this.intents.readAheadOfNodes([...nodes], ["waiting"]);
    await this.observations.readAhead(unique, [...nodes]);
    await this.conditions.readAhead(unique);
  }

  async readAheadEvents(events: {
    attempts: readonly string[];
    reported: readonly string[];
    waiting: readonly IntentStatus[];
  }): Promise<void> {
    await this.attempts.readAheadIds([...new Set(events.attempts)]);
    const reported = [...new Set(events.reported)];
    await this.intents.readAheadOfNodes(reported, events.waiting);
    await this.observations.readAheadReported(reported);
  }

  async fence(nodes: Iterable<string>): Promise<void> {
    if (!this.fencing) return;
    const names = [...new Set(nodes)];
    if (names.length === 0) return;
    const leases = this.fencing.leasesFor(names);
    if (!leases || !(await this.replicas.holds(this.fencing.holder, leases))) throw new FencedError(names);
  }

  async transaction<T>(work: (tx: UnitOfWork) => Promise<T>): Promise<T> {
    if (!this.savepoints) {
      try {
        return await work(this);
      } catch (error) {
        // Its writes cannot be undone alone: the whole unit runs again, with savepoints. (A nested
        // step that failed set it already: the first failure is the one the unit runs again for.)
        this.stepFailed ??= new StepsRerun(error);
        throw this.stepFailed;
      }
    }
    const name = `step_${++this.depth}`;
    await this.sql.run(`SAVEPOINT ${name}`);
    try {
      const result = await work(this);
      await this.sql.run(`RELEASE SAVEPOINT ${name}`);
      return result;
    } catch (error) {
      // What the step wrote and the connection still holds goes with it.
      this.sql.discard();
      await this.sql.run(`ROLLBACK TO SAVEPOINT ${name}`);
      await this.sql.run(`RELEASE SAVEPOINT ${name}`);
      this.caches.rolledBack();
      this.ahead.clear();
      throw error;
    } finally {
      this.depth--;
    }
  }
}

/** The Store over one SQL database (see the module comment). */
export abstract class SqlStore extends Ports implements Store {
  readonly caches: StoreCaches;
  readonly generations: GenerationStore;
  private readonly conditionListeners = new Set<(id: string) => void>();
  private fencing: Fencing | undefined;
  /** Settles when the unit of work now running (if any) has ended. */
  private tail: Promise<void> = Promise.resolve();

  /** `reads` runs the committed reads; `location` is what `--store` names. */
  constructor(
    reads: Sql,
    readonly location: string,
    caches = new StoreCaches(),
  ) {
    super(reads, caches);
    this.caches = caches;
    this.generations = new SqlGenerationStore(reads, (work) => this.unit(work));
  }

  /** Runs `work` on a connection inside BEGIN … COMMIT (ROLLBACK when it rejects). */
  protected abstract unit<T>(work: (sql: Sql) => Promise<T>): Promise<T>;

  /** `unit`, beside the units of work already queued where the database allows it (see leaseTransaction). */
  protected unitBeside<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    return this.unit(work);
  }

  /**
   * Runs `run` after every earlier call's has ended: a store's units of work never interleave, so
   * the hub's parts (a batch of reconciles, the inbox, the relay) never write the same rows at once.
   */
  protected async oneAtATime<T>(run: () => Promise<T>): Promise<T> {
    const previous = this.tail;
    let done!: () => void;
    this.tail = new Promise<void>((resolve) => {
      done = resolve;
    });
    await previous;
    try {
      return await run();
    } finally {
      done();
    }
  }

  /** Settles once the unit of work now running (if any) has ended. */
  protected settled(): Promise<void> {
    return this.tail;
  }

  abstract close(): Promise<void>;

  async transaction<T>(work: (tx: UnitOfWork) => Promise<T>): Promise<T> {
    try {
      return await this.runUnit(work, false);
    } catch (error) {
      if (!(error instanceof StepsRerun)) throw error;
      return this.runUnit(work, true);
    }
  }

  private async runUnit<T>(work: (tx: UnitOfWork) => Promise<T>, savepoints: boolean): Promise<T> {
    const written = new Set<string>();
    let result: T;
    try {
      result = await this.unit(async (sql) => {
        const tx = new SqlUnitOfWork(sql, this.caches, (id) => written.add(id), this.fencing, savepoints);
        // After a failed step, whatever else fails (on PostgreSQL every later statement does) is its doing.
        const done = await work(tx).catch((error: unknown) => {
          throw tx.stepFailed ?? error;
        });
        // Rows the connection still holds (Sql.write) are sent now, not with the commit: one that
        // fails here may be any step's, so the unit runs again with a savepoint per step, each
        // step's rows sent before it ends, and the step that wrote it fails alone.
        await sql.settle().catch((error: unknown) => {
          if (savepoints) throw error;
          tx.stepFailed ??= new StepsRerun(error);
          throw tx.stepFailed;
        });
        // A step failed and its error was caught: what it wrote cannot be told apart, so nothing commits.
        if (tx.stepFailed) throw tx.stepFailed;
        return done;
      });
    } catch (error) {
      // Rolled back: what the caches learned in it may be ahead of the database.
      this.caches.rolledBack();
      throw error;
    }
    if (written.size > 0)
      for (const id of written) for (const listener of this.conditionListeners) listener(id);
    return result;
  }

  leaseTransaction<T>(work: (tx: Pick<UnitOfWork, "replicas">) => Promise<T>): Promise<T> {
    return this.unitBeside((sql) =>
      work(new SqlUnitOfWork(sql, this.caches, () => undefined, undefined, true)),
    );
  }

  /** No sessions (SQLite): replicas are known gone by their leases alone. */
  async announce(_id: string): Promise<string | undefined> {
    return undefined;
  }

  session(): string | undefined {
    return undefined;
  }

  useFencing(fencing: Fencing): void {
    this.fencing = fencing;
  }

  forgetNode(node: string): void {
    this.caches.forgetNode(node);
  }

  onConditionWrite(listener: (id: string) => void): () => void {
    this.conditionListeners.add(listener);
    return () => this.conditionListeners.delete(listener);
  }
}
