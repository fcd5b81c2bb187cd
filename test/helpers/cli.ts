/** Runs steward in tests: in-process through `main()` with captured output, or as the real built process. */
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

/** `steward ARGV` through main() with a captured CliIo rooted at `cwd`. */
export async function runCli(argv: string[], cwd = repoRoot): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    env: {},
    cwd,
    isTty: false,
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

/** `node bin/steward.js ARGV` as a child process (dist/ is built by the global setup). */
export function runBin(argv: string[], cwd = repoRoot): CliRun {
  const result = spawnSync(process.execPath, [binPath, ...argv], { cwd, encoding: "utf8" });
  return { code: result.status ?? -1, stdout: result.stdout, stderr: result.stderr };
}
