/** Conditions and their tasks, through the helpers the hub uses, on every store. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { conditionViolations, markOpen, markResolved } from "../../src/hub/conditions.js";
import type { Store } from "../../src/hub/store/store.js";
import { claimTask, listTasks, releaseTask, resolveTask } from "../../src/hub/tasks.js";
import { type OpenedStore, storeKinds } from "./store/stores.js";

let n = 0;
const newId = () => `ID${String(++n).padStart(4, "0")}`;

const blocked = (reason: string, message: string, attemptId?: string) => ({
  type: "Blocked" as const,
  subjectKind: "instance" as const,
  subject: "web@n1",
  reason,
  message,
  resolver: "operator" as const,
  ...(attemptId ? { attemptId } : {}),
});

describe.each(storeKinds())("hub - conditions ($name store)", (kind) => {
  let opened: OpenedStore;
  let store: Store;
  beforeEach(async () => {
    opened = await kind.create();
    store = opened.store;
  });
  afterEach(async () => {
    expect(await conditionViolations(store)).toEqual([]);
    await opened.dispose();
  });

  it("hub - since changes only when the reason changes; history records opening, changes and resolution", async () => {
    const opened = await store.transaction((tx) =>
      markOpen(tx, blocked("ImageNotFound", "no digest", "A1"), "2026-01-01T00:00:00.000Z", newId),
    );
    expect(opened.change).toBe("opened");
    const same = await store.transaction((tx) =>
      markOpen(tx, blocked("ImageNotFound", "no digest"), "2026-01-01T00:00:01.000Z", newId),
    );
    expect(same.change).toBe("unchanged");
    const message = await store.transaction((tx) =>
      markOpen(tx, blocked("ImageNotFound", "no digest sha256:abc", "A2"), "2026-01-01T00:01:00.000Z", newId),
    );
    expect(message.change).toBe("updated");
    expect(message.condition.since).toBe("2026-01-01T00:00:00.000Z");
    expect(message.condition.tried).toEqual(["A1", "A2"]);
    const reason = await store.transaction((tx) =>
      markOpen(tx, blocked("ManifestInvalid", "bad manifest"), "2026-01-01T00:02:00.000Z", newId),
    );
    expect(reason.condition.since).toBe("2026-01-01T00:02:00.000Z");
    expect(await store.conditions.list({ status: "open" })).toHaveLength(1);

    const resolved = await store.transaction((tx) =>
      markResolved(
        tx,
        "Blocked",
        "instance",
        "web@n1",
        "2026-01-01T00:03:00.000Z",
        "generation 4 supersedes generation 3",
      ),
    );
    expect(resolved).toMatchObject({
      status: "resolved",
      resolution: "generation 4 supersedes generation 3",
    });
    expect((await store.conditions.history(opened.condition.id)).map((e) => e.event)).toEqual([
      "opened",
      "updated",
      "updated",
      "resolved",
    ]);
    // Resolving what is not open changes nothing; a new occurrence is a new condition.
    expect(
      await store.transaction((tx) =>
        markResolved(tx, "Blocked", "instance", "web@n1", "2026-01-01T00:04:00.000Z", "again"),
      ),
    ).toBeUndefined();
    const reopened = await store.transaction((tx) =>
      markOpen(tx, blocked("ImageNotFound", "again"), "2026-01-01T00:05:00.000Z", newId),
    );
    expect(reopened.condition.id).not.toBe(opened.condition.id);
  });

  it("hub - conditions needing judgement become tasks: listed, claimed, resolved with the action recorded", async () => {
    const { condition } = await store.transaction((tx) =>
      markOpen(tx, blocked("ImageNotFound", "no digest", "A1"), "2026-01-01T00:00:00.000Z", newId),
    );
    await store.transaction((tx) =>
      markOpen(
        tx,
        {
          type: "ProbeFailing",
          subjectKind: "instance",
          subject: "web@n2",
          reason: "ProbeFailing",
          message: "503",
          resolver: "steward",
        },
        "2026-01-01T00:00:00.000Z",
        newId,
      ),
    );
    const [view, ...rest] = await listTasks(store);
    expect(rest).toEqual([]);
    expect(view).toMatchObject({
      task: { type: "Blocked", status: "open" },
      condition: { id: condition.id },
    });
    const taskId = view!.task.id;
    expect(await claimTask(store, taskId, "alice", "2026-01-01T00:01:00.000Z")).toMatchObject({
      status: "claimed",
      claimedBy: "alice",
    });
    await expect(claimTask(store, taskId, "bob", "2026-01-01T00:01:00.000Z")).rejects.toThrow(
      /claimed by alice/,
    );
    await expect(
      resolveTask(store, taskId, "bob", "pushed a fix", "2026-01-01T00:02:00.000Z"),
    ).rejects.toThrow(/only they can resolve it/);
    await expect(resolveTask(store, taskId, "alice", " ", "2026-01-01T00:02:00.000Z")).rejects.toThrow(
      /say what you did/,
    );
    const done = await resolveTask(
      store,
      taskId,
      "alice",
      "published the missing image",
      "2026-01-01T00:02:00.000Z",
    );
    expect(done.task).toMatchObject({
      status: "resolved",
      resolvedBy: "alice",
      action: "published the missing image",
    });
    // Resolving the task does not click the condition away: only observation does.
    expect(done.condition.status).toBe("open");
    expect((await store.conditions.history(condition.id)).at(-1)!.message).toBe(
      `task ${taskId} resolved by alice: published the missing image`,
    );
    await expect(resolveTask(store, "NOPE", "alice", "x", "2026-01-01T00:02:00.000Z")).rejects.toThrow(
      /no task "NOPE"/,
    );
    await store.transaction((tx) =>
      markResolved(
        tx,
        "Blocked",
        "instance",
        "web@n1",
        "2026-01-01T00:03:00.000Z",
        "converged at generation 4",
      ),
    );
    expect((await store.tasks.get(taskId))!.status).toBe("resolved");
  });

  it("hub - a claimant that declines gives the task back, open for another, with the decline in the history", async () => {
    const { condition } = await store.transaction((tx) =>
      markOpen(tx, blocked("ImageNotFound", "no digest"), "2026-01-01T00:00:00.000Z", newId),
    );
    const task = (await store.tasks.ofCondition(condition.id))!;
    await claimTask(store, task.id, "alice", "2026-01-01T00:01:00.000Z");
    await expect(releaseTask(store, task.id, "bob", "not mine", "2026-01-01T00:02:00.000Z")).rejects.toThrow(
      /only its claimant can decline it/,
    );
    const released = await releaseTask(
      store,
      task.id,
      "alice",
      "needs registry access",
      "2026-01-01T00:02:00.000Z",
    );
    expect(released).toEqual({ ...task, status: "open" });
    expect(await store.tasks.get(task.id)).toEqual(released);
    expect((await store.conditions.history(condition.id)).at(-1)!.message).toBe(
      `task ${task.id} declined by alice: needs registry access`,
    );
    expect(await claimTask(store, task.id, "bob", "2026-01-01T00:03:00.000Z")).toMatchObject({
      claimedBy: "bob",
    });
  });

  it("hub - a task closed by observation while claimed still takes its claimant's resolution; nobody else's", async () => {
    const { condition } = await store.transaction((tx) =>
      markOpen(
        tx,
        { ...blocked("NodePaused", "paused"), type: "NodeSilent", subjectKind: "node", subject: "edge-7" },
        "2026-01-01T00:00:00.000Z",
        newId,
      ),
    );
    const task = (await store.tasks.ofCondition(condition.id))!;
    await claimTask(store, task.id, "triage", "2026-01-01T00:01:00.000Z");
    // The claimant resumed the host; observation saw it first.
    await store.transaction((tx) =>
      markResolved(tx, "NodeSilent", "node", "edge-7", "2026-01-01T00:02:00.000Z", "heard from edge-7"),
    );
    expect(await store.tasks.get(task.id)).toMatchObject({ status: "closed", claimedBy: "triage" });
    await expect(resolveTask(store, task.id, "bob", "nothing", "2026-01-01T00:03:00.000Z")).rejects.toThrow(
      /already closed/,
    );
    const done = await resolveTask(
      store,
      task.id,
      "triage",
      "resumed the paused host",
      "2026-01-01T00:03:00.000Z",
    );
    expect(await store.tasks.get(task.id)).toEqual({
      ...done.task,
      status: "resolved",
      resolvedBy: "triage",
      resolvedAt: "2026-01-01T00:03:00.000Z",
      action: "resumed the paused host",
    });
    expect(done.task.closedReason).toBeUndefined();
    expect(done.condition).toMatchObject({ status: "resolved", resolution: "heard from edge-7" });
    await expect(resolveTask(store, task.id, "triage", "again", "2026-01-01T00:04:00.000Z")).rejects.toThrow(
      /already resolved/,
    );
  });

  it("hub - a condition resolved by observation closes its open task; HumanProcedureRequired is closed by the person who did it", async () => {
    const { condition } = await store.transaction((tx) =>
      markOpen(tx, blocked("ImageNotFound", "no digest"), "2026-01-01T00:00:00.000Z", newId),
    );
    await store.transaction((tx) =>
      markResolved(
        tx,
        "Blocked",
        "instance",
        "web@n1",
        "2026-01-01T00:01:00.000Z",
        "converged at generation 4",
      ),
    );
    expect(await store.tasks.ofCondition(condition.id)).toMatchObject({
      status: "closed",
      closedReason: "condition resolved: converged at generation 4",
    });

    const human = await store.transaction((tx) =>
      markOpen(
        tx,
        {
          type: "HumanProcedureRequired",
          subjectKind: "node",
          subject: "db-1",
          reason: "DiskReplacement",
          message: "replace the failed disk",
          procedure: "1. drain db-1  2. swap the disk  3. undrain",
          resolver: "operator",
        },
        "2026-01-01T00:00:00.000Z",
        newId,
      ),
    );
    const task = (await store.tasks.ofCondition(human.condition.id))!;
    const done = await resolveTask(
      store,
      task.id,
      "carol",
      "disk swapped, array rebuilt",
      "2026-01-01T02:00:00.000Z",
    );
    expect(done.condition).toMatchObject({
      status: "resolved",
      resolution: "procedure done by carol: disk swapped, array rebuilt",
    });
  });
});
