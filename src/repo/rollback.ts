/**
 * `steward rollback`: undo a change by adding a commit, never by rewriting history. Either a revert
 * of one commit (its changes undone, file by file, refusing when a later commit changed the same
 * file again) or, with `restore`, a commit whose tree is exactly that of an earlier revision. The
 * commit is written with isomorphic-git on the branch (compare-and-swap: refused if the branch
 * moved meanwhile), the working tree is updated, and with `push` it is pushed over HTTP(S). The
 * syncer then turns it into new generations like any other commit.
 */
import fs, { readFileSync } from "node:fs";
import { join } from "node:path";
import git, { type HttpClient, type TreeEntry as IsoTreeEntry } from "isomorphic-git";
import { type ParsedCommit, subject } from "./commits.js";
import { type RepoError, RollbackRefusedError, SourceError } from "./errors.js";
import {
  credentialsFromEnv,
  describeLocation,
  FleetRepository,
  type SourceLocation,
  workingTreeChanges,
} from "./git.js";
import type { Clock } from "./syncer.js";

/** What to roll back, where, and how. */
export interface RollbackRequest {
  location: SourceLocation;
  /** The commit to revert, or (mode `restore`) the commit whose tree to restore. Any commit-ish. */
  revision: string;
  mode: "revert" | "restore";
  /** The branch to commit on. Default: the checked-out branch (local), `main` (URL). */
  branch?: string;
  push: boolean;
  /** Author (STEWARD_GIT_AUTHOR_NAME/EMAIL, else git config) and credentials (STEWARD_GIT_TOKEN...). */
  env: NodeJS.ProcessEnv;
  /** Where a URL is mirrored: `<state>/git`. */
  cacheDir: string;
  clock?: Clock;
  http?: HttpClient;
}

/** The commit written, and whether it was pushed. */
export interface RollbackResult {
  commit: string;
  branch: string;
  /** The branch head the commit was made on. */
  parent: string;
  /** The reverted commit, or the one whose tree was restored. */
  target: string;
  message: string;
  /** Files the commit changes. */
  paths: string[];
  pushed: boolean;
}

interface Edit {
  oid: string;
  mode: string;
}

/** Writes (and optionally pushes) the rollback commit; throws RollbackRefusedError when it must not. */
export async function rollback(request: RollbackRequest): Promise<RollbackResult> {
  const { location } = request;
  if (location.kind === "url" && !request.push)
    throw new RollbackRefusedError(
      "unpushed",
      `a rollback of ${location.url} is a commit that exists only once pushed: add --push`,
    );
  const credentials = credentialsFromEnv(request.env);
  const remote: { cacheDir: string; credentials?: typeof credentials; http?: HttpClient } = {
    cacheDir: request.cacheDir,
  };
  if (credentials) remote.credentials = credentials;
  if (request.http) remote.http = request.http;
  const repo = FleetRepository.open(location, remote);
  try {
    const where = describeLocation(location);
    let branch: string;
    let base: string;
    let workdir: string | undefined;
    let pushUrl: string | undefined;
    if (location.kind === "url") {
      branch = request.branch ?? "main";
      base = await repo.fetch(branch);
      pushUrl = location.url;
    } else {
      const local = localBranch(repo, location.path, request.branch);
      branch = local.branch;
      workdir = local.workdir;
      base = await repo.resolve(`refs/heads/${branch}`);
      if (workdir) await refuseDirty(workdir, repo.gitdir);
      if (request.push) {
        pushUrl = await originUrl(repo);
        const remoteHead = await repo.fetchFrom("origin", pushUrl, branch);
        if (remoteHead !== base)
          throw new RollbackRefusedError(
            "moved",
            `branch ${branch} moved: local ${base.slice(0, 12)}, origin ${remoteHead.slice(0, 12)}. Pull (or push) first, then roll back`,
            { local: base, remote: remoteHead },
          );
      }
    }

    const target = repo.commit(await repo.resolve(request.revision));
    const head = repo.commit(base);
    const tree =
      request.mode === "restore" ? target.tree : await revertTree(repo, head, target, request.revision);
    if (tree === head.tree)
      throw new RollbackRefusedError(
        "nothing",
        request.mode === "restore"
          ? `${branch} already has the tree of ${target.oid.slice(0, 12)}: nothing to restore`
          : `the changes of ${target.oid.slice(0, 12)} are already undone on ${branch}: nothing to revert`,
      );
    const paths = repo.trees.diff(head.tree, tree).map((change) => change.path);
    const message = rollbackMessage(request.mode, target);
    const author = await authorOf(repo, request.env, (request.clock?.now() ?? new Date()).getTime());
    const commit = await git.writeCommit({
      fs,
      gitdir: repo.gitdir,
      commit: { tree, parent: [base], author, committer: author, message },
    });

    // Compare-and-swap: the branch must still be where the commit was made.
    const now = await repo.resolve(`refs/heads/${branch}`);
    if (now !== base)
      throw new RollbackRefusedError(
        "moved",
        `branch ${branch} moved under the rollback (${base.slice(0, 12)} → ${now.slice(0, 12)}): nothing was changed; run it again`,
        { expected: base, found: now },
      );
    await git.writeRef({ fs, gitdir: repo.gitdir, ref: `refs/heads/${branch}`, value: commit, force: true });
    if (workdir)
      await git.checkout({
        fs,
        dir: workdir,
        gitdir: repo.gitdir,
        ref: branch,
        filepaths: paths,
        force: true,
      });

    let pushed = false;
    if (request.push && pushUrl) {
      try {
        await repo.pushTo(pushUrl, branch);
      } catch (error) {
        if ((error as RepoError).code === "E_PUSH_REJECTED")
          throw new RollbackRefusedError(
            "moved",
            `the remote branch ${branch} moved while rolling back; the commit is on ${where} but not pushed: pull, then push`,
          );
        throw error;
      }
      pushed = true;
    }
    return { commit, branch, parent: base, target: target.oid, message, paths, pushed };
  } finally {
    repo.close();
  }
}

