/**
 * Real OpenSSH sshd on loopback for tests and benchmarks. Each server gets generated keys in a temp
 * directory, an sshd_config on a free 127.0.0.1 port, and its own root: `HOME` points into that
 * directory (sshd's `SetEnv`), so an agent's files and state under `~` stay apart even though every
 * server logs in as the same local user. sshd runs in the foreground (`-D -e`) as a child of the test
 * process; the daemonising form resets connections on these machines.
 *
 * A missing sshd or ssh-keygen is a loud failure naming the install command, never a skip.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";

export const SSHD = "/usr/sbin/sshd";

/** A key pair written by ssh-keygen. */
export interface KeyPair {
  /** Path of the private key file (OpenSSH format, no passphrase). */
  privateKeyFile: string;
  /** The public key as `type base64` (no comment), the form `spec.ssh.hostKey` pins. */
  publicKey: string;
}

/** Generates a key pair with ssh-keygen into `dir/name` and `dir/name.pub`. */
export function generateKeyPair(
  dir: string,
  name: string,
  type: "ed25519" | "rsa" | "ecdsa" = "ed25519",
): KeyPair {
  requireBinary("/usr/bin/ssh-keygen", "openssh-client");
  const privateKeyFile = join(dir, name);
  execFileSync("ssh-keygen", ["-q", "-t", type, "-N", "", "-C", name, "-f", privateKeyFile], {
    stdio: "pipe",
  });
  const [keyType, base64] = readFileSync(`${privateKeyFile}.pub`, "utf8").trim().split(/\s+/);
  return { privateKeyFile, publicKey: `${keyType} ${base64}` };
}

export interface SshdOptions {
  /** Public keys allowed to log in (`type base64`). */
  authorizedKeys: string[];
  /** Host key to serve; a fresh ed25519 key when absent. Passing the old one keeps identity across restarts. */
  hostKey?: KeyPair;
  /** Port to listen on; a free one when absent. */
  port?: number;
  /** Environment of sessions, on top of `HOME` (the server's root). `PATH` here replaces sshd's default. */
  env?: Record<string, string>;
  /** Extra sshd_config lines; they win over the defaults. */
  config?: string[];
  /** Directory to create the server's files in; a new temp directory when absent. */
  dir?: string;
}

/** A running sshd. */
export interface Sshd {
  host: "127.0.0.1";
  port: number;
  /** The local user sessions run as (the tests' own user). */
  user: string;
  /** Process id of the listening sshd (SIGSTOP it to make a host that accepts TCP but never answers). */
  pid: number;
  /** The server's own root: sessions' `HOME`; removed by `stop({ remove: true })`. */
  root: string;
  /** Directory holding the config, keys and log. */
  dir: string;
  hostKey: KeyPair;
  /** known_hosts line for this server (`[127.0.0.1]:PORT type base64`). */
  knownHostsLine: string;
  /** What sshd wrote to stderr so far. */
  log(): string;
  /** Process ids of the per-connection sshd children (killing one drops that session). */
  sessionPids(): number[];
  /** Stops the server (SIGTERM, then SIGKILL); `remove` deletes its directory. */
  stop(options?: { remove?: boolean }): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

function requireBinary(path: string, pkg: string): void {
  if (!existsSync(path))
    throw new Error(
      `${path} is missing — install it: apt-get install -y ${pkg} (tests run a real OpenSSH server)`,
    );
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Starts sshd in the foreground on loopback; resolves once it listens. */
export async function startSshd(options: SshdOptions): Promise<Sshd> {
  requireBinary(SSHD, "openssh-server");
  // sshd refuses to start without its privilege-separation directory.
  mkdirSync("/run/sshd", { recursive: true });
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "steward-sshd-"));
  mkdirSync(dir, { recursive: true });
  const root = join(dir, "root");
  mkdirSync(root, { recursive: true });
  const hostKey = options.hostKey ?? generateKeyPair(dir, "host_ed25519");
  writeFileSync(join(dir, "authorized_keys"), `${options.authorizedKeys.join("\n")}\n`, { mode: 0o600 });
  for (let tries = 0; ; tries++) {
    const port = options.port ?? (await freePort());
    try {
      return await launch({ ...options, dir, root, hostKey, port });
    } catch (error) {
      // Another process may take the port between freePort() and sshd's bind; try another.
      if (options.port !== undefined || tries >= 4 || !String(error).includes("Address already in use"))
        throw error;
    }
  }
}

