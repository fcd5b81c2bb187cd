/**
 * Tasks: a condition that needs judgement, handed to an agent (a person at a console, or a program)
 * as work. The hub publishes each task on `steward.tasks`; the stream keeps it until a task agent
 * takes it, and a durable push consumer hands each task to one member of the queue group
 * `steward-task-agents`. The agent publishes a claim when it takes the task and a resolution when it
 * is done (or declines it, and the task goes to another member); the hub consumes those durably and
 * records them.
 */
import { jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { TaskEvent } from "../../hub/bus.js";
import type { TaskOutcome as TaskDecision } from "../../hub/records.js";
import { subjects, TASK_AGENTS_CONSUMER, TASKS_STREAM, TASKS_SUBJECT } from "./subjects.js";

/** A task as published; the hub decides its content beyond `id` (condition, evidence, procedure...). */
export interface TaskMessage {
  /** Unique per task; also the message id, so publishing the same task twice delivers it once. */
  id: string;
  [field: string]: unknown;
}

/** A claim, resolution or decline, as the hub receives it (the hub's port, src/hub/bus.ts). */
export type { TaskEvent } from "../../hub/bus.js";

/** Publishes a task for the queue group; resolves once the stream has stored it. */
export async function publishTask(nc: NatsConnection, task: TaskMessage): Promise<void> {
  if (!/^[-_A-Za-z0-9]+$/.test(task.id))
    throw new RangeError(`task id "${task.id}" must be letters, digits, "-" or "_"`);
  await jetstream(nc).publish(TASKS_SUBJECT, JSON.stringify(task), { msgID: task.id });
}

/**
 * A task agent's answer: done (with what it did, and the decision a task of its type needs: `ran`
 * or `rerun` for an interrupted one-shot), or declined (another agent gets the task).
 */
export type TaskOutcome =
  | { outcome: "resolved"; action: string; note?: string; decision?: TaskDecision }
  | { outcome: "declined"; note: string };

export interface TaskAgentOptions {
  nc: NatsConnection;
  /** The task agent's name, recorded as `by`. */
  name: string;
  handle(task: TaskMessage): Promise<TaskOutcome>;
  clock?: () => Date;
}

export interface TaskAgent {
  stop(): Promise<void>;
}

/** Joins the queue group and handles tasks one at a time until stopped. */
export async function serveTasks(options: TaskAgentOptions): Promise<TaskAgent> {
  const js = jetstream(options.nc);
  const clock = options.clock ?? (() => new Date());
  const consumer = await js.consumers.getPushConsumer(TASKS_STREAM, TASK_AGENTS_CONSUMER);
  const messages = await consumer.consume();
  const event = (kind: TaskEvent["kind"], taskId: string, extra: Partial<TaskEvent> = {}) => {
    const body: TaskEvent = { kind, taskId, by: options.name, at: clock().toISOString(), ...extra };
    const subject = kind === "claimed" ? subjects.taskClaimed(taskId) : subjects.taskResolved(taskId);
    return js.publish(subject, JSON.stringify(body));
  };
  const done = (async () => {
    for await (const message of messages) {
      let task: TaskMessage;
      try {
        task = message.json<TaskMessage>();
      } catch {
        message.term("not a task");
        continue;
      }
      // A judgement may take long: keep the task ours while it is being made.
      const keepAlive = setInterval(() => message.working(), 10_000);
      try {
        await event("claimed", task.id);
        const answer = await options.handle(task);
        if (answer.outcome === "resolved")
          await event("resolved", task.id, {
            action: answer.action,
            ...(answer.note ? { note: answer.note } : {}),
            ...(answer.decision ? { outcome: answer.decision } : {}),
          });
        else await event("declined", task.id, { note: answer.note });
        if (answer.outcome === "resolved") message.ack();
        else message.nak(1_000);
      } catch {
        message.nak(5_000);
      } finally {
        clearInterval(keepAlive);
      }
    }
  })();
  return {
    stop: async () => {
      await messages.close();
      await done;
    },
  };
}