/** The message: what is reverted (git's own `Revert "..."` form) or restored, by id and subject. */
export function rollbackMessage(mode: RollbackRequest["mode"], target: ParsedCommit): string {
  const title = subject(target.message);
  if (mode === "restore")
    return `Restore the fleet to ${target.oid.slice(0, 12)} "${title}"\n\nThis restores the tree of commit ${target.oid}, undoing the changes made after it.\nWritten by steward rollback --to.\n`;
  const mainline = target.parents.length > 1 ? " (against its first parent)" : "";
  return `Revert "${title}"\n\nThis reverts commit ${target.oid}${mainline}.\nWritten by steward rollback.\n`;
}

/** The head's tree with the target's changes undone; refuses files changed again since. */
async function revertTree(
  repo: FleetRepository,
  head: ParsedCommit,
  target: ParsedCommit,
  revision: string,
): Promise<string> {
  const parentOid = target.parents[0];
  if (!parentOid)
    throw new RollbackRefusedError(
      "nothing",
      `${revision} is the first commit: there is no earlier state to revert to; use --to with a later commit`,
    );
  const parent = repo.commit(parentOid);
  const edits = new Map<string, Edit | null>();
  const conflicts: string[] = [];
  for (const change of repo.trees.diff(parent.tree, target.tree)) {
    const now = entryAt(repo, head.tree, change.path);
    const matchesTarget = change.after ? now?.oid === change.after && now.mode === change.afterMode : !now;
    const alreadyUndone = change.before ? now?.oid === change.before && now.mode === change.beforeMode : !now;
    if (alreadyUndone) continue;
    if (!matchesTarget) {
      conflicts.push(change.path);
      continue;
    }
    edits.set(change.path, change.before ? { oid: change.before, mode: change.beforeMode! } : null);
  }
  if (conflicts.length > 0)
    throw new RollbackRefusedError(
      "conflict",
      `cannot revert ${target.oid.slice(0, 12)}: ${conflicts.slice(0, 5).join(", ")}${conflicts.length > 5 ? ` and ${conflicts.length - 5} more` : ""} changed again after it. Revert the later commits first, or restore a whole revision with --to`,
      { conflicts },
    );
  return (await editTree(repo, head.tree, [...edits.entries()])) ?? (await emptyTree(repo));
}

/** The blob entry at `path` in a tree, if any. */
function entryAt(
  repo: FleetRepository,
  tree: string,
  path: string,
): { oid: string; mode: string } | undefined {
  let current = tree;
  const parts = path.split("/");
  for (const [i, name] of parts.entries()) {
    const entry = repo.reader.readTree(current).find((e) => e.name === name);
    if (!entry) return undefined;
    if (i === parts.length - 1)
      return entry.type === "blob" ? { oid: entry.oid, mode: entry.mode } : undefined;
    if (entry.type !== "tree") return undefined;
    current = entry.oid;
  }
  return undefined;
}

/** Writes `tree` with `edits` applied (null deletes); returns the new id, undefined when empty. */
export async function editTree(
  repo: FleetRepository,
  tree: string | undefined,
  edits: [string, Edit | null][],
): Promise<string | undefined> {
  const entries = new Map<string, IsoTreeEntry>();
  for (const entry of tree ? repo.reader.readTree(tree) : [])
    entries.set(entry.name, {
      mode: entry.mode.padStart(6, "0"),
      path: entry.name,
      oid: entry.oid,
      type: entry.type,
    });
  const nested = new Map<string, [string, Edit | null][]>();
  for (const [path, edit] of edits) {
    const slash = path.indexOf("/");
    if (slash < 0) {
      if (edit) entries.set(path, { mode: edit.mode, path, oid: edit.oid, type: "blob" });
      else entries.delete(path);
    } else {
      const name = path.slice(0, slash);
      nested.set(name, [...(nested.get(name) ?? []), [path.slice(slash + 1), edit]]);
    }
  }
  for (const [name, below] of nested) {
    const existing = entries.get(name);
    const sub = await editTree(repo, existing?.type === "tree" ? existing.oid : undefined, below);
    if (sub) entries.set(name, { mode: "040000", path: name, oid: sub, type: "tree" });
    else entries.delete(name);
  }
  if (entries.size === 0) return undefined;
  return git.writeTree({ fs, gitdir: repo.gitdir, tree: [...entries.values()] });
}

