/**
 * `steward tasks [--all]`, `steward tasks claim ID`, `steward tasks resolve ID --action TEXT`:
 * conditions that need judgement, as work for an agent (a person or a program). The action taken
 * is recorded; the condition itself resolves only when observation shows it.
 */
import { Command } from "commander";
import type { TaskOutcome } from "../hub/records.js";
import { UsageError } from "../model/errors.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";

const TASK_OUTCOMES: readonly TaskOutcome[] = ["ran", "rerun"];

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
    .option("--all", "include resolved and closed tasks")
    .option("--json", "machine-readable output")
    .action(async (options: { all?: boolean; json?: boolean }) => {
      const { listTasks } = await import("../hub/tasks.js");
      const { renderTable, ago } = await import("./table.js");
      const { store } = await open();
      try {
        const views = listTasks(store, { all: options.all ?? false });
        if (options.json || globals().json) io.stdout(`${JSON.stringify(views, null, 2)}\n`);
        else if (views.length === 0) io.stdout("no open tasks\n");
        else
          io.stdout(
            renderTable(
              ["ID", "TYPE", "SUBJECT", "STATUS", "SINCE", "ATTEMPT", "MESSAGE"],
              views.map(({ task, condition }) => [
                task.id,
                task.type,
                `${task.subjectKind} ${task.subject}`,
                task.status === "claimed" ? `claimed by ${task.claimedBy}` : task.status,
                ago(task.createdAt, new Date()),
                condition.attemptId ?? "-",
                condition.message.length > 80 ? `${condition.message.slice(0, 79)}…` : condition.message,
              ]),
            ),
          );
        exit(EXIT.ok);
      } finally {
        store.close();
      }
    });
  command
    .command("claim")
    .description("claim a task for yourself (or --as NAME)")
    .argument("<id>", "task id (or its last characters)")
    .option("--as <name>", "who claims it")
    .action(async (id: string, options: { as?: string }) => {
      const { claimTask } = await import("../hub/tasks.js");
      const { store } = await open();
      try {
        const task = claimTask(store, id, agentName(io, options.as), new Date().toISOString());
        io.stdout(
          `task ${task.id} (${task.type} on ${task.subjectKind} ${task.subject}) claimed by ${task.claimedBy}\n`,
        );
        exit(EXIT.ok);
      } finally {
        store.close();
      }
    });
  command
    .command("resolve")
    .description("resolve a task, recording the action you took")
    .argument("<id>", "task id (or its last characters)")
    .requiredOption("--action <text>", "what you did")
    .option(
      "--outcome <decision>",
      "the decision a task of its type needs: for OneShotInterrupted, ran (record it as done: nothing runs again) or rerun (run it once more)",
    )
    .option("--as <name>", "who resolves it")
    .action(async (id: string, options: { action: string; as?: string; outcome?: string }) => {
      const { resolveTask } = await import("../hub/tasks.js");
      const { nudgeHub } = await import("./hub-state.js");
      const { paths, store } = await open();
      let node: string | undefined;
      try {
        if (options.outcome !== undefined && !TASK_OUTCOMES.includes(options.outcome as TaskOutcome))
          throw new UsageError(
            `--outcome must be one of ${TASK_OUTCOMES.join(", ")} (got "${options.outcome}")`,
          );
        const { task, condition } = resolveTask(
          store,
          id,
          agentName(io, options.as),
          options.action,
          new Date().toISOString(),
          options.outcome as TaskOutcome | undefined,
        );
        node = condition.node;
        io.stdout(
          `task ${task.id} resolved by ${task.resolvedBy}${task.outcome ? ` (--outcome ${task.outcome})` : ""}: ${task.action}\n${
            condition.status === "open"
              ? `condition ${condition.type} on ${condition.subjectKind} ${condition.subject} stays open until observation shows it resolved\n`
              : `condition ${condition.type} closed\n`
          }`,
        );
      } finally {
        store.close();
      }
      await nudgeHub(paths, node ? { node } : {});
      exit(EXIT.ok);
    });
  return command;
}
