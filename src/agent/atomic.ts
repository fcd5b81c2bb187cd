/**
 * Crash-safe file writes: the bytes go to a temporary file in the same directory, are flushed to
 * disk, and only then renamed over the destination. A crash at any point leaves either the old file
 * or the new one, never a torn mix; what it leaves under the temporary name is removed by the next
 * process to write in that directory (see temporary.ts). Used for managed files and for the agent's
 * own state.
 */
import { spawn } from "node:child_process";
import {
  closeSync,
  fchmodSync,
  fchownSync,
  fdatasync,
  fsync,
  fsyncSync,
  openSync,
  renameSync,
  statfsSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname } from "node:path";
import { createTemporary, settleTemporary } from "./temporary.js";

/** Mode and ownership of a file written atomically, and a seam for crash tests. */
export interface AtomicWriteOptions {
  /** Permission bits of the new file (default 0o644). */
  mode?: number;
  /** Owner and group of the new file; left as the writer's when undefined. */
  uid?: number;
  gid?: number;
  /**
   * Called after the temporary file is complete and flushed, just before the rename. A seam for
   * tests that crash the process at exactly that point.
   */
  beforeRename?: (temporary: string, destination: string) => void;
}

/** Writes the temporary file completely (bytes, mode, owner) and flushes it; returns its path. */
function writeTemporary(
  path: string,
  data: Uint8Array | string,
  options: AtomicWriteOptions,
): { tmp: string; fd: number } {
  // `wx`: never follow or reuse whatever is already at the temporary name.
  const { temporary: tmp, made: fd } = createTemporary(path, "file", (name) =>
    openSync(name, "wx", options.mode ?? 0o644),
  );
  try {
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    let offset = 0;
    while (offset < bytes.byteLength) offset += writeSync(fd, bytes, offset, bytes.byteLength - offset);
    // The umask may have narrowed the mode given to open.
    fchmodSync(fd, options.mode ?? 0o644);
    if (options.uid !== undefined || options.gid !== undefined)
      fchownSync(fd, options.uid ?? -1, options.gid ?? -1);
    return { tmp, fd };
  } catch (error) {
    closeSync(fd);
    safeUnlink(tmp);
    throw error;
  }
}

/** Removes a temporary file this process made. */
function safeUnlink(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone: nothing to clean.
  }
  settleTemporary(path);
}

/** Writes `data` to `path` atomically (temp file, fsync, rename), synchronously. */
export function writeFileAtomicSync(
  path: string,
  data: Uint8Array | string,
  options: AtomicWriteOptions = {},
): void {
  const { tmp, fd } = writeTemporary(path, data, options);
  try {
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    safeUnlink(tmp);
    throw error;
  }
  closeSync(fd);
  commit(tmp, path, options);
}

/** From this many files on, one syncfs beats a flush per file. */
const SYNCFS_FROM = 8;
/** Whether `sync -f` (syncfs) worked on this host; cleared at the first failure. */
let syncfsWorks = true;

interface PendingFlush {
  path: string;
  /** A directory's entries (a rename in it), or a file's bytes. */
  directory: boolean;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Flushes to disk in groups (a group commit). Every flush asked for while no group is being flushed
 * joins the next group, and a flush resolves only when its whole group is on disk. One group is in
 * flight at a time: the files of many applies (many nodes of the local transport, many agents in
 * one process) share one flush instead of queueing a flush each on the disk's journal — on ext4 a
 * create or rename waits behind a journal commit, and a thousand interleaved write-flush-rename
 * sequences were three times slower. A large group is flushed with one syncfs per filesystem
 * (coreutils `sync -f`: Node has no binding for it), which writes every file's bytes and every
 * directory's entries; a small one, or a host without `sync -f`, with fdatasync per file and fsync
 * per directory, in parallel. On a filesystem kept in memory (tmpfs) nothing outlives a power cut,
 * so a flush there resolves at once, with no system call.
 */
export class FlushBatch {
  private pending: PendingFlush[] = [];
  private flushing = false;
  private scheduled = false;

