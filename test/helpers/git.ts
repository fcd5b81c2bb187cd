/**
 * Temporary git repositories made with the real `git` CLI, for tests of anything that reads or
 * writes a fleet repository. Each repository gets its own HOME (no user config leaks in), a fixed
 * identity and strictly increasing commit dates, so history order is deterministic.
 *
 *   const repo = makeRepo();
 *   const sha = repo.commit("add web", { "assignments/web.yaml": "..." });
 *   const remote = repo.bareClone();        // serve it with serveGit() from git-http.ts
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** A fresh temporary directory; removed by `removeTempDirs()` (call it in afterAll/afterEach). */
export function tempDir(prefix = "steward-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  created.push(dir);
  return dir;
}

const created: string[] = [];

/** Removes every directory made by `tempDir` so far. */
export function removeTempDirs(): void {
  for (const dir of created.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** Files to write (text or bytes) or, with `null`, to delete. Paths are relative, `/`-separated. */
export type FileChanges = Record<string, string | Uint8Array | null>;

export interface CommitOptions {
  author?: { name: string; email: string };
  /** Extra `-c key=value` settings for this commit (e.g. signing). */
  config?: Record<string, string>;
  /** `git commit -S`: sign with the configured key. */
  sign?: boolean;
  /** Allow a commit that changes nothing. */
  allowEmpty?: boolean;
  /** Extra environment for this commit (e.g. GNUPGHOME). */
  env?: Record<string, string>;
}

/** A repository with a working tree (or a bare one, without the file helpers). */
export interface TempRepo {
  dir: string;
  /** The environment git runs with (own HOME, identity, dates). */
  env: NodeJS.ProcessEnv;
  /** Runs `git ARGS` in the repository and returns its trimmed stdout. Throws with stderr on failure. */
  git(...args: string[]): string;
  /** Like `git`, with `input` on stdin. */
  gitWithInput(input: string, ...args: string[]): string;
  /**
   * Like `git`, without blocking the event loop: use it for git commands that talk to a server
   * running in the test process (serveGit), which a synchronous call would deadlock.
   */
  gitAsync(...args: string[]): Promise<string>;
  /** Writes and deletes files in the working tree. */
  write(files: FileChanges): void;
  /** Applies `files`, stages everything and commits; returns the new commit id. */
  commit(message: string, files?: FileChanges, options?: CommitOptions): string;
  /** The commit id `rev` names (default HEAD). */
  rev(rev?: string): string;
  /** A bare clone next to it, HEAD pointing at the branch, ready to serve or push to. */
  bareClone(): TempRepo;
}

let clock = Date.UTC(2026, 0, 1) / 1000;

/** Commit dates one minute apart across all repositories of the test run. */
function nextDate(): string {
  clock += 60;
  return `${clock} +0000`;
}

function gitEnv(home: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_AUTHOR_NAME: "Test Author",
    GIT_AUTHOR_EMAIL: "author@example.test",
    GIT_COMMITTER_NAME: "Test Author",
    GIT_COMMITTER_EMAIL: "author@example.test",
    LANG: "C",
    // Never prompt for credentials: a test that needs them passes them.
    GIT_TERMINAL_PROMPT: "0",
  };
}

function runGit(dir: string, env: NodeJS.ProcessEnv, args: string[], input?: string): string {
  try {
    return execFileSync("git", args, { cwd: dir, env, input, stdio: ["pipe", "pipe", "pipe"] })
      .toString()
      .trim();
  } catch (error) {
    const e = error as { stderr?: Buffer; message: string };
    throw new Error(`git ${args.join(" ")} failed in ${dir}: ${e.stderr?.toString() || e.message}`);
  }
}

function wrap(dir: string, env: NodeJS.ProcessEnv, branch: string): TempRepo {
  const git = (...args: string[]) => runGit(dir, env, args);
  const repo: TempRepo = {
    dir,
    env,
    git,
    gitWithInput: (input, ...args) => runGit(dir, env, args, input),
    gitAsync: (...args) =>
      new Promise((resolve, reject) =>
        execFile("git", args, { cwd: dir, env }, (error, stdout, stderr) =>
          error
            ? reject(new Error(`git ${args.join(" ")} failed in ${dir}: ${stderr || error.message}`))
            : resolve(stdout.trim()),
        ),
      ),
    write(files) {
      for (const [path, content] of Object.entries(files)) {
        const full = join(dir, path);
        if (content === null) unlinkSync(full);
        else {
          mkdirSync(dirname(full), { recursive: true });
          writeFileSync(full, content);
        }
      }
    },
    commit(message, files = {}, options = {}) {
      repo.write(files);
      git("add", "-A");
      const date = nextDate();
      const args: string[] = [];
      for (const [key, value] of Object.entries(options.config ?? {})) args.push("-c", `${key}=${value}`);
      args.push("commit", "-q", "-m", message);
      if (options.sign) args.push("-S");
      if (options.allowEmpty) args.push("--allow-empty");
      const commitEnv: NodeJS.ProcessEnv = {
        ...env,
        ...options.env,
        GIT_AUTHOR_DATE: date,
        GIT_COMMITTER_DATE: date,
      };
      if (options.author) {
        commitEnv.GIT_AUTHOR_NAME = options.author.name;
        commitEnv.GIT_AUTHOR_EMAIL = options.author.email;
      }
      runGit(dir, commitEnv, args);
      return git("rev-parse", "HEAD");
    },
    rev(rev = "HEAD") {
      return git("rev-parse", `${rev}^{commit}`);
    },
    bareClone() {
      const bare = `${tempDir("steward-remote-")}/fleet.git`;
      runGit(dirname(bare), env, ["clone", "-q", "--bare", dir, bare]);
      runGit(bare, env, ["symbolic-ref", "HEAD", `refs/heads/${branch}`]);
      // Accept pushes that rewrite history: force-push tests need it.
      runGit(bare, env, ["config", "receive.denyNonFastForwards", "false"]);
      return wrap(bare, env, branch);
    },
  };
  return repo;
}

/**
 * A new repository on `branch` (default `main`), with `files` committed as "initial" when given.
 * Garbage collection is off, so objects stay where the test put them.
 */
export function makeRepo(options: { branch?: string; files?: FileChanges } = {}): TempRepo {
  const branch = options.branch ?? "main";
  const dir = tempDir("steward-repo-");
  const home = tempDir("steward-home-");
  const env = gitEnv(home);
  runGit(dir, env, ["init", "-q", "-b", branch]);
  runGit(dir, env, ["config", "gc.auto", "0"]);
  const repo = wrap(dir, env, branch);
  if (options.files) repo.commit("initial", options.files);
  return repo;
}
