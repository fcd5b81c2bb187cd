/**
 * The GitHub Action's entry (bundled into action/dist/index.mjs, which action.yml runs): reads the
 * inputs and the runner's environment, calls `runAction`, and maps the outcome to an exit code:
 * 0 valid, 1 invalid or unable to run. A user's mistake is one `::error::` line, never a stack trace.
 */
import { isStewardError } from "../model/errors.js";
import { actionContext } from "./context.js";
import { runAction } from "./run.js";
import { annotation } from "./workflow.js";

const stdout = (text: string) => process.stdout.write(text);

try {
  const result = await runAction(actionContext(process.env, process.cwd()), { stdout });
  process.exitCode = result.exitCode;
} catch (error) {
  if (isStewardError(error)) stdout(annotation("error", `steward: ${error.message}`));
  else {
    stdout(annotation("error", `steward: internal error: ${(error as Error)?.message ?? String(error)}`));
    process.stderr.write(`${(error as Error)?.stack ?? error}\n(report this with the stack trace above)\n`);
  }
  process.exitCode = 1;
}
