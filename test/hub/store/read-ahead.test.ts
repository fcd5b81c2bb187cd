/**
 * Reading ahead for a batch of reconciles, on every store: after `readAhead(keys)`, a unit of work
 * reads those instances' desired state, intents, last attempts, nodes, reports, observations and
 * open conditions exactly as it would from the database — its own writes included, a rolled-back
 * step's excluded — and, on SQLite where the statements can be counted, without a query.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import type { AttemptRecord, ConditionRecord, IntentRecord } from "../../../src/hub/records.js";
import type { Sql } from "../../../src/hub/store/sql/sql.js";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import { StepsRerun, type Store, type StoreReads } from "../../../src/hub/store/store.js";
import type { Report } from "../../../src/model/generated.js";
import { generation, intentOf, storeKinds } from "./stores.js";

const AT = "2026-12-04T10:00:00.000Z";
const KEYS = ["web@a", "web@b", "db@a", "gone@a"];

function intent(
  key: string,
  generation: number,
  status: IntentRecord["status"],
  last?: string,
): IntentRecord {
  return intentOf(key, {
    generation,
    revision: `r${generation}`,
    hash: `sha256:${key}-${generation}`,
    status,
    failures: 1,
    createdAt: AT,
    updatedAt: AT,
    ...(last ? { lastAttemptId: last } : {}),
  });
}

function attempt(id: string, key: string, generation: number): AttemptRecord {
  const [assignment, node] = key.split("@") as [string, string];
  return {
    id,
    instanceKey: key,
    generation,
    assignment,
    node,
    status: "dispatched",
    evidence: { step: "apply" },
    createdAt: AT,
    dispatchedAt: AT,
    leaseExpiresAt: AT,
  };
}

function condition(id: string, subject: string, type: ConditionRecord["type"] = "Stuck"): ConditionRecord {
  return {
    id,
    type,
    subjectKind: "instance",
    subject,
    status: "open",
    since: AT,
    lastObserved: AT,
    reason: "Test",
    message: "m",
    evidence: {},
    tried: [],
    resolver: "steward",
    openedAt: AT,
    generation: 2,
  };
}

const report = (node: string, takenAt: string, generation: number): Report => ({
  apiVersion: "steward.dev/v1" as const,
  kind: "Report" as const,
  node,
  takenAt,
  seq: 1,
  agent: { version: "test" },
  instances: [
    {
      assignment: "web",
      generation,
      hash: `sha256:web@${node}-${generation}`,
      state: "running" as const,
      converged: true,
      resources: [],
      probes: [],
    },
  ],
});

/**
 * A fleet where web@a and db@a are at generation 2 with generation 1 still live, web@b is at
 * generation 1, and gone@a was never declared: every kind of row a reconcile reads.
 */
async function seeded(store: Store): Promise<void> {
  const revision = (sha: string) => ({
    sha: sha.padEnd(40, "0"),
    authorName: "A",
    authorEmail: "a@example.test",
    message: sha,
    committedAt: AT,
  });
  const at = new Date(AT);
  await store.generations.recordRevision({
    branch: "main",
    revision: revision("a"),
    outcome: "applied",
    generations: [generation("web@a", 1), generation("web@b", 1), generation("db@a", 1)],
    at,
  });
  await store.generations.recordRevision({
    branch: "main",
    revision: revision("b"),
    outcome: "applied",
    generations: [generation("web@a", 2), generation("db@a", 2)],
    at,
  });
  await store.transaction(async (tx) => {
    await tx.nodes.upsert({ name: "a", transport: "local", spec: {} as never, revision: "r1" });
    await tx.attempts.insert(attempt("A1", "web@a", 1), "{}");
    await tx.attempts.insert(attempt("A2", "web@a", 2), "{}");
    await tx.intents.save(intent("web@a", 1, "dispatched", "A1"));
    await tx.intents.save(intent("web@a", 2, "backoff", "A2"));
    await tx.intents.save(intent("db@a", 1, "superseded"));
    await tx.intents.save(intent("web@b", 1, "converged"));
    await tx.conditions.insert(condition("C1", "web@a"));
    await tx.conditions.insert({
      ...condition("C2", "web@a", "ProbeFailing"),
      openedAt: "2026-12-04T09:00:00.000Z",
    });
    await tx.conditions.insert({ ...condition("C3", "db@a"), status: "resolved" });
    await tx.observations.saveReport(report("a", AT, 1), AT);
  });
}

