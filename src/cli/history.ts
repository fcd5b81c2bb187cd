import { resolve } from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("give a whole number above 0");
  return n;
}

/** `steward history`: an assignment's generations from `<state>/hub.db`; exit 1 when there are none. */
export function historyCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  return new Command("history")
    .description("list an assignment's generations: revision, time and spec hash, newest first")
    .argument("<assignment>", "assignment name")
    .option("--node <name>", "only the instance on this node")
    .option("--limit <n>", "at most this many generations", positive, 100)
    .action(async (assignment: string, options: { node?: string; limit: number }) => {
      const { openGenerationStore } = await import("../hub/store/generations.js");
      const { assignmentHistory, renderHistoryText } = await import("../repo/history.js");
      const { store, close } = openGenerationStore(resolve(io.cwd, globals().state), { mustExist: true });
      try {
        const query: { assignment: string; node?: string; limit: number } = {
          assignment,
          limit: options.limit,
        };
        if (options.node) query.node = options.node;
        const rows = assignmentHistory(store, query);
        if (globals().json) io.stdout(`${JSON.stringify(rows, null, 2)}\n`);
        else if (rows.length === 0)
          io.stderr(
            `no generations of assignment "${assignment}"${options.node ? ` on node "${options.node}"` : ""}: check the name, or run steward sync\n`,
          );
        else io.stdout(renderHistoryText(rows));
        exit(rows.length > 0 ? EXIT.ok : EXIT.problems);
      } finally {
        close();
      }
    });
}
