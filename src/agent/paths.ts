/**
 * Where a resource's path lives on this host, and whether it may be touched. `--root DIR` maps every
 * absolute path P to DIR+P (the embedded demo and tests run against a temporary root, never the real
 * /etc). Confinement: a path must be canonical (no `.` or `..`), lie inside one of the node's declared
 * roots, and stay inside them once symlinks are resolved, so a link cannot lead a write out of them.
 */
import { existsSync, lstatSync, mkdirSync, realpathSync, type Stats } from "node:fs";
import { posix } from "node:path";
import { isInside } from "../model/paths.js";
import { permanent } from "./failure.js";
import { createdDirectory } from "./temporary.js";

/** Path mapping (`--root`) and confinement to the node's roots, for one attempt or observation. */
export class HostPaths {
  /** Mapped roots, each resolved through symlinks once it exists. */
  private readonly resolvedRoots = new Map<string, string>();
  /**
   * Directories already resolved in this attempt (null: does not exist): many files share one.
   * Only the agent changes directories during an attempt, and it tells (`ensureParent`, `forget`).
   */
  private readonly realCache = new Map<string, { path: string; real: string } | null>();

  /**
   * @param root the directory every absolute path is mapped under ("" for the real filesystem root)
   * @param roots the node's declared roots (unmapped absolute paths)
   */
  constructor(
    readonly root: string,
    readonly roots: readonly string[],
  ) {}

  /** The host path of an absolute resource path, without any check (cwd of a command, say). */
  host(path: string): string {
    if (this.root === "") return path;
    // Canonical paths (the common case, and all that `confined` lets through) need no normalising.
    return NOT_CANONICAL.test(path) ? posix.join(this.root, path) : this.root + path;
  }

  /** Where a command or service runs: its declared `cwd` mapped under the root, else the root (or `/` while the root does not exist). */
  workingDirectory(cwd?: string): string {
    if (cwd !== undefined) return this.host(cwd);
    const root = this.host("/");
    return existsSync(root) ? root : "/";
  }

  /**
   * The host path of `path`, refusing (permanently) a path that is not canonical, outside the
   * node's roots, or whose existing parent directories resolve outside them through a symlink.
   * The last component itself is not followed: drivers lstat it and replace or refuse it.
   */
  confined(path: string): string {
    if (!path.startsWith("/") || NOT_CANONICAL.test(path))
      throw permanent(
        "PathNotCanonical",
        `path ${JSON.stringify(path)} is not a canonical absolute path ('.' and '..' segments are refused)`,
      );
    const root = this.roots.find((r) => isInside(path, r));
    if (root === undefined)
      throw permanent(
        "PathOutsideRoots",
        `path ${path} is outside the node's roots (${this.roots.join(", ")}): add a root to the node or move the resource`,
      );
    const hostPath = this.host(path);
    // The root itself is the operator's declaration; below it, whatever exists must stay inside.
    if (path !== trimSlash(root)) {
      const existing = this.deepestExisting(posix.dirname(hostPath));
      if (existing !== null && isInside(existing.path, this.host(trimSlash(root)))) {
        const allowed = this.roots.some((r) => {
          const resolved = this.resolvedRoot(r);
          return resolved !== null && isInside(existing.real, resolved);
        });
        if (!allowed)
          throw permanent(
            "PathEscapesRoots",
            `path ${path} resolves through a symlink to ${existing.real}, outside the node's roots: refusing to follow it`,
          );
      }
    }
    return hostPath;
  }

  /**
   * Creates the missing parent directories of a confined host path (mode 0755), only below the
   * mapped filesystem root. The node's roots and their ancestors may be created: declaring a root
   * says it should exist.
   */
  ensureParent(hostPath: string): void {
    const parent = posix.dirname(hostPath);
    if (this.realCache.get(parent)) return;
    if (mkdirSync(parent, { recursive: true, mode: 0o755 }) !== undefined) createdDirectory(parent);
    this.forgetMissing();
  }

  /** Forgets cached resolutions (after a directory was created, moved or replaced). */
  forget(hostPath?: string): void {
    if (hostPath === undefined) this.realCache.clear();
    else
      for (const key of this.realCache.keys())
        if (key === hostPath || key.startsWith(`${hostPath}/`)) this.realCache.delete(key);
    this.forgetMissing();
  }

  private forgetMissing(): void {
    for (const [key, value] of this.realCache) if (value === null) this.realCache.delete(key);
  }

  private resolvedRoot(root: string): string | null {
    const cached = this.resolvedRoots.get(root);
    if (cached !== undefined) return cached;
    const host = this.host(trimSlash(root));
    const existing = this.deepestExisting(host);
    if (existing?.path !== host) return null;
    this.resolvedRoots.set(root, existing.real);
    return existing.real;
  }

  /** The deepest existing ancestor of `dir` (itself included) and its real path, or null if none. */
  private deepestExisting(dir: string): { path: string; real: string } | null {
    const cached = this.realCache.get(dir);
    if (cached !== undefined) {
      if (cached !== null) return cached;
    } else {
      const real = this.realPath(dir);
      const found = real === null ? null : { path: dir, real };
      this.realCache.set(dir, found);
      if (found) return found;
    }
    const up = posix.dirname(dir);
    return up === dir ? null : this.deepestExisting(up);
  }

  /**
   * Where `dir` really is, or null when it does not exist (a dangling link included). Below a
   * mapped root, a directory that is not a symlink is its parent's real path and its name: one
   * lstat, where realpath reads every component from the filesystem root down.
   */
  private realPath(dir: string): string | null {
    let stats: Stats | undefined;
    try {
      stats = lstatSync(dir, { throwIfNoEntry: false });
    } catch {
      return null;
    }
    if (!stats) return null;
    const parent = posix.dirname(dir);
    if (
      parent !== dir &&
      stats.isDirectory() &&
      this.roots.some((root) => isInside(parent, this.host(trimSlash(root))))
    ) {
      const above = this.deepestExisting(parent);
      if (above?.path === parent) return `${above.real === "/" ? "" : above.real}/${posix.basename(dir)}`;
    }
    try {
      return realpathSync.native(dir);
    } catch {
      return null;
    }
  }
}

/** A `.` or `..` segment, or an empty one (`//`). */
const NOT_CANONICAL = /\/\.\.?(\/|$)|\/\//;

function trimSlash(path: string): string {
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

/** True when something (anything, even a dangling link) exists at `hostPath`. */
export function existsNoFollow(hostPath: string): boolean {
  try {
    lstatSync(hostPath);
    return true;
  } catch {
    return false;
  }
}
