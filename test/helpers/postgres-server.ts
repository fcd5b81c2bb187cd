/**
 * A real PostgreSQL server for tests (Debian's postgresql 15): `initdb` in a temporary directory,
 * `pg_ctl start` on a free port on loopback, run as the unprivileged `postgres` user (PostgreSQL
 * refuses to run as root), trust authentication for the role `steward`. One server per test file;
 * each test takes a fresh database of it. A missing binary fails loudly, naming the package.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

const BIN = process.env.STEWARD_TEST_PG_BIN ?? "/usr/lib/postgresql/15/bin";

export interface TestPostgresServer {
  readonly port: number;
  /** `postgres://steward@127.0.0.1:PORT/DATABASE`. */
  url(database?: string): string;
  /** Creates an empty database and returns its URL. */
  createDatabase(): Promise<string>;
  /** Stops the server and removes its directory. */
  dispose(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/** Runs a PostgreSQL tool as the `postgres` user when we are root (as CI is). */
function asPostgres(tool: string, args: string[]): void {
  const path = join(BIN, tool);
  if (!existsSync(path))
    throw new Error(
      `PostgreSQL's ${tool} is not at ${path}: the store tests need a real server — apt-get install -y postgresql (or set STEWARD_TEST_PG_BIN)`,
    );
  const root = process.getuid?.() === 0;
  execFileSync(root ? "runuser" : path, root ? ["-u", "postgres", "--", path, ...args] : args, {
    stdio: "pipe",
  });
}

let databases = 0;

/** Starts a throw-away PostgreSQL server for one test file. */
export async function startPostgresServer(): Promise<TestPostgresServer> {
  const dir = mkdtempSync(join(tmpdir(), "steward-pg-"));
  const data = join(dir, "data");
  // The postgres user must own (and reach) what it writes; the temporary directory is ours.
  chmodSync(dir, 0o777);
  if (process.getuid?.() === 0) execFileSync("chown", ["postgres", dir]);
  const port = await freePort();
  try {
    asPostgres("initdb", ["-D", data, "-A", "trust", "-U", "steward", "-E", "UTF8", "--locale=C.UTF-8"]);
    asPostgres("pg_ctl", [
      "-D",
      data,
      "-o",
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
      "-l",
      join(dir, "server.log"),
      "-w",
      "start",
    ]);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? "";
    throw new Error(`could not start PostgreSQL: ${(error as Error).message}${stderr ? `\n${stderr}` : ""}`);
  }
  const url = (database = "postgres") => `postgres://steward@127.0.0.1:${port}/${database}`;
  return {
    port,
    url,
    async createDatabase() {
      const name = `steward_${process.pid}_${++databases}`;
      const admin = new pg.Client({ connectionString: url() });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      return url(name);
    },
    async dispose() {
      try {
        asPostgres("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
