/**
 * Serves bare repositories over git's smart HTTP protocol with the real `git http-backend`, run as
 * a CGI behind a small Node server on 127.0.0.1, so clients (isomorphic-git, the git CLI) go
 * through their real clone/fetch/push paths. Optional basic auth; every request is recorded.
 *
 *   const server = await serveGit({ root: dirname(remote.dir), auth: { username: "u", password: "p" } });
 *   const url = server.url("fleet.git");
 *   await repo.gitAsync("push", url, "HEAD:main");   // not repo.git(): see below
 *   await server.close();
 *
 * The server runs in the test's own process, so a git CLI call against it must not block the event
 * loop: use `gitAsync` (or any async child process), never execFileSync, or the two deadlock.
 */
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface GitRequest {
  method: string;
  path: string;
  query: string;
  /** Whether the request carried the expected credentials (always true without `auth`). */
  authorized: boolean;
  /** Bytes of the response body (pack sizes tell a full clone from an incremental fetch). */
  responseBytes: number;
}

export interface GitHttpServer {
  /** The clone URL of a repository under `root`, e.g. `url("fleet.git")`. */
  url(repository: string): string;
  port: number;
  requests: GitRequest[];
  /** Stops accepting connections; a client then gets ECONNREFUSED. */
  close(): Promise<void>;
}

export interface ServeOptions {
  /** Directory holding the bare repositories. */
  root: string;
  /** Require HTTP basic auth with these credentials. */
  auth?: { username: string; password: string };
  /** Listen on this port (to come back on the same URL after `close`). Default: any free port. */
  port?: number;
}

function authorized(request: IncomingMessage, auth: ServeOptions["auth"]): boolean {
  if (!auth) return true;
  const header = request.headers.authorization ?? "";
  const expected = `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString("base64")}`;
  return header === expected;
}

function runBackend(
  request: IncomingMessage,
  response: ServerResponse,
  root: string,
  record: GitRequest,
  remoteUser: string,
): void {
  const url = new URL(request.url ?? "/", "http://localhost");
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: "1",
    GIT_CONFIG_NOSYSTEM: "1",
    // Pushes over HTTP are off unless a user is authenticated or this is set.
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "http.receivepack",
    GIT_CONFIG_VALUE_0: "true",
    HOME: root,
    REQUEST_METHOD: request.method ?? "GET",
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.replace(/^\?/, ""),
    CONTENT_TYPE: request.headers["content-type"] ?? "",
    REMOTE_USER: remoteUser,
    REMOTE_ADDR: "127.0.0.1",
    GIT_PROTOCOL: String(request.headers["git-protocol"] ?? ""),
    HTTP_CONTENT_ENCODING: String(request.headers["content-encoding"] ?? ""),
  };
  const child = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "pipe"] });
  request.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headersSent = false;
  child.stdout.on("data", (chunk: Buffer) => {
    if (headersSent) {
      record.responseBytes += chunk.length;
      response.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    let end = head.indexOf("\r\n\r\n");
    let separator = 4;
    if (end < 0) {
      end = head.indexOf("\n\n");
      separator = 2;
    }
    if (end < 0) return;
    let status = 200;
    for (const line of head.subarray(0, end).toString("latin1").split(/\r?\n/)) {
      const colon = line.indexOf(":");
      if (colon < 0) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
      else response.setHeader(name, value);
    }
    response.statusCode = status;
    headersSent = true;
    const body = head.subarray(end + separator);
    record.responseBytes += body.length;
    response.write(body);
  });
  child.stderr.resume();
  child.on("close", () => {
    if (!headersSent) response.statusCode = 500;
    response.end();
  });
}

/** Starts the server; resolves once it listens. */
export async function serveGit(options: ServeOptions): Promise<GitHttpServer> {
  const requests: GitRequest[] = [];
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    const record: GitRequest = {
      method: request.method ?? "GET",
      path: url.pathname,
      query: url.search,
      authorized: authorized(request, options.auth),
      responseBytes: 0,
    };
    requests.push(record);
    if (!record.authorized) {
      response.writeHead(401, { "WWW-Authenticate": 'Basic realm="git"', "Content-Type": "text/plain" });
      response.end("authentication required\n");
      return;
    }
    runBackend(request, response, options.root, record, options.auth?.username ?? "anonymous");
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    requests,
    url: (repository) => `http://127.0.0.1:${port}/${repository}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