  /** Resolves once the file at `path` (complete and closed) is on disk. */
  flush(path: string): Promise<void> {
    return this.enqueue(path, false);
  }

  /**
   * Resolves once the entries of the directory at `path` are on disk (a rename is durable only once
   * its directory is). Never rejects: some filesystems refuse to flush a directory, and the rename
   * itself already happened.
   */
  flushDirectory(path: string): Promise<void> {
    return this.enqueue(path, true);
  }

  private enqueue(path: string, directory: boolean): Promise<void> {
    // On a filesystem kept in memory there is nothing to write.
    if (inMemory(directory ? path : dirname(path))) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.pending.push({ path, directory, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.flushing || this.scheduled || this.pending.length === 0) return;
    this.scheduled = true;
    // The rest of this turn's writes join the group.
    setImmediate(() => {
      this.scheduled = false;
      void this.run();
    });
  }

  private async run(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    this.flushing = true;
    try {
      if (batch.length >= SYNCFS_FROM && syncfsWorks && (await syncFilesystems(batch))) {
        for (const entry of batch) entry.resolve();
        return;
      }
      const results = await Promise.allSettled(
        batch.map(({ path, directory }) => (directory ? fsyncDirectory(path) : flushFile(path))),
      );
      results.forEach((result, i) => {
        if (result.status === "fulfilled") batch[i]!.resolve();
        else batch[i]!.reject(result.reason);
      });
    } finally {
      this.flushing = false;
      this.schedule();
    }
  }
}

/**
 * The flushes of this process (or worker thread): every agent in it shares the group, so the local
 * transport's nodes and a NATS bench's agents flush together.
 */
export const processFlushes = new FlushBatch();

/** statfs types of filesystems kept in memory only (tmpfs, ramfs): a flush there has nothing to write. */
const MEMORY_FILESYSTEMS = new Set([0x01021994, 0x858458f6]);
/** How long what `inMemory` learnt of a directory is trusted (a filesystem may be mounted over it). */
const FILESYSTEM_TTL_MS = 10_000;
/** Directories whose filesystem `inMemory` looked at: whether it is in memory, and until when that holds. */
const filesystems = new Map<string, { memory: boolean; until: number }>();

/** Whether `dir` is on a filesystem kept in memory; false when that cannot be told (then it is flushed). */
function inMemory(dir: string): boolean {
  const now = Date.now();
  const known = filesystems.get(dir);
  if (known && known.until > now) return known.memory;
  let memory = false;
  try {
    memory = MEMORY_FILESYSTEMS.has(statfsSync(dir).type);
  } catch {
    // Gone or unreadable: flushed as before, which reports the problem if there is one.
  }
  if (filesystems.size >= 10_000) filesystems.clear();
  filesystems.set(dir, { memory, until: now + FILESYSTEM_TTL_MS });
  return memory;
}

/** syncfs on the filesystem of each entry (one per device); false when that is not possible here. */
async function syncFilesystems(entries: readonly PendingFlush[]): Promise<boolean> {
  const byDevice = new Map<number, string>();
  // A file is on its directory's filesystem (a mount point's stat is the mounted one's): one stat
  // per directory, not per file.
  const seen = new Set<string>();
  try {
    for (const { path, directory } of entries) {
      const dir = directory ? path : dirname(path);
      if (seen.has(dir)) continue;
      seen.add(dir);
      const device = statSync(dir).dev;
      if (!byDevice.has(device)) byDevice.set(device, dir);
    }
  } catch {
    return false;
  }
  const results = await Promise.all(
    [...byDevice.values()].map(
      (path) =>
        new Promise<boolean>((resolve) => {
          const child = spawn("sync", ["--file-system", path], { stdio: "ignore" });
          child.on("error", () => resolve(false));
          child.on("exit", (code) => resolve(code === 0));
        }),
    ),
  );
  if (results.every(Boolean)) return true;
  syncfsWorks = false;
  return false;
}

/** fdatasync on a file by path: the bytes and the size, without timestamps nobody needs after a crash. */
function flushFile(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch (error) {
      reject(error);
      return;
    }
    fdatasync(fd, (error) => {
      closeSync(fd);
      if (error) reject(error);
      else resolve();
    });
  });
}

