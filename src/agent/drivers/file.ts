/**
 * `file`: a regular file with exact content (by hash), mode and ownership. Writes are atomic (temp
 * file, fsync, rename) so a crash never leaves a torn file; content replaced that the previous
 * generation had not declared (a hand edit) is kept in the state directory first, and `ensure:
 * absent` moves the file to the state directory's trash instead of deleting it. A symlink or directory where the file should be
 * is a conflict for a person, never silently replaced.
 */
import { unlinkSync } from "node:fs";
import { posix } from "node:path";
import type { FileResource } from "../../model/generated.js";
import { type AtomicFile, writeFileAtomic, writeFilesAtomic } from "../atomic.js";
import type { Applied, Driver, DriverContext, Plan } from "../driver.js";
import {
  absentPlan,
  applyOwnership,
  lstatOrUndefined,
  type NodeType,
  type Ownership,
  ownershipDiff,
  ownershipOf,
  readContent,
  removeToTrash,
  sha256,
  targetOwnership,
  typeConflict,
  typeOf,
} from "../fsnode.js";

/** What is at a file resource's path: its content by hash, size and ownership. */
export interface FileObservation {
  exists: boolean;
  type?: NodeType;
  /** `sha256:<hex>` of the content, for a regular file. */
  hash?: string;
  size?: number;
  ownership?: Ownership;
}

interface FileSnapshot {
  existed: boolean;
  content?: string;
  ownership?: Ownership;
}

const desiredBytes = new WeakMap<FileResource, Buffer | null>();

/** The bytes a file resource declares, or null when it does not manage content. */
export function declaredBytes(resource: FileResource): Buffer | null {
  let bytes = desiredBytes.get(resource);
  if (bytes === undefined) {
    if (resource.content === undefined) bytes = null;
    else bytes = Buffer.from(resource.content, resource.encoding === "base64" ? "base64" : "utf8");
    desiredBytes.set(resource, bytes);
  }
  return bytes;
}

const desiredHashes = new WeakMap<FileResource, string | null>();

function declaredHash(resource: FileResource): string | null {
  let hash = desiredHashes.get(resource);
  if (hash === undefined) {
    const bytes = declaredBytes(resource);
    hash = bytes === null ? null : sha256(bytes);
    desiredHashes.set(resource, hash);
  }
  return hash;
}

/**
 * The bytes an observation hashed, for small files: when the apply that follows replaces the
 * content, it keeps the old copy from these instead of reading and hashing the file again.
 */
const observedBytes = new WeakMap<FileObservation, Buffer>();
const REMEMBERED_BYTES = 16 * 1024;

/** The content hash the bundle held before this apply declared at the same path, if it declared content there. */
function heldHash(resource: FileResource, ctx: DriverContext): string | null | undefined {
  const before = ctx.heldBefore?.(resource.name ?? "");
  if (before?.kind !== "file" || before.path !== resource.path) return undefined;
  return declaredHash(before);
}

function short(hash: string | undefined): string {
  return hash ? hash.slice(0, 19) : "none";
}

/** The `file` driver. */
export const fileDriver: Driver<FileResource, FileObservation, FileSnapshot> = {
  kind: "file",

  async observe(resource, ctx) {
    const host = ctx.paths.confined(resource.path);
    const stats = lstatOrUndefined(host);
    if (!stats) return { exists: false };
    const type = typeOf(stats);
    if (type !== "file") return { exists: true, type };
    const bytes = readContent(host, stats.size);
    const observation: FileObservation = {
      exists: true,
      type,
      hash: sha256(bytes),
      size: stats.size,
      ownership: ownershipOf(stats),
    };
    if (bytes.length <= REMEMBERED_BYTES) observedBytes.set(observation, bytes);
    return observation;
  },

  plan(resource, observed): Plan {
    if (resource.ensure === "absent")
      return absentPlan(resource.path, observed, ["file", "symlink"], `present (${observed.type})`);
    const wantedHash = declaredHash(resource);
    if (!observed.exists)
      return { action: "create", diff: [`absent → file ${wantedHash ? short(wantedHash) : "(empty)"}`] };
    if (observed.type !== "file")
      return { action: "update", diff: [], conflict: typeConflict(resource.path, observed.type!, "file") };
    const diff: string[] = [];
    if (wantedHash !== null && wantedHash !== observed.hash)
      diff.push(`content ${short(observed.hash)} → ${short(wantedHash)}`);
    diff.push(...ownershipDiff(resource, observed.ownership!));
    return diff.length === 0 ? { action: "none", diff } : { action: "update", diff };
  },

  async apply(resource, plan, observed, ctx): Promise<Applied> {
    const host = ctx.paths.confined(resource.path);
    if (plan.action === "remove") return removeToTrash(host, resource.path, ctx);
    const bytes = declaredBytes(resource);
    const contentChanges = !observed.exists || (bytes !== null && declaredHash(resource) !== observed.hash);
    if (!contentChanges) {
      applyOwnership(host, resource, observed.ownership);
      return { action: "updated" };
    }
    const writes: AtomicFile[] = [];
    let message: string | undefined;
    if (observed.exists) {
      if (observed.hash !== undefined && observed.hash === heldHash(resource, ctx)) {
        // What the previous generation declared: it is in the repository's history, not lost.
        message = "previous content was what the previous generation declared";
      } else {
        // Anything else (a hand edit, what was there before steward) is kept before it is replaced:
        // what the observation just read, or (a large file) read again.
        const remembered = observedBytes.get(observed);
        const previous = remembered ?? readContent(host, observed.size ?? 0);
        const keep = ctx.store.keep(previous, remembered ? observed.hash! : sha256(previous));
        message = `previous content kept at ${keep.path}`;
        // The old content is renamed into place before the new content replaces it: both are flushed together.
        if (keep.write) writes.push(keep.write);
      }
    }
    ctx.paths.ensureParent(host);
    const target = targetOwnership(resource, observed.ownership, 0o644);
    writes.push({ path: host, data: bytes ?? Buffer.alloc(0), options: target });
    for (const dir of await writeFilesAtomic(writes, ctx.flusher)) ctx.dirty.add(dir);
    if (!observed.exists) return { action: "created" };
    return { action: "updated", ...(message ? { message } : {}) };
  },

  async capture(resource, observed, ctx) {
    if (!observed.exists || observed.type !== "file") return { existed: observed.exists };
    const host = ctx.paths.confined(resource.path);
    const content = readContent(host, observed.size ?? 0).toString("base64");
    return { existed: true, content, ownership: observed.ownership };
  },

  async restore(resource, snapshot, ctx) {
    const host = ctx.paths.confined(resource.path);
    if (!snapshot.existed) {
      // It did not exist before this attempt wrote it: the bytes are in the bundle, nothing is lost.
      unlinkSync(host);
    } else if (snapshot.content !== undefined) {
      const own = snapshot.ownership!;
      await writeFileAtomic(host, Buffer.from(snapshot.content, "base64"), {
        mode: Number.parseInt(own.mode, 8),
        uid: own.uid,
        gid: own.gid,
      });
    }
    ctx.dirty.add(posix.dirname(host));
  },
};
