/**
 * Rows a unit of work writes whole (intents, attempts with their outbox rows, observations), on
 * every store: PostgreSQL holds them and sends them as multi-row statements before the unit's next
 * statement, SQLite writes them at once, and nothing else may tell the two apart — a unit reads
 * what it wrote, in the order it wrote it, and a row that breaks a constraint fails the step that
 * wrote it, alone.
 */
import { describe, expect, it } from "vitest";
import type { AttemptRecord, IntentRecord } from "../../../src/hub/records.js";
import { StepsRerun } from "../../../src/hub/store/store.js";
import { attemptOf, intentOf, storeKinds } from "./stores.js";

const AT = "2026-12-06T10:00:00.000Z";

function attempt(n: number, fields: Partial<AttemptRecord> = {}): AttemptRecord {
  return attemptOf(n, AT, fields, 4);
}

function intent(n: number, fields: Partial<IntentRecord> = {}): IntentRecord {
  return intentOf(`web@n${n}`, { createdAt: AT, updatedAt: AT, ...fields });
}

describe.each(storeKinds())("store ($name) - rows written whole", (kind) => {
  it("store - a unit reads what it wrote, as it wrote it last; 300 attempts, their outbox rows and intents commit together", async () => {
    const store = await kind.fresh();
    const counts = await store.transaction(async (tx) => {
      for (let n = 1; n <= 300; n++) {
        await tx.attempts.insert(attempt(n), `{"n":${n}}`);
        await tx.intents.save(intent(n, { status: "dispatched", lastAttemptId: attempt(n).id }));
      }
      // Written again in the same unit: the last write is what the unit and the store see.
      await tx.attempts.save(attempt(7, { status: "dispatched", dispatchedAt: AT }));
      await tx.intents.save(intent(7, { status: "converged", failures: 2 }));
      await tx.intents.save(intent(7, { status: "converged", failures: 3 }));
      await tx.attempts.save(attempt(8, { status: "succeeded", finishedAt: AT }));
      await tx.attempts.deleteOutbox([attempt(9).id]);
      return {
        // Reads that go to the database, not to anything the unit read ahead.
        attempts: await tx.attempts.countsByStatus(),
        intents: await tx.intents.countsByStatus(),
        seventh: await tx.attempts.ofInstance("web@n7"),
      };
    });
    expect(counts.attempts).toEqual({ queued: 298, dispatched: 1, succeeded: 1 });
    expect(counts.intents).toEqual({ dispatched: 299, converged: 1 });
    expect(counts.seventh.map((a) => a.status)).toEqual(["dispatched"]);
    expect(await store.attempts.countsByStatus()).toEqual(counts.attempts);
    expect((await store.intents.list({ node: "n7" })).map((i) => [i.status, i.failures])).toEqual([
      ["converged", 3],
    ]);
    const outbox = await store.attempts.outbox();
    expect(outbox).toHaveLength(299);
    expect(outbox.find((row) => row.attemptId === "A0300")).toMatchObject({
      node: "n300",
      bundle: '{"n":300}',
    });
  });

  it("store - a row that breaks a constraint fails the step that wrote it, alone, however late the store sends it", async () => {
    const store = await kind.fresh();
    await store.transaction((tx) => tx.attempts.insert(attempt(1), "{}"));
    let runs = 0;
    const failures: unknown[] = [];
    await store.transaction(async (tx) => {
      runs++;
      failures.length = 0;
      // As the inbox does: each event a step; a failed step is logged, the next goes on.
      const step = async (work: Parameters<typeof tx.transaction>[0]) => {
        try {
          await tx.transaction(work);
        } catch (error) {
          if (error instanceof StepsRerun) throw error;
          failures.push(error);
        }
      };
      await step((s) => s.intents.save(intent(1, { status: "converged" })));
      await step(async (s) => {
        await s.intents.save(intent(2, { status: "dispatched" }));
        // The same attempt id again: its primary key is taken.
        await s.attempts.insert(attempt(1, { instanceKey: "web@n2", node: "n2" }), "{}");
        await s.intents.save(intent(3, { status: "dispatched" }));
      });
      await step((s) => s.intents.save(intent(4, { status: "converged" })));
    });
    // Once without savepoints, once again with them, where the step failed alone.
    expect(runs).toBe(2);
    expect(failures).toHaveLength(1);
    expect(String(failures[0])).toMatch(/unique|duplicate/i);
    expect((await store.intents.list()).map((i) => i.instanceKey)).toEqual(["web@n1", "web@n4"]);
    expect(await store.attempts.ofInstance("web@n2")).toEqual([]);
    expect((await store.attempts.outbox()).map((row) => row.attemptId)).toEqual(["A0001"]);
  });
});
