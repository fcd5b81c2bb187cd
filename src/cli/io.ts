/** What a command may touch of the outside world; tests pass their own. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** True when stdout is a terminal (live progress instead of plain lines). */
  isTty: boolean;
}

export function processIo(): CliIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    env: process.env,
    cwd: process.cwd(),
    isTty: Boolean(process.stdout.isTTY),
  };
}

/** Exit codes shared by every command. */
export const EXIT = {
  /** Fine: valid, converged, no open conditions. */
  ok: 0,
  /** The command found problems: invalid, not converged, open conditions. */
  problems: 1,
  /** Usage or environment error. */
  usage: 2,
} as const;

/** Options every command accepts. */
export interface GlobalOptions {
  json?: boolean;
  state: string;
  debug?: boolean;
}
