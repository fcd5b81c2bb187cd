/**
 * What file, directory and symlink drivers share: reading a path without following it, comparing
 * mode and ownership, and moving things out of the way recoverably instead of deleting them.
 */
import { hash } from "node:crypto";
import {
  chmodSync,
  chownSync,
  closeSync,
  constants,
  cpSync,
  lstatSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  type Stats,
} from "node:fs";
import { posix } from "node:path";
import { accountId, accountName } from "./accounts.js";
import type { Applied, DriverContext, Plan } from "./driver.js";

/** What is at a path, read without following a symlink. */
export type NodeType = "file" | "directory" | "symlink" | "other";

/** Mode, owner and group as read from the system. */
export interface Ownership {
  mode: string;
  uid: number;
  gid: number;
  owner: string;
  group: string;
}

/** Declared mode, owner and group (each optional: undeclared means unmanaged). */
export interface DeclaredOwnership {
  mode?: string;
  owner?: string;
  group?: string;
}

/** lstat, or undefined when nothing is there (without the cost of an exception in the common case). */
export function lstatOrUndefined(hostPath: string): Stats | undefined {
  try {
    return lstatSync(hostPath, { throwIfNoEntry: false });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw error;
  }
}

/** `sha256:<hex>` of some bytes: how content is compared and reported. */
export function sha256(bytes: Uint8Array | string): string {
  return `sha256:${hash("sha256", bytes, "hex")}`;
}

/**
 * The bytes of a regular file whose size lstat said (it may have changed since: read to the end).
 * Opened without following a symlink, should one have replaced the file in between.
 */
export function readContent(hostPath: string, size: number): Buffer {
  const fd = openSync(hostPath, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    let buffer = Buffer.allocUnsafe(size + 1);
    let length = 0;
    for (;;) {
      if (length === buffer.length) buffer = Buffer.concat([buffer, Buffer.allocUnsafe(buffer.length)]);
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
    }
    return buffer.subarray(0, length);
  } finally {
    closeSync(fd);
  }
}

/** The kind of thing an lstat describes. */
export function typeOf(stats: Stats): NodeType {
  if (stats.isSymbolicLink()) return "symlink";
  if (stats.isFile()) return "file";
  if (stats.isDirectory()) return "directory";
  return "other";
}

/** Mode, owner and group of what an lstat describes, with names where the host knows them. */
export function ownershipOf(stats: Stats): Ownership {
  return {
    mode: `0${(stats.mode & 0o777).toString(8).padStart(3, "0")}`,
    uid: stats.uid,
    gid: stats.gid,
    owner: accountName("owner", stats.uid),
    group: accountName("group", stats.gid),
  };
}

function sameAccount(declared: string, id: number, name: string): boolean {
  return /^[0-9]+$/.test(declared) ? Number(declared) === id : declared === name;
}

/** Diff lines for declared mode, owner and group that differ from what is observed. Pure. */
export function ownershipDiff(declared: DeclaredOwnership, observed: Ownership): string[] {
  const diff: string[] = [];
  if (declared.mode !== undefined && declared.mode !== observed.mode)
    diff.push(`mode ${observed.mode} → ${declared.mode}`);
  if (declared.owner !== undefined && !sameAccount(declared.owner, observed.uid, observed.owner))
    diff.push(`owner ${observed.owner} → ${declared.owner}`);
  if (declared.group !== undefined && !sameAccount(declared.group, observed.gid, observed.group))
    diff.push(`group ${observed.group} → ${declared.group}`);
  return diff;
}

/** Numeric mode, uid and gid to write: declared ones, else what is there now (undefined: the default). */
export function targetOwnership(
  declared: DeclaredOwnership,
  current: Ownership | undefined,
  defaultMode: number,
): { mode: number; uid?: number; gid?: number } {
  return {
    mode:
      declared.mode !== undefined
        ? Number.parseInt(declared.mode, 8)
        : current
          ? Number.parseInt(current.mode, 8)
          : defaultMode,
    uid: declared.owner !== undefined ? accountId("owner", declared.owner) : current?.uid,
    gid: declared.group !== undefined ? accountId("group", declared.group) : current?.gid,
  };
}

/** Sets declared mode, owner and group in place. */
export function applyOwnership(
  hostPath: string,
  declared: DeclaredOwnership,
  current: Ownership | undefined,
): void {
  const target = targetOwnership(declared, current, 0o644);
  if (declared.owner !== undefined || declared.group !== undefined)
    chownSync(hostPath, target.uid ?? -1, target.gid ?? -1);
  if (declared.mode !== undefined) chmodSync(hostPath, target.mode);
}

/**
 * Moves whatever is at `hostPath` to the state directory's trash, where it stays recoverable
 * (`ensure: absent` never deletes). Returns where it went.
 */
export function moveToTrash(hostPath: string, resourcePath: string, ctx: DriverContext): string {
  const destination = ctx.store.trashPath(resourcePath, ctx.clock());
  try {
    renameSync(hostPath, destination);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
    // Another filesystem: copy, then remove the original only once the copy is complete.
    cpSync(hostPath, destination, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
    rmSync(hostPath, { recursive: true, force: true });
  }
  ctx.dirty.add(posix.dirname(hostPath));
  ctx.paths.forget(hostPath);
  return destination;
}

/**
 * The plan of `ensure: absent`: nothing to do when nothing is there; else move it away, unless
 * what is there is a kind the resource does not manage (a directory where a file was declared).
 */
export function absentPlan(
  path: string,
  observed: { exists: boolean; type?: NodeType },
  removable: readonly NodeType[],
  what: string,
): Plan {
  if (!observed.exists) return { action: "none", diff: [] };
  if (!removable.includes(observed.type!))
    return { action: "remove", diff: [], conflict: typeConflict(path, observed.type!, removable[0]!) };
  return { action: "remove", diff: [`${what} → absent`] };
}

/** Applies a `remove` plan: what is there goes to the trash, recoverable. */
export function removeToTrash(hostPath: string, resourcePath: string, ctx: DriverContext): Applied {
  return { action: "removed", message: `moved to ${moveToTrash(hostPath, resourcePath, ctx)}` };
}

/** The conflict a plan reports when something of another type is where a resource should be. */
export function typeConflict(
  path: string,
  found: NodeType,
  wanted: NodeType,
): { reason: string; message: string } {
  return {
    reason: "TypeConflict",
    message: `${path} is a ${found}, not a ${wanted}: steward does not replace it on its own; move it away, or declare it with ensure: absent first`,
  };
}
