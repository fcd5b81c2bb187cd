/**
 * Crash-safe file writes: the bytes go to a temporary file in the same directory, are flushed to
 * disk, and only then renamed over the destination. A crash at any point leaves either the old file
 * or the new one, never a torn mix. Used for managed files and for the agent's own state.
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
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";

let counter = 0;

/** A temporary name next to `path`: hidden, and unique within this process and across processes. */
export function temporaryPath(path: string): string {
  counter = (counter + 1) % 1_000_000;
  return join(dirname(path), `.${basename(path)}.steward-${process.pid}-${counter}.tmp`);
}

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
  const tmp = temporaryPath(path);
  // `wx`: never follow or reuse whatever is already at the temporary name.
  const fd = openSync(tmp, "wx", options.mode ?? 0o644);
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

function safeUnlink(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone: nothing to clean.
  }
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

/**
 * Flushes temporary files in batches. Every write that reaches `flush` in the same turn of the
 * event loop joins one batch, and the batch settles only when all of its files are on disk, so the
 * next files are created while no flush is in flight (on ext4 a create waits behind a journal
 * commit: interleaving a thousand write-flush-rename sequences was three times slower). A large
 * batch is flushed with one syncfs per filesystem (coreutils `sync -f`: Node has no binding for
 * it), a small one, or a host without `sync -f`, with fdatasync per file in parallel.
 */
export class FlushBatch {
  private pending: { path: string; resolve: () => void; reject: (error: unknown) => void }[] = [];

  /** Resolves once the file at `path` (complete and closed) is on disk. */
  flush(path: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ path, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => void this.run());
    });
  }

  private async run(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    if (
      batch.length >= SYNCFS_FROM &&
      syncfsWorks &&
      (await syncFilesystems(batch.map((entry) => entry.path)))
    ) {
      for (const entry of batch) entry.resolve();
      return;
    }
    const results = await Promise.allSettled(batch.map(({ path }) => flushFile(path)));
    results.forEach((result, i) => {
      if (result.status === "fulfilled") batch[i]!.resolve();
      else batch[i]!.reject(result.reason);
    });
  }
}

/** syncfs on the filesystem of each path (one per device); false when that is not possible here. */
async function syncFilesystems(paths: readonly string[]): Promise<boolean> {
  const byDevice = new Map<number, string>();
  try {
    for (const path of paths) {
      const device = statSync(path).dev;
      if (!byDevice.has(device)) byDevice.set(device, path);
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
 * Writes `data` to `path` atomically: temporary file, flushed (in a batch with the other writes of
 * the same moment when `batch` is given), then renamed over `path`.
 */
export async function writeFileAtomic(
  path: string,
  data: Uint8Array | string,
  options: AtomicWriteOptions = {},
  batch: FlushBatch = new FlushBatch(),
): Promise<void> {
  const { tmp, fd } = writeTemporary(path, data, options);
  closeSync(fd);
  try {
    await batch.flush(tmp);
  } catch (error) {
    safeUnlink(tmp);
    throw error;
  }
  commit(tmp, path, options);
}

function commit(tmp: string, path: string, options: AtomicWriteOptions): void {
  options.beforeRename?.(tmp, path);
  try {
    renameSync(tmp, path);
  } catch (error) {
    safeUnlink(tmp);
    throw error;
  }
}

/** Flushes a directory's entries (a rename is durable only once its directory is). */
export function fsyncDirectory(path: string): Promise<void> {
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
 * Writes several JSON state files atomically and durably, flushing them together: their data in
 * parallel, then the renames, then each directory once (an apply's attempt and instance records).
 */
export async function writeJsonFilesAtomic(
  files: readonly { path: string; value: unknown }[],
): Promise<void> {
  const written: { tmp: string; fd: number; path: string }[] = [];
  try {
    for (const { path, value } of files)
      written.push({ ...writeTemporary(path, `${JSON.stringify(value)}\n`, { mode: 0o600 }), path });
    await Promise.all(
      written.map(
        ({ fd }) =>
          new Promise<void>((resolve, reject) =>
            fdatasync(fd, (error) => (error ? reject(error) : resolve())),
          ),
      ),
    );
  } catch (error) {
    for (const { tmp, fd } of written) {
      closeSync(fd);
      safeUnlink(tmp);
    }
    throw error;
  }
  for (const { tmp, fd, path } of written) {
    closeSync(fd);
    renameSync(tmp, path);
  }
  await Promise.all([...new Set(files.map(({ path }) => dirname(path)))].map((dir) => fsyncDirectory(dir)));
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
