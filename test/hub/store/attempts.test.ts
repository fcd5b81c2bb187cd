/**
 * Attempts handed over, on every store: the relay reads a batch's outbox rows with their attempts in
 * one query, and saves the batch dispatched — each attempt, and the deadline of each intent whose
 * in-flight attempt it still is — in a few statements, whatever the batch's size.
 */
import { describe, expect, it } from "vitest";
import type { AttemptRecord, IntentRecord } from "../../../src/hub/records.js";
import { attemptOf, intentOf, storeKinds } from "./stores.js";

const AT = "2026-12-04T10:00:00.000Z";
const LEASE = "2026-12-04T10:05:00.000Z";

function attempt(n: number): AttemptRecord {
  return attemptOf(n, AT);
}

function intent(n: number, status: IntentRecord["status"], lastAttemptId: string): IntentRecord {
  return intentOf(`web@n${n}`, { status, lastAttemptId, createdAt: AT, updatedAt: AT });
}

describe.each(storeKinds())("store ($name) - attempts handed over", (kind) => {
  it("store - a batch's outbox rows come with their attempts, in the order asked, those without a row left out", async () => {
    const store = await kind.fresh();
    await store.transaction(async (tx) => {
      for (const n of [1, 2, 3, 4]) await tx.attempts.insert(attempt(n), `{"bundle":${n}}`);
      await tx.attempts.deleteOutbox(["A002", "A004"]);
      await tx.attempts.deleteOutbox([]);
    });
    const rows = await store.attempts.outboxRows(["A003", "A002", "A001", "A004", "A999"]);
    expect(rows.map(({ row, attempt }) => [row.attemptId, row.node, row.bundle, attempt.status])).toEqual([
      ["A003", "n3", '{"bundle":3}', "queued"],
      ["A001", "n1", '{"bundle":1}', "queued"],
    ]);
    expect(rows[0]!.attempt).toEqual(attempt(3));
    expect(await store.attempts.outboxRows([])).toEqual([]);
  });

  it("store - 100 attempts saved dispatched: each attempt, and the deadline of each intent still waiting on it", async () => {
    const store = await kind.fresh();
    const all = Array.from({ length: 100 }, (_, i) => attempt(i + 1));
    await store.transaction(async (tx) => {
      for (const each of all) {
        await tx.attempts.insert(each, "{}");
        // n1's intent has moved on to another attempt; n2's is no longer dispatched.
        const last = each.id === "A001" ? "A-other" : each.id;
        await tx.intents.save(
          intent(Number(each.node.slice(1)), each.id === "A002" ? "blocked" : "dispatched", last),
        );
      }
    });
    await store.transaction((tx) =>
      tx.attempts.saveDispatched(
        all.map((each) => ({
          ...each,
          status: "dispatched" as const,
          dispatchedAt: AT,
          leaseExpiresAt: LEASE,
        })),
      ),
    );
    const attempts = await Promise.all(all.map((each) => store.attempts.get(each.id)));
    expect(attempts.every((a) => a?.status === "dispatched" && a.leaseExpiresAt === LEASE)).toBe(true);
    const deadlines = (await store.intents.list()).map((i) => i.deadlineAt);
    expect(deadlines.filter((d) => d === LEASE).length).toBe(98);
    expect((await store.intents.get("web@n1", 1))?.deadlineAt).toBeUndefined();
    expect((await store.intents.get("web@n2", 1))?.deadlineAt).toBeUndefined();
    expect((await store.intents.get("web@n100", 1))?.updatedAt).toBe(AT);
  });
});
