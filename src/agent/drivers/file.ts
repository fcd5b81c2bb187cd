/**
 * `file`: a regular file with exact content (by hash), mode and ownership. Writes are atomic (temp
 * file, fsync, rename) so a crash never leaves a torn file; content replaced that the previous
 * generation had not declared (a hand edit) is kept in the state directory first (for a secret,
 * encrypted for the host's own identity), and `ensure:
 * absent` moves the file to the state directory's trash instead of deleting it. A symlink or directory where the file should be
 * is a conflict for a person, never silently replaced.
 */
import { unlinkSync } from "node:fs";
import { posix } from "node:path";
import type { FileResource } from "../../model/generated.js";
import { type AtomicFile, writeFileAtomic, writeFilesAtomic } from "../atomic.js";
import type { Applied, Driver, DriverContext, Plan, PlanFacts } from "../driver.js";
import { permanent } from "../failure.js";
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
import type { InstanceSecrets } from "../secrets.js";

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
  if (before.secret === true) return before.source ? ctx.secrets?.heldDigest(before.source) : undefined;
  return declaredHash(before);
}

/** The instance's secrets, for a secret file (a bundle that uses secrets always has them). */
function secretsOf(resource: FileResource, ctx: DriverContext): InstanceSecrets {
  if (!ctx.secrets || !resource.source)
    throw permanent("SecretMissing", `file ${resource.path} is a secret but the bundle carries no secrets`);
  return ctx.secrets;
}

/**
 * The hash a plan compares the observed content with: of the declared content, or for a secret
 * the digest of its plaintext (observed content of a secret file is digested the same way).
 */
function wantedHash(resource: FileResource, facts: PlanFacts): string | null {
  if (resource.secret !== true) return declaredHash(resource);
  const digest = facts.secretDigests?.[resource.source ?? ""];
  if (digest === undefined)
    throw permanent("SecretMissing", `the plaintext of secret ${resource.source} is not known on this host`);
  return digest;
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
    const secret = resource.secret === true;
    // A secret's content is known by its keyed digest only (not even its size): a report never
    // carries more of it.
    const observation: FileObservation = secret
      ? { exists: true, type, hash: secretsOf(resource, ctx).digestOf(bytes), ownership: ownershipOf(stats) }
      : { exists: true, type, hash: sha256(bytes), size: stats.size, ownership: ownershipOf(stats) };
    if (bytes.length <= REMEMBERED_BYTES) observedBytes.set(observation, bytes);
    return observation;
  },

  plan(resource, observed, facts): Plan {
    if (resource.ensure === "absent")
      return absentPlan(resource.path, observed, ["file", "symlink"], `present (${observed.type})`);
    const wanted = wantedHash(resource, facts);
    if (!observed.exists)
      return { action: "create", diff: [`absent → file ${wanted ? short(wanted) : "(empty)"}`] };
    if (observed.type !== "file")
      return { action: "update", diff: [], conflict: typeConflict(resource.path, observed.type!, "file") };
    const diff: string[] = [];
    if (wanted !== null && wanted !== observed.hash)
      diff.push(`content ${short(observed.hash)} → ${short(wanted)}`);
    diff.push(...ownershipDiff(resource, observed.ownership!));
    return diff.length === 0 ? { action: "none", diff } : { action: "update", diff };
  },

  async apply(resource, plan, observed, ctx): Promise<Applied> {
    const host = ctx.paths.confined(resource.path);
    if (plan.action === "remove") return removeToTrash(host, resource.path, ctx);
    const secret = resource.secret === true ? secretsOf(resource, ctx) : undefined;
    const wanted = secret ? secret.digests[resource.source!] : declaredHash(resource);
    const contentChanges = !observed.exists || (wanted !== null && wanted !== observed.hash);
    if (!contentChanges) {
      applyOwnership(host, resource, observed.ownership);
      return { action: "updated" };
    }
    // A secret is decrypted only now that its content is to be written.
    const bytes = secret ? await secret.fileBytes(resource.source!) : declaredBytes(resource);
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
        // What a secret file held is kept sealed for this host alone: never in the clear.
        const keep = secret
          ? ctx.store.keepSealed(await secret.sealForHost(previous), secret.digestOf(previous))
          : ctx.store.keep(previous, remembered ? observed.hash! : sha256(previous));
        message = secret
          ? `previous content kept at ${keep.path}, encrypted for this host's own age identity`
          : `previous content kept at ${keep.path}`;
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
