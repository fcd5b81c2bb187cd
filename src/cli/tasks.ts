/**
 * `steward tasks [--all]`, `steward tasks claim ID`, `steward tasks resolve ID --action TEXT`:
 * conditions that need judgement, as work for an agent (a person or a program). The action taken
 * is recorded; the condition itself resolves only when observation shows it.
 */
import { Command } from "commander";
import type { TaskOutcome } from "../hub/records.js";
import type { TaskView } from "../hub/tasks.js";
import { UsageError } from "../model/errors.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, clip, type OutputOptions, outputFormat, printResult } from "./output.js";
import { ago, renderTable } from "./table.js";

/** The table of tasks: id, type, subject, status, since, attempt and message (`wide`: not cut). */
export function renderTasks(views: readonly TaskView[], now: Date, wide = false): string {
  return renderTable(
    ["ID", "TYPE", "SUBJECT", "STATUS", "SINCE", "ATTEMPT", "MESSAGE"],
    views.map(({ task, condition }) => [
      task.id,
      task.type,
      `${task.subjectKind} ${task.subject}`,
      task.status === "claimed" ? `claimed by ${task.claimedBy}` : task.status,
      ago(task.createdAt, now),
      condition.attemptId ?? "-",
      clip(condition.message, 80, wide),
    ]),
  );
}

const TASK_OUTCOMES: readonly TaskOutcome[] = ["ran", "rerun", "resume"];

function agentName(io: CliIo, as?: string): string {
  return as ?? io.env.STEWARD_OPERATOR ?? io.env.USER ?? io.env.LOGNAME ?? "operator";
}

export function tasksCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  const open = async () => {
    const { statePaths, openHubStore } = await import("./hub-state.js");
    const paths = statePaths(io, globals());
    return { paths, store: await openHubStore(paths) };
  };
  const command = new Command("tasks")
    .description("list tasks (conditions that need judgement); claim and resolve them")
    .option("--all", "include resolved and closed tasks");
  addOutputOptions(command).action(async (options: OutputOptions & { all?: boolean }) => {
    const { listTasks } = await import("../hub/tasks.js");
    const { store } = await open();
    try {
      const views = await listTasks(store, { all: options.all ?? false });
      await printResult(io, outputFormat(options, globals()), views, (wide) =>
        views.length === 0 ? "no open tasks\n" : renderTasks(views, new Date(), wide),
      );
      exit(EXIT.ok);
    } finally {
      await store.close();
    }
  });
  command
    .command("claim")
    .description("claim a task for yourself (or --as NAME)")
    .argument("<id>", "task id (or its last characters)")
    .option("--as <name>", "who claims it")
    .action(async (id: string, _local: unknown, self: Command) => {
      // -o and --json belong to `tasks` and are read with it.
      const options = self.optsWithGlobals<OutputOptions & { as?: string }>();
      const { claimTask } = await import("../hub/tasks.js");
      const { store } = await open();
      try {
        const task = await claimTask(store, id, agentName(io, options.as), new Date().toISOString());
        await printResult(
          io,
          outputFormat(options, globals()),
          { task },
          () =>
            `task ${task.id} (${task.type} on ${task.subjectKind} ${task.subject}) claimed by ${task.claimedBy}\n`,
        );
        exit(EXIT.ok);
      } finally {
        await store.close();
      }
    });
  command
    .command("resolve")
    .description("resolve a task, recording the action you took")
    .argument("<id>", "task id (or its last characters)")
    .requiredOption("--action <text>", "what you did")
    .option(
      "--outcome <decision>",
      "the decision the answer carries: for OneShotInterrupted (required), ran (record it as done: nothing runs again) or rerun (run it once more); for RolloutPaused (optional), resume (go on past its failures, as `steward rollout resume`)",
    )
    .option("--as <name>", "who resolves it")
    .action(async (id: string, _local: unknown, self: Command) => {
      const options = self.optsWithGlobals<
        OutputOptions & { action: string; as?: string; outcome?: string }
      >();
      const { resolveTask } = await import("../hub/tasks.js");
      const { nudgeHub } = await import("./hub-state.js");
      const { paths, store } = await open();
      let scope: { node?: string; revision?: string } = {};
      try {
        if (options.outcome !== undefined && !TASK_OUTCOMES.includes(options.outcome as TaskOutcome))
          throw new UsageError(
            `--outcome must be one of ${TASK_OUTCOMES.join(", ")} (got "${options.outcome}")`,
          );
        const { task, condition } = await resolveTask(
          store,
          id,
          agentName(io, options.as),
          options.action,
          new Date().toISOString(),
          options.outcome as TaskOutcome | undefined,
        );
        if (condition.node) scope = { node: condition.node };
        else if (condition.type === "RolloutPaused" && condition.revision)
          scope = { revision: condition.revision };
        await printResult(
          io,
          outputFormat(options, globals()),
          { task, condition },
          () =>
            `task ${task.id} resolved by ${task.resolvedBy}${task.outcome ? ` (--outcome ${task.outcome})` : ""}: ${task.action}\n${
              condition.status === "open"
                ? `condition ${condition.type} on ${condition.subjectKind} ${condition.subject} stays open until observation shows it resolved\n`
                : `condition ${condition.type} closed\n`
            }`,
        );
      } finally {
        await store.close();
      }
      await nudgeHub(paths, scope);
      exit(EXIT.ok);
    });
  return command;
}
