/**
 * The fleet repository as the syncer sees it: a local repository read in place, or an HTTP(S)
 * remote mirrored into a bare repository under the state directory (`<state>/git/`) and fetched
 * incrementally with isomorphic-git. Credentials come from the environment only; a URL carrying
 * them is refused so they never reach the database, the logs or a process listing.
 */
import { createHash } from "node:crypto";
import fs, { existsSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import git, { type GitAuth, type HttpClient } from "isomorphic-git";
import { type AnalysisCache, type LoadResult, loadRepo } from "../model/load.js";
import { type ParsedCommit, parseCommit } from "./commits.js";
import {
  RemoteAuthError,
  RemoteUnreachableError,
  RepoError,
  RevisionNotFoundError,
  SourceError,
} from "./errors.js";
import { nodeHttpClient } from "./http.js";
import { ObjectReader } from "./objects.js";
import { TreeIndex, treeSource } from "./tree.js";

/** Where the fleet repository lives: a local path or an HTTP(S) URL. */
export type SourceLocation = { kind: "path"; path: string } | { kind: "url"; url: string };

/** Parses a `--repo` value: an http(s) URL (without credentials) or a path relative to `cwd`. */
export function parseLocation(spec: string, cwd: string): SourceLocation {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) {
    let url: URL;
    try {
      url = new URL(spec);
    } catch {
      throw new SourceError(
        `${JSON.stringify(spec)} is not a valid URL: give an https:// URL or a local path`,
      );
    }
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw new SourceError(
        `${url.protocol}// remotes are not supported: give an http(s) URL or a local path (clone it first)`,
      );
    if (url.username || url.password) {
      url.username = "";
      url.password = "";
      throw new SourceError(
        `the repository URL must not carry credentials: use ${url.href} and put the token in STEWARD_GIT_TOKEN (or STEWARD_GIT_USERNAME/STEWARD_GIT_PASSWORD)`,
      );
    }
    return { kind: "url", url: url.href.replace(/\/$/, "") };
  }
  return { kind: "path", path: resolve(cwd, spec) };
}

/** The location as text (a path or URL; never credentials, since they cannot be in it). */
export function describeLocation(location: SourceLocation): string {
  return location.kind === "path" ? location.path : location.url;
}

/** Basic-auth credentials for HTTP remotes. */
export interface GitCredentials {
  username: string;
  password: string;
}

/**
 * Credentials from the environment: STEWARD_GIT_TOKEN (sent as the password, with
 * STEWARD_GIT_USERNAME or `x-access-token` as the user, which GitHub, GitLab and Gitea accept), or
 * STEWARD_GIT_USERNAME with STEWARD_GIT_PASSWORD.
 */
export function credentialsFromEnv(env: NodeJS.ProcessEnv): GitCredentials | undefined {
  const token = env.STEWARD_GIT_TOKEN;
  if (token) return { username: env.STEWARD_GIT_USERNAME || "x-access-token", password: token };
  if (env.STEWARD_GIT_USERNAME && env.STEWARD_GIT_PASSWORD)
    return { username: env.STEWARD_GIT_USERNAME, password: env.STEWARD_GIT_PASSWORD };
  return undefined;
}

/** Options for reaching a remote. */
export interface RemoteOptions {
  credentials?: GitCredentials;
  http?: HttpClient;
}

/** isomorphic-git's auth callbacks for `credentials`: offered once, and a refusal is final. */
export function authCallbacks(credentials: GitCredentials | undefined) {
  return {
    onAuth: (): GitAuth => (credentials ? { ...credentials } : { cancel: true }),
    onAuthFailure: (): GitAuth => ({ cancel: true }),
  };
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
]);

/** Maps an isomorphic-git or socket error from talking to `remote` to one of ours. */
export function remoteError(remote: string, error: unknown, hadCredentials: boolean): RepoError {
  if (error instanceof RepoError) return error;
  const e = error as { code?: string; message?: string; data?: { statusCode?: number } };
  const status = e.data?.statusCode;
  if (e.code === "UserCanceledError" || status === 401 || status === 403)
    return new RemoteAuthError(remote, hadCredentials, error);
  if (e.code === "HttpError") return new RemoteUnreachableError(remote, `HTTP ${status ?? "error"}`, error);
  if (e.code && NETWORK_CODES.has(e.code)) return new RemoteUnreachableError(remote, e.code, error);
  if (e.code === "SmartHttpError" || e.code === "RemoteCapabilityError")
    return new RemoteUnreachableError(remote, `not a git smart HTTP server (${e.message ?? e.code})`, error);
  return new RepoError("E_GIT", `git operation on ${remote} failed: ${e.message ?? String(error)}`, {
    cause: error,
  });
}