/** Everything a reconcile of `key` reads, as it reads it. */
async function reads(tx: StoreReads, key: string) {
  const desired = await tx.desired.instance(key);
  const generation = desired?.generation ?? 1;
  const current = await tx.intents.get(key, generation);
  const node = desired ? await tx.nodes.get(desired.node) : undefined;
  return {
    desired,
    current,
    older: await tx.intents.olderLive(key, generation),
    superseded: await tx.intents.get(key, 1),
    attempt: current?.lastAttemptId ? await tx.attempts.get(current.lastAttemptId) : undefined,
    node,
    report: await tx.observations.reportOf(key.split("@")[1]!),
    observation: await tx.observations.get(key),
    open: await tx.conditions.openOf("instance", key),
    stuck: await tx.conditions.findOpen("Stuck", "instance", key),
    probe: await tx.conditions.findOpen("ProbeFailing", "instance", key, "Test", 2),
    none: await tx.conditions.findOpen("ProbeFailing", "instance", key, "Other"),
    waitingOnNode: await tx.intents.keysOfNode(key.split("@")[1]!, ["waiting"]),
  };
}

describe.each(storeKinds())("store ($name) - reading ahead", (kind) => {
  it("store - what a unit reads after reading ahead is what it reads without", async () => {
    const store = await kind.fresh();
    await seeded(store);
    const read = (ahead: boolean) =>
      store.transaction(async (tx) => {
        if (ahead) await tx.readAhead(KEYS);
        const all = [];
        for (const key of KEYS) all.push(await reads(tx, key));
        return all;
      });
    const plain = await read(false);
    const ahead = await read(true);
    expect(ahead).toEqual(plain);
    // The seed reads what it should: a check that the comparison compares something.
    expect(plain[0]!.older.map((i) => i.generation)).toEqual([1]);
    expect(plain[0]!.open.map((c) => c.id)).toEqual(["C2", "C1"]);
    expect(plain[0]!.attempt?.id).toBe("A2");
    expect(plain[2]!.older).toEqual([]);
    expect(plain[3]!.desired).toBeUndefined();
  });

  it("store - what a batch of events reads after reading it ahead is what it reads without, and a save keeps it true", async () => {
    const store = await kind.fresh();
    await seeded(store);
    const waiting: IntentRecord["status"][] = ["dispatched", "backoff"];
    // Each read is rolled back: both start from the same rows.
    const undone = new Error("rolled back");
    const read = async (ahead: boolean) => {
      let seen: unknown;
      await store
        .transaction(async (tx) => {
          seen = await events(tx, ahead);
          throw undone;
        })
        .catch((error: unknown) => {
          if (error !== undone) throw error;
        });
      return seen as Awaited<ReturnType<typeof events>>;
    };
    const events = async (tx: Parameters<Parameters<Store["transaction"]>[0]>[0], ahead: boolean) => {
      if (ahead) await tx.readAheadEvents({ attempts: ["A1", "A2", "A9"], reported: ["a", "b"], waiting });
      const before = {
        attempts: [await tx.attempts.get("A1"), await tx.attempts.get("A2"), await tx.attempts.get("A9")],
        a: await tx.intents.keysOfNode("a", waiting),
        b: await tx.intents.keysOfNode("b", waiting),
      };
      // A result settles web@a's generation 1: node a has one intent fewer waiting; web@b backs
      // off: node b has one more.
      await tx.intents.save({ ...intent("web@a", 1, "dispatched", "A1"), status: "converged" });
      await tx.intents.save(intent("web@b", 1, "backoff"));
      const changed = await tx.observations.saveReport(report("a", "2026-12-04T11:00:00.000Z", 2), AT);
      // Built before it, delivered after it: not the latest report.
      const older = await tx.observations.saveReport(report("a", "2026-12-04T10:30:00.000Z", 1), AT);
      return {
        before,
        after: await tx.intents.keysOfNode("a", waiting),
        afterB: await tx.intents.keysOfNode("b", waiting),
        changed,
        older,
        latest: await tx.observations.reportOf("a"),
        observed: await tx.observations.get("web@a"),
      };
    };
    const plain = await read(false);
    const ahead = await read(true);
    expect(ahead).toEqual(plain);
    expect(plain.before.attempts.map((a) => a?.id)).toEqual(["A1", "A2", undefined]);
    expect(plain.before.a).toEqual(["web@a", "web@a"]);
    expect(plain.before.b).toEqual([]);
    expect(plain.after).toEqual(["web@a"]);
    expect(plain.afterB).toEqual(["web@b"]);
    expect(plain.changed).toEqual(["web@a"]);
    expect(plain.older).toBeUndefined();
    expect(plain.latest).toEqual({ takenAt: "2026-12-04T11:00:00.000Z", seq: 1 });
    expect(plain.observed?.generation).toBe(2);
  });

  it("store - a unit reads its own writes after reading ahead, and a rolled-back step's no more", async () => {
    const store = await kind.fresh();
    await seeded(store);
    const seen = await store.transaction(async (tx) => {
      await tx.readAhead(KEYS);
      await tx.intents.save({ ...intent("web@a", 1, "superseded", "A1"), supersededBy: 2 });
      await tx.attempts.save({ ...attempt("A1", "web@a", 1), status: "superseded" });
      await tx.attempts.insert(attempt("A3", "web@a", 2), "{}");
      const waitingBefore = await tx.intents.keysOfNode("a", ["waiting"]);
      await tx.intents.save(intent("web@a", 2, "waiting"));
      await tx.intents.save(intent("db@a", 2, "waiting"));
      const waitingBoth = await tx.intents.keysOfNode("a", ["waiting"]);
      await tx.intents.save(intent("web@a", 2, "dispatched", "A3"));
      const waitingAfter = await tx.intents.keysOfNode("a", ["waiting"]);
      const older = await tx.intents.olderLive("web@a", 2);
      const saved = await tx.intents.get("web@a", 2);
      await tx.attempts.saveDispatched([
        {
          ...attempt("A3", "web@a", 2),
          leaseExpiresAt: "2026-12-04T11:00:00.000Z",
        },
      ]);
      await tx.observations.saveReport(report("a", "2026-12-04T10:05:00.000Z", 2), AT);
      await tx.nodes.setDraining("a", true, { by: "alice", at: AT });
      await tx.conditions.save({ ...condition("C1", "web@a"), status: "resolved", resolvedAt: AT });
      await tx.conditions.insert(condition("C4", "web@b"));
      return {
        waiting: [waitingBefore, waitingBoth, waitingAfter],
        older,
        saved: saved?.lastAttemptId,
        current: await tx.intents.get("web@a", 2),
        a1: (await tx.attempts.get("A1"))?.status,
        a3: (await tx.attempts.get("A3"))?.status,
        report: (await tx.observations.reportOf("a"))?.takenAt,
        observed: (await tx.observations.get("web@a"))?.generation,
        dropped: await tx.observations.get("db@a"),
        draining: (await tx.nodes.get("a"))?.draining,
        openA: (await tx.conditions.openOf("instance", "web@a")).map((c) => c.id),
        openB: (await tx.conditions.openOf("instance", "web@b")).map((c) => c.id),
      };
    });
    expect(seen).toEqual({
      waiting: [[], ["db@a", "web@a"], ["db@a"]],
      older: [],
      saved: "A3",
      current: expect.objectContaining({
        status: "dispatched",
        lastAttemptId: "A3",
        deadlineAt: "2026-12-04T11:00:00.000Z",
      }),
      a1: "superseded",
      a3: "dispatched",
      report: "2026-12-04T10:05:00.000Z",
      observed: 2,
      dropped: undefined,
      draining: true,
      openA: ["C2"],
      openB: ["C4"],
    });

    // A step that fails rolls back alone (the unit runs again with savepoints): what it wrote is
    // not read afterwards, though it was read ahead before.
    const failures: number[] = [];
    await store.transaction(async (tx) => {
      await tx.readAhead(["web@b"]);
      await tx
        .transaction(async (step) => {
          await step.intents.save({ ...intent("web@b", 1, "blocked"), failures: 9 });
          await step.attempts.save({ ...attempt("A2", "web@a", 2), status: "failed" as never });
          throw new Error("decided otherwise");
        })
        .catch((error: unknown) => {
          if (error instanceof StepsRerun) throw error;
        });
      failures.push((await tx.intents.get("web@b", 1))!.failures);
      failures.push((await tx.attempts.get("A2"))!.status === "dispatched" ? 0 : 1);
    });
    expect(failures).toEqual([1, 0]);
  });
});

