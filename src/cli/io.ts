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

/** Exit codes shared by every command (the README's command-line conventions list them). */
export const EXIT = {
  /** Fine: valid, right (converged, no open conditions), done. */
  ok: 0,
  /** The command found problems: invalid, open conditions, a failure. */
  problems: 1,
  /** Usage or environment error: a wrong flag or argument, an unknown name, a missing file or tool. */
  usage: 2,
  /** Not there yet, and nothing is wrong: converging, or a commit status still pending. */
  converging: 3,
} as const;

/** Options every command accepts. */
export interface GlobalOptions {
  json?: boolean;
  state: string;
  /** `--store`: where the hub's state is, when not `<state>/hub.db`. */
  store?: string;
  debug?: boolean;
}