/** What a working tree holds that its HEAD does not: tracked files changed, and files git does not track. */
export interface WorkingTreeChanges {
  changed: string[];
  untracked: string[];
}

/** The uncommitted changes of the working tree `dir` (ignored files are not changes). */
export async function workingTreeChanges(dir: string, gitdir: string): Promise<WorkingTreeChanges> {
  const matrix = await git.statusMatrix({ fs, dir, gitdir });
  const changes: WorkingTreeChanges = { changed: [], untracked: [] };
  for (const [path, head, workdir, stage] of matrix) {
    if (head === 1 && workdir === 1 && stage === 1) continue;
    if (head === 0 && stage === 0) {
      if (workdir === 2) changes.untracked.push(path);
      continue;
    }
    changes.changed.push(path);
  }
  return changes;
}

/** Finds the git directory of a local repository (a working tree's `.git`, or a bare repository). */
function localGitdir(path: string): { gitdir: string; headDir: string } {
  const dotgit = join(path, ".git");
  if (existsSync(dotgit)) {
    if (statSync(dotgit).isDirectory()) return { gitdir: dotgit, headDir: dotgit };
    // A linked worktree: `.git` names its own git directory, whose `commondir` holds objects and refs.
    const pointer = /^gitdir: (.*)$/m.exec(readFileSync(dotgit, "utf8"))?.[1]?.trim();
    if (pointer) {
      const own = isAbsolute(pointer) ? pointer : resolve(path, pointer);
      const common = join(own, "commondir");
      const shared = existsSync(common) ? resolve(own, readFileSync(common, "utf8").trim()) : own;
      return { gitdir: shared, headDir: own };
    }
  }
  if (existsSync(join(path, "HEAD")) && existsSync(join(path, "objects")))
    return { gitdir: path, headDir: path };
  throw new SourceError(`${path} is not a git repository: give the path of a clone of the fleet repository`);
}

