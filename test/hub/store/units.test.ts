/**
 * The unit of work, on every store: what a unit writes commits together or not at all, a nested
 * step fails alone (the unit runs once without savepoints, and again with them when a step failed),
 * reads outside a unit see only what committed, units run one after another without losing a write,
 * and condition listeners hear of a write once it committed.
 */
import { describe, expect, it } from "vitest";
import type { ConditionRecord, IntentRecord } from "../../../src/hub/records.js";
import { StepsRerun } from "../../../src/hub/store/store.js";
import { intentOf, storeKinds } from "./stores.js";

const AT = "2026-11-30T10:00:00.000Z";

function intent(key: string, failures = 0): IntentRecord {
  return intentOf(key, { failures, createdAt: AT, updatedAt: AT });
}

function condition(id: string): ConditionRecord {
  return {
    id,
    type: "NodeSilent",
    subjectKind: "node",
    subject: id,
    status: "open",
    since: AT,
    lastObserved: AT,
    reason: "HeartbeatMissed",
    message: "silent",
    evidence: {},
    tried: [],
    resolver: "operator",
    openedAt: AT,
  };
}

describe.each(storeKinds())("store ($name) - units of work", (kind) => {
  it("store - a unit's writes commit together; one that rejects leaves nothing and passes its error on", async () => {
    const store = await kind.fresh();
    await store.transaction(async (tx) => {
      await tx.intents.save(intent("web@a"));
      await tx.intents.save(intent("web@b"));
    });
    const failure = new Error("decided otherwise");
    await expect(
      store.transaction(async (tx) => {
        await tx.intents.save(intent("web@c"));
        await tx.intents.save({ ...intent("web@a"), failures: 7 });
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect((await store.intents.list()).map((i) => [i.instanceKey, i.failures])).toEqual([
      ["web@a", 0],
      ["web@b", 0],
    ]);
  });

  it("store - a unit whose steps succeed runs once; one whose step failed runs again, where the step fails alone", async () => {
    const store = await kind.fresh();
    let runs = 0;
    await store.transaction(async (tx) => {
      runs++;
      await tx.transaction((step) => step.intents.save(intent("web@a")));
    });
    expect(runs).toBe(1);
    const seen: unknown[] = [];
    runs = 0;
    await store.transaction(async (tx) => {
      runs++;
      await tx.intents.save(intent("web@b"));
      try {
        await tx.transaction(async (step) => {
          await step.intents.save(intent("web@c"));
          throw new Error("this step fails");
        });
      } catch (error) {
        seen.push(error);
        // A caller that catches a step's errors passes the rerun on.
        if (error instanceof StepsRerun) throw error;
      }
      await tx.transaction((step) => step.intents.save(intent("web@d")));
    });
    expect(runs).toBe(2);
    // The first run's step rejected with the rerun (carrying the step's error), the second with its own.
    expect(seen[0]).toBeInstanceOf(StepsRerun);
    expect(((seen[0] as StepsRerun).cause as Error).message).toBe("this step fails");
    expect((seen[1] as Error).message).toBe("this step fails");
    expect((await store.intents.list()).map((i) => i.instanceKey)).toEqual(["web@a", "web@b", "web@d"]);
  });

  it("store - a step whose failure the unit swallows still leaves none of its writes: the unit runs again", async () => {
    const store = await kind.fresh();
    let runs = 0;
    await store.transaction(async (tx) => {
      runs++;
      // Caught and dropped, the rerun too: nothing of the first run may commit all the same.
      await tx
        .transaction(async (step) => {
          await step.intents.save(intent("web@a"));
          throw new Error("dropped");
        })
        .catch(() => undefined);
      await tx.intents.save(intent("web@b"));
    });
    expect(runs).toBe(2);
    expect((await store.intents.list()).map((i) => i.instanceKey)).toEqual(["web@b"]);
  });

  it("store - a nested step rolls back alone and the unit goes on", async () => {
    const store = await kind.fresh();
    await store.transaction(async (tx) => {
      await tx.intents.save(intent("web@a"));
      await expect(
        tx.transaction(async (step) => {
          await step.intents.save(intent("web@b"));
          throw new Error("this step fails");
        }),
      ).rejects.toThrow("this step fails");
      // What the unit wrote before the step, and writes after it, stay.
      expect(await tx.intents.get("web@a", 1)).toBeDefined();
      expect(await tx.intents.get("web@b", 1)).toBeUndefined();
      await tx.transaction((step) => step.intents.save(intent("web@c")));
    });
    expect((await store.intents.list()).map((i) => i.instanceKey)).toEqual(["web@a", "web@c"]);
  });

  it("store - a step rolls back whole, its nested steps with it; a nested step that fails undoes only its own write; one that only read fails without undoing anything", async () => {
    const store = await kind.fresh();
    await store.transaction(async (tx) => {
      // Reads only, then fails: nothing to undo, and the unit goes on.
      await expect(
        tx.transaction(async (step) => {
          await step.intents.get("web@a", 1);
          throw new Error("read, then failed");
        }),
      ).rejects.toThrow("read, then failed");
      // Reads, then a nested step writes and succeeds, then the outer step writes and fails: all of it goes.
      await expect(
        tx.transaction(async (outer) => {
          await outer.intents.get("web@a", 1);
          await outer.transaction((inner) => inner.intents.save(intent("web@b")));
          await outer.intents.save(intent("web@c"));
          throw new Error("outer fails");
        }),
      ).rejects.toThrow("outer fails");
      expect(await tx.intents.get("web@b", 1)).toBeUndefined();
      // A nested step that fails after its parent wrote undoes only its own write.
      await tx.transaction(async (outer) => {
        await outer.intents.save(intent("web@d"));
        await expect(
          outer.transaction(async (inner) => {
            await inner.intents.save(intent("web@e"));
            throw new Error("inner fails");
          }),
        ).rejects.toThrow("inner fails");
      });
    });
    expect((await store.intents.list()).map((i) => i.instanceKey)).toEqual(["web@d"]);
  });

  it("store - reads outside a unit see only what committed; the unit reads its own writes", async () => {
    const store = await kind.fresh();
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inside: IntentRecord | undefined;
    const unit = store.transaction(async (tx) => {
      await tx.intents.save(intent("web@a"));
      inside = await tx.intents.get("web@a", 1);
      await held;
    });
    // The unit is open, its write not committed.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(inside).toBeDefined();
    expect(await store.intents.get("web@a", 1)).toBeUndefined();
    release();
    await unit;
    expect(await store.intents.get("web@a", 1)).toBeDefined();
  });

  it("store - units started together run one after another, and none loses another's write", async () => {
    const store = await kind.fresh();
    await store.transaction((tx) => tx.intents.save(intent("web@a")));
    // Each unit reads the counter and writes it one higher: lost updates would show as a lower count.
    await Promise.all(
      Array.from({ length: 20 }, () =>
        store.transaction(async (tx) => {
          const current = (await tx.intents.get("web@a", 1))!;
          await new Promise((resolve) => setImmediate(resolve));
          await tx.intents.save({ ...current, failures: current.failures + 1 });
        }),
      ),
    );
    expect((await store.intents.get("web@a", 1))?.failures).toBe(20);
  });

  it("store - a condition's listeners hear of its write once the unit committed, and never of a rolled-back one", async () => {
    const store = await kind.fresh();
    const heard: { id: string; committed: boolean }[] = [];
    store.onConditionWrite((id) => {
      heard.push({ id, committed: true });
    });
    await store.transaction(async (tx) => {
      await tx.conditions.insert(condition("n1"));
      expect(heard).toEqual([]);
    });
    expect(heard).toEqual([{ id: "n1", committed: true }]);
    expect(await store.conditions.get("n1")).toMatchObject({ status: "open" });
    await expect(
      store.transaction(async (tx) => {
        await tx.conditions.insert(condition("n2"));
        throw new Error("rolled back");
      }),
    ).rejects.toThrow();
    expect(heard.map((h) => h.id)).toEqual(["n1"]);
  });

  it("store - two stores on one database (two processes) never lose each other's write: a unit waits, is run again on what committed, or fails whole", async () => {
    const store = await kind.fresh();
    const other = await store.reopen();
    await store.transaction((tx) => tx.intents.save(intent("web@a")));
    const increment = (on: typeof store | typeof other) =>
      on.transaction(async (tx) => {
        const current = (await tx.intents.get("web@a", 1))!;
        await new Promise((resolve) => setTimeout(resolve, 10));
        await tx.intents.save({ ...current, failures: current.failures + 1 });
      });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => increment(i % 2 === 0 ? store : other)),
    );
    const committed = outcomes.filter((o) => o.status === "fulfilled").length;
    expect(committed).toBeGreaterThan(0);
    expect((await store.intents.get("web@a", 1))?.failures).toBe(committed);
  });

  it("store - what one connection committed, another reads (a CLI beside the hub, or a second replica)", async () => {
    const store = await kind.fresh();
    const other = await store.reopen();
    await store.transaction((tx) => tx.meta.set("revision_seq", "7"));
    expect(await other.meta.get("revision_seq")).toBe("7");
    await other.transaction((tx) => tx.meta.set("revision_seq", "8"));
    expect(await store.meta.get("revision_seq")).toBe("8");
  });
});
