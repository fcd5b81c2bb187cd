/**
 * A real git remote for the git-notes tests: bare repositories served over HTTP by
 * `git http-backend` (as a CGI behind node:http, push enabled), and the `git` CLI to set them up and
 * read them back. (The syncer's branch is writing shared helpers for the same; fold this into them
 * once both are on main.)
 */
import { execFile, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const IDENTITY = {
  GIT_AUTHOR_NAME: "Test Operator",
  GIT_AUTHOR_EMAIL: "operator@example.test",
  GIT_COMMITTER_NAME: "Test Operator",
  GIT_COMMITTER_EMAIL: "operator@example.test",
};

/** Runs the git CLI in `cwd` and returns its trimmed stdout; a failure throws with git's stderr. */
export function git(cwd: string, ...args: string[]): string {
  return gitWithInput(cwd, "", ...args);
}

/**
 * `git` for commands that talk to a server in this process (clone, fetch, push): asynchronous, so
 * the event loop stays free to answer them.
 */
export function gitOverHttp(cwd: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      args,
      { cwd, env: { ...process.env, ...IDENTITY, GIT_CONFIG_NOSYSTEM: "1", HOME: cwd }, encoding: "utf8" },
      (error, stdout, stderr) =>
        error ? reject(new Error(`git ${args.join(" ")}: ${stderr}`)) : resolve(stdout.trim()),
    );
  });
}

/** `git` with `input` on stdin (`git mktree`, say). */
export function gitWithInput(cwd: string, input: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd,
    input,
    env: { ...process.env, ...IDENTITY, GIT_CONFIG_NOSYSTEM: "1", HOME: cwd },
    encoding: "utf8",
    stdio: ["pipe", "pipe", "pipe"],
  }).trim();
}

/** A fresh temporary directory. */
export function tempDir(prefix = "steward-git-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A working repository on `main` with one commit per entry of `commits` (file path → content); returns it and the shas. */
export function workingRepo(dir: string, commits: Record<string, string>[]): { dir: string; shas: string[] } {
  mkdirSync(dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  const shas: string[] = [];
  for (const [index, files] of commits.entries()) {
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), content);
    }
    git(dir, "add", "-A");
    git(dir, "commit", "-q", "-m", `change ${index + 1}`);
    shas.push(git(dir, "rev-parse", "HEAD"));
  }
  return { dir, shas };
}

/** Pushes `main` of a working repository into a new bare repository `<root>/<name>.git` that accepts pushes over HTTP. */
export function bareRemote(root: string, name: string, source: string): string {
  const bare = join(root, `${name}.git`);
  git(root, "init", "-q", "--bare", "-b", "main", bare);
  git(bare, "config", "http.receivepack", "true");
  git(source, "push", "-q", bare, "main");
  return bare;
}

export interface GitHttpServer {
  /** `http://127.0.0.1:PORT`; a repository `<root>/x.git` is at `${url}/x.git`. */
  url: string;
  close(): Promise<void>;
}

/** Serves every repository under `root` with `git http-backend`. */
export async function startGitHttp(root: string): Promise<GitHttpServer> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://git");
    const cgi = spawn("git", ["http-backend"], {
      env: {
        ...process.env,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        GIT_CONFIG_NOSYSTEM: "1",
        REQUEST_METHOD: request.method ?? "GET",
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: request.headers["content-type"] ?? "",
        HTTP_CONTENT_ENCODING: request.headers["content-encoding"] ?? "",
        HTTP_GIT_PROTOCOL: String(request.headers["git-protocol"] ?? ""),
        REMOTE_ADDR: "127.0.0.1",
        REMOTE_USER: "steward",
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    request.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    const stderr: Buffer[] = [];
    cgi.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (headersDone) {
        response.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString().split("\r\n")) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
        else response.setHeader(name, value);
      }
      response.statusCode = status;
      response.write(head.subarray(end + 4));
    });
    cgi.on("close", (code) => {
      if (!headersDone) {
        response.statusCode = 500;
        response.write(`git http-backend exited ${code}: ${Buffer.concat(stderr).toString()}`);
      }
      response.end();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
