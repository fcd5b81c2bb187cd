/**
 * A syncer wired to a real repository, a real SQLite store and (for `http`) a real `git
 * http-backend`: commits are made in a working repository and, for `http`, pushed to the bare
 * remote the syncer fetches from.
 */
import { dirname, join } from "node:path";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import type { GitCredentials, SourceLocation } from "../../src/repo/git.js";
import type { GenerationStore } from "../../src/repo/store.js";
import { type Clock, Syncer, type SyncerOptions } from "../../src/repo/syncer.js";
import { makeRepo, type TempRepo, tempDir } from "../helpers/git.js";
import { type GitHttpServer, serveGit } from "../helpers/git-http.js";

export type Mode = "path" | "http";
export const MODES: Mode[] = ["path", "http"];

export interface Harness {
  mode: Mode;
  /** The working repository commits are made in. */
  repo: TempRepo;
  /** The bare remote (http mode). */
  remote?: TempRepo;
  server?: GitHttpServer;
  source: SourceLocation;
  state: string;
  /** The hub's store the syncer writes (its `generations` port is `store`). */
  hub: SqliteStore;
  store: GenerationStore;
  syncer: Syncer;
  /** Commits and, in http mode, pushes to the remote. Returns the commit id. */
  commit(message: string, files?: Record<string, string | null>): string;
  /** Pushes the working branch to the remote (force), in http mode. */
  push(): void;
  /** A second syncer on the same state directory (a restarted hub). */
  restart(options?: Partial<SyncerOptions>): Syncer;
  close(): Promise<void>;
}

/** A stepping clock: each call is one second after the last. */
export function steppingClock(start = Date.UTC(2026, 1, 1)): Clock {
  let now = start;
  return {
    now: () => {
      now += 1000;
      return new Date(now);
    },
  };
}

export async function harness(
  mode: Mode,
  files: Record<string, string>,
  options: { auth?: GitCredentials; syncer?: Partial<SyncerOptions> } = {},
): Promise<Harness> {
  const repo = makeRepo({ files });
  const state = tempDir("steward-state-");
  const hub = new SqliteStore(join(state, "hub.db"));
  const store = hub.generations;
  let remote: TempRepo | undefined;
  let server: GitHttpServer | undefined;
  let source: SourceLocation;
  if (mode === "http") {
    remote = repo.bareClone();
    server = await serveGit(
      options.auth ? { root: dirname(remote.dir), auth: options.auth } : { root: dirname(remote.dir) },
    );
    source = { kind: "url", url: server.url("fleet.git") };
  } else source = { kind: "path", path: repo.dir };
  const make = (extra: Partial<SyncerOptions> = {}) =>
    new Syncer({
      store,
      source,
      cacheDir: join(state, "git"),
      clock: steppingClock(),
      ...(options.auth ? { credentials: options.auth } : {}),
      ...options.syncer,
      ...extra,
    });
  const syncers: Syncer[] = [];
  const h: Harness = {
    mode,
    repo,
    source,
    state,
    hub,
    store,
    syncer: make(),
    commit(message, changes = {}) {
      const sha = repo.commit(message, changes);
      h.push();
      return sha;
    },
    push() {
      if (remote) repo.git("push", "-q", "--force", remote.dir, "HEAD:main");
    },
    restart(extra) {
      const syncer = make(extra);
      syncers.push(syncer);
      return syncer;
    },
    async close() {
      h.syncer.close();
      for (const s of syncers) s.close();
      await hub.close();
      await server?.close();
    },
  };
  if (remote) h.remote = remote;
  if (server) h.server = server;
  return h;
}
