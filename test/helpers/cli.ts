/** Runs the steward CLI in process with captured output, as the tests of every command do. */
import type { CliIo } from "../../src/cli/io.js";
import { main } from "../../src/cli/main.js";

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `steward ...args` with `cwd` and exactly `env` as its environment. */
export async function runCli(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    env,
    cwd,
    isTty: false,
  };
  const code = await main(args, io);
  return { code, stdout, stderr };
}
