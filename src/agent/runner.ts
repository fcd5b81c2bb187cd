/**
 * The process runner port: how the agent runs commands (bounded output, timeout) and starts
 * detached services. Injected into the Agent so tests can observe exactly what ran; the default
 * runs real processes with node:child_process.
 */
import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";

/** A command to run to completion. */
export interface RunRequest {
  argv: string[];
  cwd?: string;
  /** The whole environment of the process (nothing is inherited implicitly). */
  env?: Record<string, string>;
  timeoutMs?: number;
  /** Written to standard input, which is then closed. */
  input?: string;
  /** Bytes kept from the end of each output stream. Default 64 KiB. */
  maxOutputBytes?: number;
}

/** How a command ended, with the end of its output. */
export interface RunResult {
  /** Null when killed by a signal or when it could not start. */
  exitCode: number | null;
  signal: string | null;
  /** The last `maxOutputBytes` of standard output. */
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** Set when the executable could not be started: `ENOENT` (not found), `EACCES` (not executable). */
  spawnError?: string;
  durationMs: number;
}

/** A process to start in its own session, so it outlives the agent. */
export interface DetachedRequest {
  argv: string[];
  cwd?: string;
  env: Record<string, string>;
  /** Standard output (and standard error, unless `errorFile` is set) are appended here. */
  logFile: string;
  /** Standard error is appended here instead. */
  errorFile?: string;
  /**
   * Keep this agent process running until the process exits (a one-shot the agent waits for); by
   * default the agent may exit first (a service it supervises).
   */
  awaited?: boolean;
}

/** A process started in its own session: it outlives the agent. */
export interface DetachedProcess {
  pid: number;
  /** Settles when the process exits, if this agent process is still there to see it. */
  exited: Promise<{ exitCode: number | null; signal: string | null }>;
}

/** Runs processes for the agent (commands, checks, tools, services). */
export interface ProcessRunner {
  run(request: RunRequest): Promise<RunResult>;
  /** Starts a detached process; rejects with an errno error (`code` ENOENT...) when it cannot start. */
  spawnDetached(request: DetachedRequest): Promise<DetachedProcess>;
  /** Signals a process group (and the process, if the group is gone); false when nothing was there. */
  signal(pid: number, signal: NodeJS.Signals): boolean;
}

const DEFAULT_MAX_OUTPUT = 64 * 1024;
/** How long a timed-out process gets between SIGTERM and SIGKILL. */
const KILL_GRACE_MS = 2000;

/** Keeps the tail of a stream: memory stays bounded whatever a command prints. */
class Tail {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {}
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.max && this.chunks.length > 1) this.size -= this.chunks.shift()!.length;
  }
  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.max)).toString("utf8");
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    try {
      process.kill(pid, signal);
      return true;
    } catch {
      return false;
    }
  }
}

/** Runs real processes. */
export const nodeProcessRunner: ProcessRunner = {
  run(request) {
    const started = performance.now();
    const max = request.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    return new Promise((resolve) => {
      const stdout = new Tail(max);
      const stderr = new Tail(max);
      let timedOut = false;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      let killTimer: NodeJS.Timeout | undefined;
      const [file, ...args] = request.argv;
      // Its own process group, so a timeout kills whatever the command started as well.
      const child = spawn(file!, args, {
        cwd: request.cwd,
        env: request.env,
        detached: true,
        stdio: ["pipe", "pipe", "pipe"],
      });
      const finish = (result: Omit<RunResult, "stdout" | "stderr" | "timedOut" | "durationMs">) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(killTimer);
        resolve({
          ...result,
          stdout: stdout.text(),
          stderr: stderr.text(),
          timedOut,
          durationMs: performance.now() - started,
        });
      };
      child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
      child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
      child.stdin.on("error", () => {
        // The command closed its input early: it did not want it.
      });
      child.on("error", (error: NodeJS.ErrnoException) =>
        finish({ exitCode: null, signal: null, spawnError: error.code ?? "ESPAWN" }),
      );
      child.on("exit", (exitCode, signal) => {
        // A background process may keep the pipes open: do not wait for them for ever.
        const onClose = () => finish({ exitCode, signal });
        child.on("close", onClose);
        setTimeout(() => {
          child.stdout.destroy();
          child.stderr.destroy();
          onClose();
        }, 200).unref();
      });
      if (request.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          timedOut = true;
          if (child.pid !== undefined) signalGroup(child.pid, "SIGTERM");
          killTimer = setTimeout(() => {
            if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL");
          }, KILL_GRACE_MS);
        }, request.timeoutMs);
      }
      child.stdin.end(request.input ?? "");
    });
  },

  spawnDetached(request) {
    return new Promise((resolve, reject) => {
      const log = openSync(request.logFile, "a", 0o600);
      let errors = log;
      try {
        if (request.errorFile !== undefined) errors = openSync(request.errorFile, "a", 0o600);
      } catch (error) {
        closeSync(log);
        reject(error);
        return;
      }
      const close = () => {
        closeSync(log);
        if (errors !== log) closeSync(errors);
      };
      const [file, ...args] = request.argv;
      let child: ReturnType<typeof spawn>;
      try {
        child = spawn(file!, args, {
          cwd: request.cwd,
          env: request.env,
          detached: true,
          stdio: ["ignore", log, errors],
        });
      } catch (error) {
        close();
        reject(error);
        return;
      }
      const exited = new Promise<{ exitCode: number | null; signal: string | null }>((done) =>
        child.on("exit", (exitCode, signal) => done({ exitCode, signal })),
      );
      child.once("error", (error) => {
        close();
        reject(error);
      });
      child.once("spawn", () => {
        close();
        // The agent may exit (one-shot over SSH); a service must not keep it alive. Either way the
        // process is in its own session, so it never dies with the agent.
        if (!request.awaited) child.unref();
        resolve({ pid: child.pid!, exited });
      });
    });
  },

  signal: signalGroup,
};
