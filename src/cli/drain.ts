/**
 * `steward drain NODE` / `steward undrain NODE`: stop (or resume) dispatching to a node. Draining
 * changes availability, not intent: desired state is kept and reconciliation resumes on undrain.
 * To stop a node's services, write `state: stopped` in Git instead.
 */
import { Command } from "commander";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

function operator(io: CliIo): string {
  return io.env.STEWARD_OPERATOR ?? io.env.USER ?? io.env.LOGNAME ?? "operator";
}

function drainingCommand(
  draining: boolean,
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const command = new Command(draining ? "drain" : "undrain")
    .description(
      draining
        ? "stop new dispatches to a node; its desired state is kept"
        : "resume dispatching to a drained node; it converges to the current generation",
    )
    .argument("<node>", "node name");
  if (draining) command.option("--reason <text>", "why, shown with the node");
  addOutputOptions(command);
  return command.action(async (name: string, options: OutputOptions & { reason?: string }) => {
    const { statePaths, openHubStore, nudgeHub } = await import("./hub-state.js");
    const { setNodeDraining } = await import("../hub/operator.js");
    const paths = statePaths(io, globals());
    const store = await openHubStore(paths);
    try {
      const detail: { by: string; reason?: string; at: Date } = { by: operator(io), at: new Date() };
      if (options.reason) detail.reason = options.reason;
      await setNodeDraining(store, name, draining, detail);
    } finally {
      await store.close();
    }
    const nudged = await nudgeHub(paths, { node: name });
    const what = draining
      ? `node ${name} is draining: no new dispatches, desired state kept`
      : `node ${name} is back in service`;
    await printResult(
      io,
      outputFormat(options, globals()),
      {
        node: name,
        draining,
        by: operator(io),
        ...(options.reason ? { reason: options.reason } : {}),
        hubNudged: nudged,
      },
      () => `${what}${nudged ? "" : " (no hub is running; it takes this in when it starts)"}\n`,
    );
    exit(EXIT.ok);
  });
}

export function drainCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  return drainingCommand(true, io, globals, exit);
}

export function undrainCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  return drainingCommand(false, io, globals, exit);
}