describe.each(storeKinds())("store ($name) - what a unit found absent", (kind) => {
  it("store - a rollout with none held, a node with none waiting, no pause, no decision: each holds until the unit writes one", async () => {
    const store = await kind.fresh();
    await seeded(store);
    const seen = await store.transaction(async (tx) => {
      const asked = async () => ({
        held: await tx.rollouts.anyHeld("web", "r1"),
        heldByPause: await tx.rollouts.anyHeld("web", "r1", ["paused"]),
        waiting: await tx.intents.keysOfNode("b", ["waiting"]),
        paused: (await tx.conditions.findOpen("RolloutPaused", "rollout", "web@r1"))?.id,
        decision: (await tx.rollouts.decision("web", "r1"))?.decision,
        failed: await tx.rollouts.countFailed("web", "r1"),
      });
      const before = [await asked(), await asked()];
      // An intent saved in another status ends none of them.
      await tx.intents.save(intent("web@b", 1, "dispatched"));
      const unrelated = await asked();
      await tx.intents.save({ ...intent("web@b", 1, "held"), holdReason: "paused" });
      await tx.intents.save(intent("web@a", 1, "stuck"));
      const afterStuck = await tx.rollouts.countFailed("web", "r1");
      // A failure on a drained node does not count, and counts again once the drain ends.
      await tx.nodes.setDraining("a", true, { by: "alice", at: AT });
      const afterDrain = await tx.rollouts.countFailed("web", "r1");
      await tx.nodes.setDraining("a", false, { by: "alice", at: AT });
      const afterUndrain = await tx.rollouts.countFailed("web", "r1");
      await tx.intents.save(intent("web@a", 1, "waiting"));
      await tx.conditions.insert({ ...condition("P1", "web@r1", "RolloutPaused"), subjectKind: "rollout" });
      await tx.rollouts.recordDecision({
        assignment: "web",
        revision: "r1",
        decision: "pause",
        by: "alice",
        reason: "wait",
        at: AT,
      });
      const afterHeld = {
        held: await tx.rollouts.anyHeld("web", "r1"),
        heldByPause: await tx.rollouts.anyHeld("web", "r1", ["paused"]),
      };
      await tx.intents.save(intent("web@b", 1, "waiting"));
      return { before, unrelated, afterHeld, afterStuck, afterDrain, afterUndrain, after: await asked() };
    });
    const none = {
      held: false,
      heldByPause: false,
      waiting: [],
      paused: undefined,
      decision: undefined,
      failed: 0,
    };
    expect(seen).toEqual({
      before: [none, none],
      unrelated: none,
      afterHeld: { held: true, heldByPause: true },
      afterStuck: 1,
      afterDrain: 0,
      afterUndrain: 1,
      after: {
        held: false,
        heldByPause: false,
        waiting: ["web@b"],
        paused: "P1",
        decision: "pause",
        failed: 0,
      },
    });
  });
});

