/**
 * A real `nats-server -js` for tests: a random port on loopback, a temporary store directory, an
 * optional configuration (written to a file; `steward nats config` output, say), stop and restart on
 * the same port and store. A missing binary fails loudly, naming `apt-get install -y nats-server`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NatsServerProcess } from "../../src/transport/nats/server.js";

export interface TestNatsServer {
  readonly url: string;
  readonly port: number;
  /** The temporary directory holding the store (and the configuration, if any). */
  readonly dir: string;
  readonly storeDir: string;
  readonly process: NatsServerProcess;
  /** Stops the server; the store stays until `dispose`. */
  stop(): Promise<void>;
  /** Starts it again on the same port with the same store. */
  restart(): Promise<void>;
  /** Stops the server and removes its directory. */
  dispose(): Promise<void>;
}

export interface TestNatsServerOptions {
  /** Configuration text, given the store directory; without it the server runs with no auth. */
  config?: (storeDir: string) => string;
  /** An existing configuration file (e.g. from `steward nats config`); wins over `config`. */
  configFile?: string;
}

/** Starts a nats-server with JetStream for one test file. */
export async function startNatsServer(options: TestNatsServerOptions = {}): Promise<TestNatsServer> {
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-"));
  const storeDir = join(dir, "store");
  let configFile = options.configFile;
  if (!configFile && options.config) {
    configFile = join(dir, "nats-server.conf");
    writeFileSync(configFile, options.config(storeDir));
  }
  const server = new NatsServerProcess(configFile ? { configFile } : { storeDir });
  try {
    await server.start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    get url() {
      return server.url;
    },
    get port() {
      return server.port;
    },
    dir,
    storeDir,
    process: server,
    stop: () => server.stop(),
    restart: async () => {
      await server.restart();
    },
    dispose: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