function emptyTree(repo: FleetRepository): Promise<string> {
  return git.writeTree({ fs, gitdir: repo.gitdir, tree: [] });
}

/** The checked-out branch (or `requested`) and the working tree to update when it is checked out. */
function localBranch(
  repo: FleetRepository,
  path: string,
  requested: string | undefined,
): { branch: string; workdir?: string } {
  const bare = repo.gitdir === path;
  const headFile = readFileSync(join(repo.gitdir, "HEAD"), "utf8").trim();
  const current = /^ref: refs\/heads\/(.+)$/.exec(headFile)?.[1];
  if (!bare && repo.gitdir !== join(path, ".git"))
    throw new SourceError(`${path} is a linked worktree; run steward rollback in the main clone`);
  const branch = requested ?? current;
  if (!branch)
    throw new RollbackRefusedError(
      "moved",
      `HEAD of ${path} is detached: check out the tracked branch, or pass --branch`,
    );
  return bare || branch !== current ? { branch } : { branch, workdir: path };
}

/** Refuses when tracked files have uncommitted changes (untracked files are fine). */
async function refuseDirty(dir: string, gitdir: string): Promise<void> {
  const dirty = (await workingTreeChanges(dir, gitdir)).changed;
  if (dirty.length > 0)
    throw new RollbackRefusedError(
      "dirty",
      `the working tree of ${dir} has uncommitted changes (${dirty.slice(0, 5).join(", ")}${dirty.length > 5 ? ", ..." : ""}): commit or stash them first`,
      { paths: dirty },
    );
}

async function originUrl(repo: FleetRepository): Promise<string> {
  const url = (await git.getConfig({ fs, gitdir: repo.gitdir, path: "remote.origin.url" })) as
    | string
    | undefined;
  if (!url)
    throw new SourceError(
      `${repo.describe()} has no remote "origin" to push to: add one, or roll back without --push`,
    );
  if (!/^https?:\/\//.test(url))
    throw new SourceError(
      `remote "origin" of ${repo.describe()} is ${url}; steward pushes over HTTP(S) only: push the rollback commit with git push`,
    );
  return url;
}

/**
 * The author: STEWARD_GIT_AUTHOR_NAME/EMAIL, else user.name/email from the repository's or the
 * user's git config. `missing` is the error when there is none (a rollback's by default).
 */
export async function authorOf(
  repo: FleetRepository,
  env: NodeJS.ProcessEnv,
  nowMs: number,
  missing: () => Error = () =>
    new RollbackRefusedError(
      "author",
      "no author for the rollback commit: set STEWARD_GIT_AUTHOR_NAME and STEWARD_GIT_AUTHOR_EMAIL, or git config user.name and user.email",
    ),
): Promise<{ name: string; email: string; timestamp: number; timezoneOffset: number }> {
  const fromConfig = async (key: "name" | "email") =>
    ((await git.getConfig({ fs, gitdir: repo.gitdir, path: `user.${key}` })) as string | undefined) ??
    globalGitConfig(env, key);
  const name = env.STEWARD_GIT_AUTHOR_NAME || (await fromConfig("name"));
  const email = env.STEWARD_GIT_AUTHOR_EMAIL || (await fromConfig("email"));
  if (!name || !email) throw missing();
  return { name, email, timestamp: Math.floor(nowMs / 1000), timezoneOffset: 0 };
}

/** `user.name`/`user.email` from ~/.gitconfig or $XDG_CONFIG_HOME/git/config (isomorphic-git reads only the repository's). */
function globalGitConfig(env: NodeJS.ProcessEnv, key: "name" | "email"): string | undefined {
  const home = env.HOME ?? "";
  const files = [
    join(env.XDG_CONFIG_HOME || join(home, ".config"), "git", "config"),
    join(home, ".gitconfig"),
  ];
  let found: string | undefined;
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    let section = "";
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      const header = /^\[([^\]\s]+)[^\]]*\]$/.exec(line);
      if (header) section = header[1]!.toLowerCase();
      else if (section === "user") {
        const match = /^([A-Za-z]+)\s*=\s*(.*)$/.exec(line);
        if (match && match[1]!.toLowerCase() === key) found = match[2]!.replace(/^"(.*)"$/, "$1");
      }
    }
  }
  return found;
}
