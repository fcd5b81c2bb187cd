/**
 * Commit statuses as git notes under `refs/notes/steward`, the embedded default for a fleet repo
 * without a forge. Notes are written with isomorphic-git into the fleet repository the hub syncs and
 * pushed with it, so anyone with a clone reads them:
 *
 *     git fetch origin refs/notes/steward:refs/notes/steward
 *     git log --notes=steward
 *
 * One note per commit, one line per context, `steward/fleet` first:
 *
 *     steward/fleet: success: 3/3 nodes at generation 2, probes passing <https://hub/revisions/…>
 *     steward/web: success: 3/3 nodes at generation 2, probes passing <https://hub/revisions/…>
 */
import * as git from "isomorphic-git";
import {
  type CommitState,
  type CommitStatus,
  cleanDescription,
  FLEET_CONTEXT,
  fitDescription,
  StatusWriteError,
  type StatusWriter,
} from "../hub/status.js";

export const NOTES_REF = "refs/notes/steward";

/** A note line is for people reading `git log`; keep it readable. */
export const GITNOTES_DESCRIPTION_LIMIT = 300;

export interface GitNotesOptions {
  /** The file system isomorphic-git uses (node:fs in production, the same in tests). */
  fs: git.CallbackFsClient | git.PromiseFsClient;
  /** The fleet repository's git directory (a bare mirror or a working tree's `.git`). */
  gitdir: string;
  ref?: string;
  /** Where the notes ref is pushed; without it notes stay in the local repository. */
  push?: {
    /** Remote URL; defaults to the URL of remote `origin`. */
    url?: string;
    http: git.HttpClient;
    onAuth?: git.AuthCallback;
  };
  author?: { name: string; email: string };
  now?: () => number;
}

const STATES: readonly CommitState[] = ["pending", "success", "failure", "error"];

/** The line of a note that holds one status. */
export function formatNoteLine(status: CommitStatus): string {
  const description = fitDescription(status.description, GITNOTES_DESCRIPTION_LIMIT);
  return `${status.context}: ${status.state}: ${description}${status.targetUrl ? ` <${status.targetUrl}>` : ""}`;
}

/** The statuses in a note's text (lines that are not statuses are skipped). */
export function parseNote(sha: string, text: string): CommitStatus[] {
  const statuses: CommitStatus[] = [];
  for (const line of text.split("\n")) {
    const match = /^(\S+): (\w+): (.*?)(?: <(\S+)>)?$/.exec(line);
    if (!match || !STATES.includes(match[2] as CommitState)) continue;
    const status: CommitStatus = {
      sha,
      context: match[1]!,
      state: match[2] as CommitState,
      description: match[3]!,
    };
    if (match[4]) status.targetUrl = match[4];
    statuses.push(status);
  }
  return statuses;
}

function contextOf(line: string): string | undefined {
  return /^(\S+): /.exec(line)?.[1];
}

/** Note text with `line` in place of its context's line, fleet first, then by context. */
function noteWith(text: string, line: string): string {
  const context = contextOf(line);
  const kept = text.split("\n").filter((l) => l.trim() !== "" && contextOf(l) !== context);
  const rank = (l: string) => (contextOf(l) === FLEET_CONTEXT ? 0 : contextOf(l) === undefined ? 2 : 1);
  const lines = [...kept, line].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  return `${lines.join("\n")}\n`;
}

type Fs = GitNotesOptions["fs"];

/** Finds the note blob for `hex` in a notes tree, flat (`<sha>`) or fanned out (`ab/cdef…`) as git writes it. */
async function findNote(fs: Fs, gitdir: string, tree: string, hex: string): Promise<string | undefined> {
  const { tree: entries } = await git.readTree({ fs, gitdir, oid: tree });
  for (const entry of entries) {
    if (entry.path === hex && entry.type === "blob") return entry.oid;
    if (entry.type === "tree" && entry.path.length === 2 && hex.startsWith(entry.path))
      return findNote(fs, gitdir, entry.oid, hex.slice(2));
  }
  return undefined;
}

/** Writes `blob` as the note of `hex`, where git would look for it; returns the new tree. */
async function putNote(
  fs: Fs,
  gitdir: string,
  tree: string | undefined,
  hex: string,
  blob: string,
): Promise<string> {
  const entries = tree ? (await git.readTree({ fs, gitdir, oid: tree })).tree : [];
  const exact = entries.find((e) => e.path === hex && e.type === "blob");
  const fanout = entries.find((e) => e.type === "tree" && e.path.length === 2 && hex.startsWith(e.path));
  if (exact) exact.oid = blob;
  else if (fanout) fanout.oid = await putNote(fs, gitdir, fanout.oid, hex.slice(2), blob);
  else entries.push({ mode: "100644", path: hex, oid: blob, type: "blob" });
  return git.writeTree({ fs, gitdir, tree: entries });
}

/** Reads the statuses recorded for `sha` in the notes ref of a repository (none when there is no note). */
export async function readStatusNote(options: {
  fs: Fs;
  gitdir: string;
  sha: string;
  ref?: string;
}): Promise<CommitStatus[]> {
  const { fs, gitdir, sha } = options;
  let head: string;
  try {
    head = await git.resolveRef({ fs, gitdir, ref: options.ref ?? NOTES_REF });
  } catch {
    return [];
  }
  const { commit } = await git.readCommit({ fs, gitdir, oid: head });
  const blob = await findNote(fs, gitdir, commit.tree, sha);
  if (!blob) return [];
  const { blob: bytes } = await git.readBlob({ fs, gitdir, oid: blob });
  return parseNote(sha, Buffer.from(bytes).toString("utf8"));
}

