/**
 * `steward rollout pause REVISION [--assignment A] --reason TEXT` and `steward rollout resume
 * REVISION [--assignment A] --reason TEXT`: an operator's decision about the rollouts of a revision
 * (src/hub/rollout-decisions.ts), recorded with who took it (`--as`, else `STEWARD_OPERATOR`, else
 * `USER`) and why. The decision goes to the hub's database and a running hub is nudged; the
 * `RolloutPaused` condition still resolves only when the hub sees the rollout move again.
 */
import { Command } from "commander";
import type { RolloutDecisionOutcome } from "../hub/rollout-decisions.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

interface DecisionOptions extends OutputOptions {
  assignment?: string;
  reason?: string;
  as?: string;
}

/** Who decides: `--as`, else the operator the environment names. */
function operatorName(io: CliIo, as?: string): string {
  return as ?? io.env.STEWARD_OPERATOR ?? io.env.USER ?? io.env.LOGNAME ?? "operator";
}

/** What a decision did, a line per rollout, and whether the hub heard of it. */
export function renderDecision(outcomes: readonly RolloutDecisionOutcome[], hubNudged: boolean): string {
  let text = "";
  for (const outcome of outcomes) {
    text += `${outcome.message}\n`;
    if (outcome.recorded && outcome.condition?.status === "open")
      text += `  condition RolloutPaused ${outcome.condition.id} is open; it resolves when the rollout is seen moving\n`;
  }
  if (outcomes.some((o) => o.recorded) && !hubNudged)
    text += "(no hub is running: it takes this in when it starts)\n";
  return text;
}

function decisionCommand(
  decision: "pause" | "resume",
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const command = new Command(decision)
    .description(
      decision === "pause"
        ? "hold every instance of the revision's rollouts that has not started (those in flight finish)"
        : "let the revision's rollouts go on past the failures they have seen, and lift a pause",
    )
    .argument("<revision>", "the revision: a sha or its prefix, a branch, a tag, HEAD~N")
    .option("--assignment <name>", "only this assignment's rollout (default: every rollout of the revision)")
    .option("--reason <text>", "why (required): recorded with the decision and shown with the rollout")
    .option("--as <name>", "who decides (default: $STEWARD_OPERATOR, else $USER)");
  addOutputOptions(command);
  return command.action(async (revision: string, options: DecisionOptions) => {
    const { statePaths, openHubStore, nudgeHub } = await import("./hub-state.js");
    const { resolveRevision } = await import("./describe.js");
    const decisions = await import("../hub/rollout-decisions.js");
    const { UsageError } = await import("../model/errors.js");
    // Checked here rather than by commander, so a mistyped flag is named first.
    const reason = options.reason?.trim();
    if (!reason)
      throw new UsageError(
        `say why: \`steward rollout ${decision} ${revision} --reason "..."\` (the decision is recorded with who took it and why)`,
      );
    const paths = statePaths(io, globals());
    const store = await openHubStore(paths);
    let outcomes: RolloutDecisionOutcome[];
    let sha: string;
    try {
      sha = await resolveRevision(store, paths.git, io.cwd, revision);
      const input = {
        revision: sha,
        by: operatorName(io, options.as),
        reason,
        at: new Date().toISOString(),
        ...(options.assignment !== undefined ? { assignment: options.assignment } : {}),
      };
      if (decision === "pause") {
        const { idFactory } = await import("../hub/ids.js");
        const { systemClock } = await import("../hub/clock.js");
        outcomes = await decisions.pauseRollouts(store, input, idFactory(systemClock));
      } else outcomes = await decisions.resumeRollouts(store, input);
    } finally {
      await store.close();
    }
    const hubNudged = outcomes.some((o) => o.recorded) ? await nudgeHub(paths, { revision: sha }) : false;
    await printResult(io, outputFormat(options, globals()), { revision: sha, outcomes, hubNudged }, () =>
      renderDecision(outcomes, hubNudged),
    );
    exit(EXIT.ok);
  });
}

/** `steward rollout pause|resume`. */
export function rolloutCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  return new Command("rollout")
    .description("steer the rollouts of a revision: pause them, or resume them past their failures")
    .addCommand(decisionCommand("pause", io, globals, exit))
    .addCommand(decisionCommand("resume", io, globals, exit))
    .action(async () => {
      const { UsageError } = await import("../model/errors.js");
      throw new UsageError(
        'say what to do with the rollout: `steward rollout pause REVISION --reason "..."` or `steward rollout resume REVISION --reason "..."` (see `steward rollout --help`)',
      );
    });
}