/** A SQLite store that counts the statements its units of work run. */
class CountingStore extends SqliteStore {
  /** Statements a unit waited for: reads, and writes whose outcome it reads (`run`). */
  statements = 0;
  /** Rows written whole (`write`): on PostgreSQL, held and sent together. */
  writes = 0;

  protected override unit<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    return super.unit((sql) => {
      const count =
        <A extends unknown[], R>(run: (...args: A) => Promise<R>) =>
        (...args: A) => {
          this.statements++;
          return run(...args);
        };
      return work({
        dialect: sql.dialect,
        get: count(sql.get.bind(sql)),
        all: count(sql.all.bind(sql)),
        run: count(sql.run.bind(sql)),
        write: (statement, row) => {
          this.writes++;
          return sql.write(statement, row);
        },
        settle: () => sql.settle(),
        discard: () => sql.discard(),
      });
    });
  }
}

/** A seeded SQLite store that counts statements, in a directory removed when the test finishes. */
async function seededCountingStore(): Promise<{ dir: string; store: CountingStore }> {
  const dir = mkdtempSync(join(tmpdir(), "steward-read-ahead-"));
  const store = new CountingStore(join(dir, "hub.db"));
  onTestFinished(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  await seeded(store);
  return { dir, store };
}

describe("store (sqlite) - reading ahead", () => {
  it("store - a batch's reads cost a query per table for the whole batch, and none per instance", async () => {
    const { store } = await seededCountingStore();
    const counted = async (ahead: boolean) => {
      store.statements = 0;
      await store.transaction(async (tx) => {
        if (ahead) await tx.readAhead(KEYS);
        for (const key of KEYS) await reads(tx, key);
      });
      return store.statements;
    };
    const plain = await counted(false);
    const ahead = await counted(true);
    // Without: about ten queries per instance. With: the eight of reading ahead, and what is not
    // read ahead: db@a's superseded generation 1, and the intents of gone@a (no desired instance).
    expect(plain).toBeGreaterThanOrEqual(KEYS.length * 8);
    expect(ahead).toBeLessThanOrEqual(8 + KEYS.length);
  });

  it("store - a batch of events costs four queries, whatever the number of results and reports", async () => {
    const { dir, store } = await seededCountingStore();
    // Another process wrote the observations: this one knows none of them yet.
    await store.close();
    const fresh = new CountingStore(join(dir, "hub.db"));
    onTestFinished(() => fresh.close());
    const waiting: IntentRecord["status"][] = ["ambiguous", "verifying"];
    const events = { attempts: ["A1", "A2"], reported: ["a", "b", "c"] };
    // Each run is rolled back: both start from the same rows.
    const undone = new Error("rolled back");
    const counted = async (ahead: boolean) => {
      fresh.statements = 0;
      fresh.writes = 0;
      await fresh
        .transaction(async (tx) => {
          if (ahead) await tx.readAheadEvents({ ...events, waiting });
          for (const id of events.attempts) await tx.attempts.get(id);
          for (const node of events.reported) {
            await tx.intents.keysOfNode(node, waiting);
            await tx.observations.saveReport(report(node, "2026-12-04T11:00:00.000Z", 3), AT);
            // An older report of the node, after it, in the same batch: nothing to write.
            await tx.observations.saveReport(report(node, "2026-12-04T10:30:00.000Z", 2), AT);
          }
          throw undone;
        })
        .catch((error: unknown) => {
          if (error !== undone) throw error;
        });
      return { statements: fresh.statements, writes: fresh.writes };
    };
    // Without: per result its attempt; per node the waiting intents, its observed assignments and
    // each report's upsert (which says whether it was newer); its observation written whole.
    expect(await counted(false)).toEqual({ statements: 2 + 3 * 4, writes: 3 });
    // With: the four queries of reading ahead; the newer report's row is written whole too, the
    // older one is known older without asking.
    expect(await counted(true)).toEqual({ statements: 4, writes: 3 * 2 });
  });
});