function isHttpError(error: unknown): error is { code: string; data: { statusCode: number } } {
  return (error as { code?: string }).code === "HttpError";
}

/**
 * Writes statuses as notes into the fleet repository; `flush` pushes the notes ref. A push the
 * remote rejects (someone else added notes) is redone once on top of the remote's notes.
 */
export class GitNotesStatusWriter implements StatusWriter {
  readonly name: string;
  readonly descriptionLimit = GITNOTES_DESCRIPTION_LIMIT;
  readonly #options: GitNotesOptions;
  readonly #ref: string;
  /** Statuses written since the last successful push, replayed if the remote moved. */
  readonly #unpushed = new Map<string, CommitStatus>();
  /** Writes and pushes touch one ref: one at a time. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: GitNotesOptions) {
    this.#options = options;
    this.#ref = options.ref ?? NOTES_REF;
    const url = options.push?.url?.replace(/\/\/[^/@]*@/, "//");
    this.name = url ? `gitnotes:${url}` : "gitnotes";
  }

  write(status: CommitStatus): Promise<void> {
    return this.#serial(async () => {
      await this.#record(status);
      if (this.#options.push) this.#unpushed.set(`${status.sha} ${status.context}`, status);
    });
  }

  flush(): Promise<void> {
    return this.#serial(async () => {
      if (!this.#options.push || this.#unpushed.size === 0) return;
      try {
        await this.#push();
      } catch (error) {
        if ((error as { code?: string }).code !== "PushRejectedError") throw this.#failure(error);
        try {
          await this.#rebaseOnRemote();
          await this.#push();
        } catch (retryError) {
          throw this.#failure(retryError);
        }
      }
      this.#unpushed.clear();
    });
  }

  #serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work, work);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #record(status: CommitStatus): Promise<void> {
    const { fs, gitdir } = this.#options;
    let head: string | undefined;
    try {
      head = await git.resolveRef({ fs, gitdir, ref: this.#ref });
    } catch {
      head = undefined;
    }
    const tree = head ? (await git.readCommit({ fs, gitdir, oid: head })).commit.tree : undefined;
    const existing = tree ? await findNote(fs, gitdir, tree, status.sha) : undefined;
    const before = existing
      ? Buffer.from((await git.readBlob({ fs, gitdir, oid: existing })).blob).toString("utf8")
      : "";
    const after = noteWith(before, formatNoteLine(status));
    if (after === before) return;
    const blob = await git.writeBlob({ fs, gitdir, blob: Buffer.from(after, "utf8") });
    const author = {
      ...(this.#options.author ?? { name: "steward", email: "steward@localhost" }),
      timestamp: Math.floor((this.#options.now ?? Date.now)() / 1000),
      timezoneOffset: 0,
    };
    await git.commit({
      fs,
      gitdir,
      ref: this.#ref,
      tree: await putNote(fs, gitdir, tree, status.sha, blob),
      parent: head ? [head] : [],
      message: `steward: ${status.context} ${status.state} on ${status.sha}\n`,
      author,
      committer: author,
    });
  }

  async #push(): Promise<void> {
    const push = this.#options.push!;
    const result = await git.push({
      fs: this.#options.fs,
      http: push.http,
      gitdir: this.#options.gitdir,
      ...(push.url ? { url: push.url } : { remote: "origin" }),
      ...(push.onAuth ? { onAuth: push.onAuth } : {}),
      ref: this.#ref,
      remoteRef: this.#ref,
    });
    const outcome = result.refs[this.#ref];
    if (!result.ok || (outcome && !outcome.ok))
      throw new StatusWriteError(
        `${this.name}: the remote refused ${this.#ref}: ${outcome?.error ?? result.error}`,
        {
          provider: this.name,
          failureClass: "transient",
          reason: "PushRejected",
        },
      );
  }

  /** Takes the remote's notes as the base and writes ours again on top. */
  async #rebaseOnRemote(): Promise<void> {
    const { fs, gitdir } = this.#options;
    const push = this.#options.push!;
    const fetched = await git.fetch({
      fs,
      http: push.http,
      gitdir,
      ...(push.url ? { url: push.url } : { remote: "origin" }),
      ...(push.onAuth ? { onAuth: push.onAuth } : {}),
      ref: this.#ref,
      singleBranch: true,
      tags: false,
    });
    if (!fetched.fetchHead) return;
    await git.writeRef({ fs, gitdir, ref: this.#ref, value: fetched.fetchHead, force: true });
    for (const status of this.#unpushed.values()) await this.#record(status);
  }

  #failure(error: unknown): StatusWriteError {
    if (error instanceof StatusWriteError) return error;
    const message = cleanDescription(error instanceof Error ? error.message : String(error));
    if (isHttpError(error)) {
      const status = error.data.statusCode;
      const permanent = status === 401 || status === 403 || status === 404;
      return new StatusWriteError(`${this.name}: pushing ${this.#ref} failed (HTTP ${status})`, {
        provider: this.name,
        failureClass: permanent ? "permanent" : "transient",
        reason: permanent ? (status === 401 ? "Unauthorized" : "NotFound") : "ForgeUnavailable",
        httpStatus: status,
        cause: error,
      });
    }
    return new StatusWriteError(`${this.name}: pushing ${this.#ref} failed: ${message}`, {
      provider: this.name,
      failureClass: "transient",
      reason: "ForgeUnavailable",
      cause: error,
    });
  }
}
