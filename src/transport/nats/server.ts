/**
 * Running a local `nats-server` with JetStream: for `steward up --transport nats` (a fleet on one
 * machine) and for the tests. Finds the binary on PATH (and in /usr/sbin, where Debian puts it), starts
 * it with a configuration file or plain flags, waits until it listens, and can restart it on the same
 * port and store so clients reconnect to the same JetStream state.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { EnvironmentError } from "../../model/errors.js";

/** How to get the server onto this machine; named in every "not found" error. */
export const NATS_SERVER_INSTALL = "apt-get install -y nats-server";

/**
 * The path of the `nats-server` binary: `$NATS_SERVER` if set, else the first on PATH or in the sbin
 * directories. Throws EnvironmentError naming the install command when there is none.
 */
export function locateNatsServer(env: NodeJS.ProcessEnv = process.env): string {
  if (env.NATS_SERVER) {
    if (isExecutable(env.NATS_SERVER)) return env.NATS_SERVER;
    throw new EnvironmentError(`NATS_SERVER=${env.NATS_SERVER} is not an executable nats-server`);
  }
  const dirs = [...(env.PATH ?? "").split(delimiter), "/usr/local/sbin", "/usr/sbin", "/sbin"];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, "nats-server");
    if (isExecutable(candidate)) return candidate;
  }
  throw new EnvironmentError(
    `nats-server not found on PATH or in /usr/sbin: install it (\`${NATS_SERVER_INSTALL}\`) or set NATS_SERVER`,
  );
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export interface NatsServerOptions {
  /** The binary; default `locateNatsServer()`. */
  binary?: string;
  /** A configuration file (as `steward nats config` writes); its listen address is overridden by `port`. */
  configFile?: string;
  /** JetStream store directory, used when there is no configuration file. */
  storeDir?: string;
  /** Port to listen on; default a random free one (read back from the server's log). */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** How long to wait for "Server is ready"; default 15 s. */
  readyTimeoutMs?: number;
}

/** A running nats-server process. */
export class NatsServerProcess {
  private child: ChildProcess | undefined;
  private logText = "";
  private portNumber: number | undefined;

  constructor(private readonly options: NatsServerOptions = {}) {}

  /** `nats://host:port` of the running server. */
  get url(): string {
    return `nats://${this.options.host ?? "127.0.0.1"}:${this.port}`;
  }

  get port(): number {
    if (this.portNumber === undefined) throw new Error("nats-server has not been started");
    return this.portNumber;
  }

  /** The server's process id while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Everything the server printed so far (it logs to stderr). */
  get log(): string {
    return this.logText;
  }

  /** Starts the server and resolves once it accepts clients. */
  async start(): Promise<this> {
    if (this.child) throw new Error("nats-server is already running");
    const binary = this.options.binary ?? locateNatsServer();
    const host = this.options.host ?? "127.0.0.1";
    const port = this.portNumber ?? this.options.port ?? -1;
    const args = this.options.configFile ? ["-c", this.options.configFile] : [];
    args.push("-js", "-a", host, "-p", String(port));
    if (this.options.storeDir) args.push("-sd", this.options.storeDir);
    const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    this.logText = "";
    const ready = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new EnvironmentError(`nats-server did not become ready:\n${this.logText}`)),
        this.options.readyTimeoutMs ?? 15_000,
      );
      const onData = (chunk: Buffer) => {
        this.logText += chunk.toString();
        const listening = /Listening for client connections on [^\s]+:(\d+)/.exec(this.logText);
        if (listening && this.logText.includes("Server is ready")) {
          clearTimeout(timer);
          resolve(Number(listening[1]));
        }
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", onData);
      child.once("error", (error) => {
        clearTimeout(timer);
        reject(new EnvironmentError(`cannot run ${binary}: ${error.message}`, { cause: error }));
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new EnvironmentError(`nats-server exited with code ${code}:\n${this.logText}`));
      });
    });
    try {
      this.portNumber = await ready;
    } catch (error) {
      this.child = undefined;
      child.kill("SIGKILL");
      throw error;
    }
    child.removeAllListeners("exit");
    tieToProcess(child);
    child.once("exit", () => {
      if (this.child === child) this.child = undefined;
    });
    return this;
  }

  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and resolves once it has exited. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    await stopChild(child);
  }

  /** Stops and starts again on the same port and store: clients see a disconnect and reconnect. */
  async restart(): Promise<this> {
    await this.stop();
    return this.start();
  }
}

/** Stops a child process: SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
export function stopChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

const tied = new Set<ChildProcess>();

/** Kills `child` when this process exits, however it ends, so no server or agent is left behind. */
export function tieToProcess(child: ChildProcess): void {
  // One listener for all of them: a fleet of 200 agents would trip the max-listeners warning.
  if (tied.size === 0) process.once("exit", killTied);
  tied.add(child);
  child.once("exit", () => {
    tied.delete(child);
    if (tied.size === 0) process.off("exit", killTied);
  });
}

function killTied(): void {
  for (const child of tied) child.kill("SIGKILL");
}
