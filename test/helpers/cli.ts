/**
 * Runs the steward CLI in tests: in process through `main()` with captured output, as the tests of
 * every command do, or as the real built `bin/steward.js` process.
 */
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CliIo } from "../../src/cli/io.js";
import { main } from "../../src/cli/main.js";

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "../..");
export const binPath = join(repoRoot, "bin/steward.js");

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `steward ...args` with `cwd` (default: the checkout) and exactly `env` as its environment; stdout
 * is not a terminal unless `isTty`; `stdin` is what a command reading standard input gets.
 */
export async function runCli(
  args: string[],
  cwd = repoRoot,
  env: NodeJS.ProcessEnv = {},
  isTty = false,
  stdin?: string,
): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  const io: CliIo & { stdin?: () => Promise<Buffer> } = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    env,
    cwd,
    isTty,
  };
  if (stdin !== undefined) io.stdin = async () => Buffer.from(stdin);
  const code = await main(args, io);
  return { code, stdout, stderr };
}

/** `node bin/steward.js ...args` as a child process (dist/ is built by the global setup). */
export function runBin(args: string[], cwd = repoRoot): CliRun {
  const result = spawnSync(process.execPath, [binPath, ...args], { cwd, encoding: "utf8" });
  return { code: result.status ?? -1, stdout: result.stdout, stderr: result.stderr };
}