async function launch(
  o: SshdOptions & { dir: string; root: string; hostKey: KeyPair; port: number },
): Promise<Sshd> {
  const env = { HOME: o.root, ...o.env };
  const configFile = join(o.dir, "sshd_config");
  writeFileSync(
    configFile,
    [
      // sshd keeps the first value it reads for a keyword, so the caller's lines go first.
      ...(o.config ?? []),
      `ListenAddress 127.0.0.1:${o.port}`,
      `HostKey ${o.hostKey.privateKeyFile}`,
      "PidFile none",
      `AuthorizedKeysFile ${join(o.dir, "authorized_keys")}`,
      // Temp directories are not owned the way StrictModes wants; the keys are ours anyway.
      "StrictModes no",
      "UsePAM no",
      "PermitRootLogin prohibit-password",
      "PubkeyAuthentication yes",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "AllowTcpForwarding yes",
      "MaxStartups 100:30:200",
      "MaxSessions 50",
      "Subsystem sftp internal-sftp",
      `SetEnv ${Object.entries(env)
        .map(([key, value]) => `${key}=${value}`)
        .join(" ")}`,
      "LogLevel INFO",
      "",
    ].join("\n"),
  );
  const child = spawn(SSHD, ["-D", "-e", "-f", configFile], { stdio: ["ignore", "ignore", "pipe"] });
  running.add(child);
  let log = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    log += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  exited.then(() => running.delete(child));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sshd did not start within 10 s:\n${log}`)), 10_000);
    const check = () => {
      if (log.includes("Server listening on")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stderr?.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sshd exited with ${code} before listening:\n${log}`));
    });
    check();
  });
  const [keyType, base64] = o.hostKey.publicKey.split(" ");
  const pid = child.pid!;
  return {
    host: "127.0.0.1",
    port: o.port,
    user: userInfo().username,
    pid,
    root: o.root,
    dir: o.dir,
    hostKey: o.hostKey,
    knownHostsLine: `[127.0.0.1]:${o.port} ${keyType} ${base64}`,
    log: () => log,
    sessionPids: () => childPids(pid),
    async stop(stopOptions = {}) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 2_000);
        await exited;
        clearTimeout(timer);
      }
      // Per-connection children outlive the listener; end them so no session lingers.
      for (const session of childPids(pid)) killQuietly(session);
      if (stopOptions.remove) rmSync(o.dir, { recursive: true, force: true });
    },
  };
}

/** Processes whose parent is `pid`, read from /proc. */
export function childPids(pid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command name may contain spaces and parentheses; fields resume after the last ")".
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** Several servers sharing one client key: a small fleet of loopback hosts. */
export interface SshdFleet {
  dir: string;
  clientKey: KeyPair;
  servers: Sshd[];
  /** known_hosts content naming every server. */
  knownHosts: string;
  stop(): Promise<void>;
}

/** Starts `count` servers, each with its own root, all accepting one generated client key. */
export async function startSshdFleet(
  count: number,
  options: Omit<SshdOptions, "authorizedKeys" | "dir" | "port"> = {},
): Promise<SshdFleet> {
  const dir = mkdtempSync(join(tmpdir(), "steward-sshd-fleet-"));
  const clientKey = generateKeyPair(dir, "client_ed25519");
  const servers = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      startSshd({ ...options, authorizedKeys: [clientKey.publicKey], dir: join(dir, `host-${i}`) }),
    ),
  );
  return {
    dir,
    clientKey,
    servers,
    knownHosts: `${servers.map((server) => server.knownHostsLine).join("\n")}\n`,
    async stop() {
      await Promise.all(servers.map((server) => server.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