/**
 * Writes `data` to `path` atomically: temporary file, flushed (in a group with the other writes of
 * the same moment: see FlushBatch), then renamed over `path`. The rename itself is durable once the
 * directory is flushed (`FlushBatch.flushDirectory`), which the caller does once for many files.
 */
export async function writeFileAtomic(
  path: string,
  data: Uint8Array | string,
  options: AtomicWriteOptions = {},
  batch: FlushBatch = processFlushes,
): Promise<void> {
  await writeFilesAtomic([{ path, data, options }], batch);
}

/** One file of `writeFilesAtomic`. */
export interface AtomicFile {
  path: string;
  data: Uint8Array | string;
  options?: AtomicWriteOptions;
}

/**
 * Writes several files atomically with one flush for all of their bytes, then renames them in the
 * order given (so a file that must exist before another one does — the kept copy of a file's old
 * content before the new content — is renamed first). Nothing is renamed unless every file's bytes
 * are on disk; on failure the temporary files are removed. Returns the directories whose entries
 * changed, for the caller to flush (once, for everything it wrote). `after` are directories whose
 * earlier renames must be on disk before these files are renamed: flushed in the same group as the
 * bytes.
 */
export async function writeFilesAtomic(
  files: readonly AtomicFile[],
  batch: FlushBatch = processFlushes,
  after: Iterable<string> = [],
): Promise<Set<string>> {
  const written: { tmp: string; file: AtomicFile }[] = [];
  try {
    for (const file of files) {
      const { tmp, fd } = writeTemporary(file.path, file.data, file.options ?? {});
      closeSync(fd);
      written.push({ tmp, file });
    }
    await Promise.all([
      ...written.map(({ tmp }) => batch.flush(tmp)),
      ...[...after].map((dir) => batch.flushDirectory(dir)),
    ]);
  } catch (error) {
    for (const { tmp } of written) safeUnlink(tmp);
    throw error;
  }
  const directories = new Set<string>();
  for (const [i, { tmp, file }] of written.entries()) {
    try {
      commit(tmp, file.path, file.options ?? {});
    } catch (error) {
      for (const later of written.slice(i + 1)) safeUnlink(later.tmp);
      throw error;
    }
    directories.add(dirname(file.path));
  }
  return directories;
}

function commit(tmp: string, path: string, options: AtomicWriteOptions): void {
  options.beforeRename?.(tmp, path);
  try {
    renameSync(tmp, path);
  } catch (error) {
    safeUnlink(tmp);
    throw error;
  }
  settleTemporary(tmp);
}

/** Flushes a directory's entries (a rename is durable only once its directory is). */
function fsyncDirectory(path: string): Promise<void> {
  return new Promise((resolve) => {
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch {
      resolve();
      return;
    }
    fsync(fd, () => {
      closeSync(fd);
      // Some filesystems refuse fsync on a directory; the rename itself already happened.
      resolve();
    });
  });
}

/**
 * Writes several JSON state files atomically and durably, flushing them together: their bytes in
 * one group (with the directories in `after`: see writeFilesAtomic), then the renames, then their
 * directories in one group (applies' attempt and instance records).
 */
export async function writeJsonFilesAtomic(
  files: readonly { path: string; value: unknown }[],
  batch: FlushBatch = processFlushes,
  after: Iterable<string> = [],
): Promise<void> {
  const directories = await writeFilesAtomic(
    files.map(({ path, value }) => ({ path, data: `${JSON.stringify(value)}\n`, options: { mode: 0o600 } })),
    batch,
    after,
  );
  await Promise.all([...directories].map((dir) => batch.flushDirectory(dir)));
}

/** Writes JSON state atomically and durably (state must survive a crash of the agent). */
export function writeJsonAtomicSync(path: string, value: unknown): void {
  writeFileAtomicSync(path, `${JSON.stringify(value)}\n`, { mode: 0o600 });
  try {
    const fd = openSync(dirname(path), "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // A filesystem that cannot flush a directory still has the renamed file.
  }
}