/** A mirror directory name for a URL: readable, and unique by a hash of the whole URL. */
function mirrorName(url: string): string {
  const readable = url
    .replace(/^https?:\/\//, "")
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .slice(0, 60);
  return `${readable}-${createHash("sha256").update(url).digest("hex").slice(0, 12)}.git`;
}

/** Cached commits per repository: the walks for new commits and ancestry revisit the same ones. */
const COMMIT_CACHE_SIZE = 10_000;

/** A git repository the syncer and the CLI read: objects, trees, commits and refs. */
export class FleetRepository {
  readonly reader: ObjectReader;
  readonly trees: TreeIndex;
  private readonly commits = new Map<string, ParsedCommit>();

  private constructor(
    readonly location: SourceLocation,
    /** The git directory holding objects and refs. */
    readonly gitdir: string,
    /** Where HEAD lives (differs from `gitdir` in a linked worktree). */
    private readonly headDir: string,
    private readonly remote: RemoteOptions,
  ) {
    this.reader = new ObjectReader(gitdir);
    this.trees = new TreeIndex(this.reader);
  }

  /**
   * Opens the repository at `location`: a local path is read in place; a URL is mirrored under
   * `cacheDir` (created by the first `fetch`).
   */
  static open(
    location: SourceLocation,
    options: RemoteOptions & { cacheDir?: string } = {},
  ): FleetRepository {
    if (location.kind === "path") {
      if (!existsSync(location.path))
        throw new SourceError(
          `${location.path} does not exist: give the path of a clone of the fleet repository`,
        );
      const { gitdir, headDir } = localGitdir(location.path);
      return new FleetRepository(location, gitdir, headDir, options);
    }
    if (!options.cacheDir) throw new SourceError(`no cache directory to mirror ${location.url} into`);
    const gitdir = join(options.cacheDir, mirrorName(location.url));
    return new FleetRepository(location, gitdir, gitdir, options);
  }

  /** True for a mirror of a remote (which `discard` may delete), false for a local repository. */
  get isMirror(): boolean {
    return this.location.kind === "url";
  }

  /**
   * Brings the branch up to date (fetching only new objects from a remote) and returns its head.
   * Throws RemoteUnreachableError, RemoteAuthError or SourceError.
   */
  async fetch(branch: string): Promise<string> {
    if (this.location.kind === "path") return this.branchHead(branch);
    const url = this.location.url;
    if (!existsSync(join(this.gitdir, "config"))) await this.createMirror(url);
    const head = await this.fetchFrom("origin", url, branch);
    // The mirror's own branch follows the remote (force: the remote may have been rewritten). With a
    // single-branch fetch, isomorphic-git offers this ref's commit as "have", so the next fetch
    // transfers only new objects.
    await git.writeRef({ fs, gitdir: this.gitdir, ref: `refs/heads/${branch}`, value: head, force: true });
    return head;
  }

  /**
   * Fetches `branch` from the configured remote `remote` (whose URL is `url`, for messages) over
   * HTTP(S) with this repository's credentials, and returns the remote head.
   */
  async fetchFrom(remote: string, url: string, branch: string): Promise<string> {
    const credentials = this.remote.credentials;
    let fetchHead: string | null;
    try {
      const result = await git.fetch({
        fs,
        http: this.remote.http ?? nodeHttpClient(),
        gitdir: this.gitdir,
        remote,
        ref: branch,
        singleBranch: true,
        tags: false,
        ...authCallbacks(credentials),
      });
      fetchHead = result.fetchHead;
    } catch (error) {
      if ((error as { code?: string }).code !== "NotFoundError")
        throw remoteError(url, error, credentials !== undefined);
      fetchHead = null;
    }
    if (!fetchHead)
      throw new SourceError(`branch "${branch}" does not exist on ${url}: fix the branch name`, {
        url,
        branch,
      });
    return fetchHead;
  }

  /**
   * Pushes the local `branch` to `url` (fast-forward only). Throws RepoError `E_PUSH_REJECTED` when
   * the remote branch moved, or the mapped remote error.
   */
  async pushTo(url: string, branch: string): Promise<void> {
    const credentials = this.remote.credentials;
    try {
      const result = await git.push({
        fs,
        http: this.remote.http ?? nodeHttpClient(),
        gitdir: this.gitdir,
        url,
        ref: branch,
        remoteRef: branch,
        ...authCallbacks(credentials),
      });
      if (!result.ok) throw new Error(result.error ?? "the remote refused the push");
    } catch (error) {
      if ((error as { code?: string }).code === "PushRejectedError")
        throw new RepoError(
          "E_PUSH_REJECTED",
          `${url} rejected the push of ${branch}: the remote branch moved`,
          {
            cause: error,
          },
        );
      throw remoteError(url, error, credentials !== undefined);
    }
  }

  /** Deletes a mirror so the next fetch starts from scratch (after it was found corrupt). */
  discard(): void {
    if (!this.isMirror) return;
    this.reader.close();
    rmSync(this.gitdir, { recursive: true, force: true });
  }

  /** The commit `oid`, parsed (cached). */
  commit(oid: string): ParsedCommit {
    let commit = this.commits.get(oid);
    if (commit) return commit;
    const object = this.reader.read(oid);
    if (object.type === "tag") {
      const target = /^object ([0-9a-f]{40})$/m.exec(object.data.toString("utf8"))?.[1];
      if (target) return this.commit(target);
    }
    if (object.type !== "commit") throw new RevisionNotFoundError(oid, this.describe());
    commit = parseCommit(oid, object.data);
    if (this.commits.size >= COMMIT_CACHE_SIZE) this.commits.delete(this.commits.keys().next().value!);
    this.commits.set(oid, commit);
    return commit;
  }

  /**
   * Resolves a commit-ish: a full or abbreviated id, `HEAD`, a branch, tag or remote-tracking
   * name, each optionally followed by `~N`, `^` or `^N`.
   */
  async resolve(revision: string): Promise<string> {
    const match = /^(.*?)((?:[~^]\d*)*)$/.exec(revision.trim());
    const base = match?.[1] ?? "";
    const suffix = match?.[2] ?? "";
    if (!base) throw new RevisionNotFoundError(revision, this.describe());
    let oid = await this.resolveBase(base, revision);
    for (const step of suffix.match(/[~^]\d*/g) ?? []) {
      const count = step.length > 1 ? Number(step.slice(1)) : 1;
      if (step[0] === "~") {
        for (let i = 0; i < count; i++) oid = this.parentOf(oid, 0, revision);
      } else if (count > 0) oid = this.parentOf(oid, count - 1, revision);
    }
    return oid;
  }

  /** True when `ancestor` is `descendant` or reachable from it through parents. */
  isAncestor(ancestor: string, descendant: string): boolean {
    if (ancestor === descendant) return true;
    const seen = new Set<string>();
    const queue = [descendant];
    while (queue.length > 0) {
      const oid = queue.shift()!;
      if (seen.has(oid)) continue;
      seen.add(oid);
      for (const parent of this.commit(oid).parents) {
        if (parent === ancestor) return true;
        if (!seen.has(parent)) queue.push(parent);
      }
    }
    return false;
  }

  /**
   * Commits reachable from `head` and not from any commit for which `stop` is true, oldest first,
   * at most `limit` (the newest ones, head included).
   */
  commitsSince(head: string, stop: (oid: string) => boolean, limit: number): ParsedCommit[] {
    const found: ParsedCommit[] = [];
    const seen = new Set<string>();
    const queue = [head];
    while (queue.length > 0 && found.length < limit) {
      const oid = queue.shift()!;
      if (seen.has(oid) || stop(oid)) continue;
      seen.add(oid);
      const commit = this.commit(oid);
      found.push(commit);
      queue.push(...commit.parents);
    }
    // Oldest first: by commit time, and for equal times parents (found later) before children.
    const order = new Map(found.map((commit, i) => [commit.oid, i]));
    return found.sort(
      (a, b) => a.committer.timestamp - b.committer.timestamp || order.get(b.oid)! - order.get(a.oid)!,
    );
  }

  /** Loads, validates and renders the fleet at commit `oid` (file analyses cached in `cache`). */
  load(oid: string, cache?: AnalysisCache): Promise<LoadResult> {
    const source = treeSource(this.reader, this.trees, this.commit(oid).tree);
    return loadRepo(source, cache ? { cache } : {});
  }

  /** Releases file descriptors. */
  close(): void {
    this.reader.close();
  }

  /** The path or URL, for messages. */
  describe(): string {
    return describeLocation(this.location);
  }

  /** isomorphic-git's arguments for this repository. */
  gitArgs(): { fs: typeof fs; gitdir: string } {
    return { fs, gitdir: this.gitdir };
  }

  /** Reads the branch's ref directly (loose, then packed-refs): this runs on every poll. */
  private async branchHead(branch: string): Promise<string> {
    const ref = `refs/heads/${branch}`;
    try {
      const loose = readFileSync(join(this.gitdir, ref), "utf8").trim();
      if (/^[0-9a-f]{40}$/.test(loose)) return loose;
    } catch {
      // Not a loose ref: look in packed-refs.
    }
    try {
      for (const line of readFileSync(join(this.gitdir, "packed-refs"), "utf8").split("\n")) {
        const [oid, name] = line.split(" ");
        if (name === ref && oid && /^[0-9a-f]{40}$/.test(oid)) return oid;
      }
    } catch {
      // No packed-refs either.
    }
    throw new SourceError(`branch "${branch}" does not exist in ${this.describe()}: fix the branch name`, {
      branch,
    });
  }

  private async resolveBase(base: string, revision: string): Promise<string> {
    if (/^[0-9a-f]{40}$/i.test(base)) {
      this.commit(base.toLowerCase());
      return base.toLowerCase();
    }
    if (base === "HEAD" && this.headDir !== this.gitdir) {
      const head = readFileSync(join(this.headDir, "HEAD"), "utf8").trim();
      const ref = /^ref: (.*)$/.exec(head)?.[1];
      return ref ? this.resolveBase(ref, revision) : head;
    }
    try {
      const oid = await git.resolveRef({ fs, gitdir: this.gitdir, ref: base });
      return this.commit(oid).oid;
    } catch (error) {
      if (error instanceof RepoError && !(error instanceof RevisionNotFoundError)) throw error;
    }
    if (/^[0-9a-f]{4,39}$/i.test(base)) {
      try {
        const oid = await git.expandOid({ fs, gitdir: this.gitdir, oid: base.toLowerCase() });
        return this.commit(oid).oid;
      } catch {
        // fall through to the error below
      }
    }
    throw new RevisionNotFoundError(revision, this.describe());
  }

  private parentOf(oid: string, index: number, revision: string): string {
    const parent = this.commit(oid).parents[index];
    if (!parent) throw new RevisionNotFoundError(revision, this.describe());
    return parent;
  }

  private async createMirror(url: string): Promise<void> {
    // Built aside and renamed into place, so a crash never leaves a half-made mirror behind.
    const temporary = `${this.gitdir}.tmp-${process.pid}`;
    rmSync(temporary, { recursive: true, force: true });
    fs.mkdirSync(dirname(temporary), { recursive: true });
    await git.init({ fs, gitdir: temporary, bare: true });
    await git.addRemote({ fs, gitdir: temporary, remote: "origin", url });
    renameSync(temporary, this.gitdir);
  }
}
