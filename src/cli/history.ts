import { Command, InvalidArgumentError } from "commander";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("give a whole number above 0");
  return n;
}

/** `steward history`: an assignment's generations from the hub's store; exit 2 when there are none (an unknown name). */
export function historyCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const command = new Command("history")
    .description("list an assignment's generations: revision, time and spec hash, newest first")
    .argument("<assignment>", "assignment name")
    .option("--node <name>", "only the instance on this node")
    .option("--limit <n>", "at most this many generations", positive, 100);
  return addOutputOptions(command).action(
    async (assignment: string, options: OutputOptions & { node?: string; limit: number }) => {
      const { statePaths, openHubStore } = await import("./hub-state.js");
      const { generationOutcomes } = await import("../hub/views.js");
      const { assignmentHistory, renderHistoryText } = await import("../repo/history.js");
      const store = await openHubStore(statePaths(io, globals()), { syncFirst: true });
      try {
        const query: { assignment: string; node?: string; limit: number } = {
          assignment,
          limit: options.limit,
        };
        if (options.node) query.node = options.node;
        // What became of each generation (outcome, failure class, correlation id), from the hub's records.
        const rows = await assignmentHistory(store.generations, query, generationOutcomes(store));
        if (rows.length === 0) {
          const { NotFoundError } = await import("../model/errors.js");
          throw new NotFoundError(
            `no generations of assignment "${assignment}"${options.node ? ` on node "${options.node}"` : ""}: check the name (\`steward get assignments\`), or run steward sync`,
          );
        }
        await printResult(io, outputFormat(options, globals()), rows, () => renderHistoryText(rows));
        exit(EXIT.ok);
      } finally {
        await store.close();
      }
    },
  );
}
