/**
 * What each file says on its own: bytes → YAML documents → schema findings. This depends only on a
 * file's bytes, so it is cached by content id (git blob) and, for a large directory, shared between
 * this thread and a second one (analyze-worker.ts): on a machine with two cores, parsing is most of
 * the time `steward validate` takes.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads";
import type { Finding } from "./findings.js";
import type { LinkProblem } from "./links.js";
import { type DocumentKind, validateDocument } from "./schema.js";
import { MAX_YAML_BYTES, type ParsedFile, parseYamlFile } from "./yaml.js";

/** What one file's bytes say on their own, independent of its path and of other files. */
export interface FileAnalysis {
  /** The file's text (when kept) and its problems as YAML; its documents are `documents`. */
  parsed: Omit<ParsedFile, "documents">;
  documents: { index: number; value: unknown; kind?: DocumentKind; name?: string; findings: Finding[] }[];
}

/** Analyses a file's bytes: parse, then validate each document against its kind's schema. */
export function analyzeFile(bytes: Uint8Array): FileAnalysis {
  const parsed = parseYamlFile(bytes);
  const documents = parsed.documents.map(({ index, value }) => {
    const { kind, findings } = validateDocument(value);
    const name = (value as { metadata?: { name?: unknown } })?.metadata?.name;
    return { index, value, kind, name: typeof name === "string" ? name : undefined, findings };
  });
  const kept: FileAnalysis["parsed"] = { problems: parsed.problems };
  if (parsed.text !== undefined) kept.text = parsed.text;
  return { parsed: kept, documents };
}

/**
 * The analysis without the file's text: what analyzeDirectoryFiles gives from either thread (the
 * loader reads the few files that turn out to need a position again, and a large directory's
 * texts are not kept in memory for nothing).
 */
export function withoutText(analysis: FileAnalysis): FileAnalysis {
  return { parsed: { problems: analysis.parsed.problems }, documents: analysis.documents };
}

/** The analysis of a file that could not be read: one diagnostic naming the reason. */
export function unreadable(error: unknown): FileAnalysis {
  const reason =
    (error as NodeJS.ErrnoException)?.code ?? (error instanceof Error ? error.message : String(error));
  return {
    parsed: {
      problems: [
        {
          severity: "error",
          code: "file/unreadable",
          line: 1,
          column: 1,
          message: `file cannot be read (${reason})`,
          fix: "make the file readable by the user running steward, or remove it",
        },
      ],
    },
    documents: [],
  };
}

/** The analysis of a symlink that is not followed: one diagnostic at its path, with the fix. */
export function linkAnalysis(problem: LinkProblem): FileAnalysis {
  const { code, message, fix } = problem;
  return {
    parsed: { problems: [{ severity: "error", code, line: 1, column: 1, message, fix }] },
    documents: [],
  };
}

/** A buffer for `readWhole`, one per thread: one byte more than the largest YAML file accepted. */
export function readBuffer(): Buffer {
  return Buffer.allocUnsafe(MAX_YAML_BYTES + 1);
}

/**
 * Reads a whole file with open, read and close only: `readFileSync` also stats and reads twice, which
 * costs more than the read itself for the many small files of a fleet repo.
 */
export function readWhole(path: string, scratch: Buffer): Uint8Array {
  const fd = openSync(path, "r");
  try {
    const size = readSync(fd, scratch, 0, scratch.length, 0);
    // A short read of a regular file is its end; a full buffer may not be.
    if (size < scratch.length) return Buffer.from(scratch.subarray(0, size));
  } finally {
    closeSync(fd);
  }
  return readFileSync(path);
}

/** Reads and analyses `directory/path`; a read failure is an analysis with one diagnostic. */
export function analyzePath(directory: string, path: string, scratch: Buffer): FileAnalysis {
  let bytes: Uint8Array;
  try {
    bytes = readWhole(join(directory, path), scratch);
  } catch (error) {
    return unreadable(error);
  }
  return analyzeFile(bytes);
}

/** Below this many files a second thread costs more to start than it saves. */
export const PARALLEL_MIN_FILES = 2000;
/** Files claimed at a time by either thread: small enough to balance, large enough to be cheap. */
export const CHUNK_FILES = 64;

/** Messages from analyze-worker.ts. */
export type WorkerMessage = { chunk: number; analyses: (FileAnalysis | undefined)[] } | { done: true };

/** What analyze-worker.ts starts with: where to post its analyses. */
export interface WorkerInput {
  results: MessagePort;
}

/**
 * The files' bytes, read by the first thread for both into one shared buffer, in order: per file its
 * start and end in it (`bounds[2i]`, `[2i + 1]`), or a negative start for a file the first thread
 * analyses itself. `ready[0]` counts the files read so far (waited on with Atomics), `claimed[0]`
 * the chunks claimed by either thread.
 */
export interface SharedFiles {
  data: SharedArrayBuffer;
  bounds: Int32Array;
  ready: Int32Array;
  claimed: Int32Array;
  count: number;
}

/** Room reserved per file: memory is only used as it is written, and a fuller buffer is no error. */
const SHARED_BYTES_PER_FILE = 16 * 1024;
const SHARED_BYTES_MAX = 512 * 1024 * 1024;

function sharedFiles(count: number, bytesPerFile: number): SharedFiles {
  const int32s = (length: number) => new Int32Array(new SharedArrayBuffer(4 * length));
  return {
    data: new SharedArrayBuffer(Math.min(SHARED_BYTES_MAX, count * bytesPerFile)),
    bounds: int32s(2 * count),
    ready: int32s(1),
    claimed: int32s(1),
    count,
  };
}

/** The bytes of file `i` of shared files, or undefined when the first thread analyses it itself. */
export function sharedBytes(files: SharedFiles, i: number): Uint8Array | undefined {
  const start = files.bounds[2 * i]!;
  return start < 0 ? undefined : new Uint8Array(files.data, start, files.bounds[2 * i + 1]! - start);
}

/**
 * Reads every file into the shared buffer, saying after each chunk how far it got. A file that
 * cannot be read, or that is too large to be a fleet document, is analysed right away into
 * `results` instead; once the buffer is full, the files that do not fit are left to this thread.
 */
function readShared(
  directory: string,
  paths: readonly string[],
  files: SharedFiles,
  results: FileAnalysis[],
): void {
  const view = new Uint8Array(files.data);
  let at = 0;
  for (const [i, path] of paths.entries()) {
    files.bounds[2 * i] = -1;
    const full = join(directory, path);
    // Straight into the shared buffer; one byte more than a document may have says "too large".
    const room = Math.min(MAX_YAML_BYTES + 1, view.length - at);
    let size = -1;
    try {
      const fd = openSync(full, "r");
      try {
        size = readSync(fd, view, at, room, 0);
      } finally {
        closeSync(fd);
      }
    } catch (error) {
      results[i] = unreadable(error);
    }
    if (size >= 0 && size < room) {
      files.bounds[2 * i] = at;
      at += size;
      files.bounds[2 * i + 1] = at;
    } else if (size >= 0 && room === MAX_YAML_BYTES + 1) {
      // Too large: analysed now from all of its bytes (the analysis only says so).
      try {
        results[i] = withoutText(analyzeFile(readFileSync(full)));
      } catch (error) {
        results[i] = unreadable(error);
      }
    }
    // Otherwise the buffer is full: the file is read again by this thread when it analyses it.
    if ((i + 1) % CHUNK_FILES === 0 || i + 1 === paths.length) {
      Atomics.store(files.ready, 0, i + 1);
      Atomics.notify(files.ready, 0);
    }
  }
}

/**
 * Analyses the files of chunk `chunk` that have shared bytes, into `out` (by file index), once the
 * first thread has read them.
 */
export function analyzeSharedChunk(
  files: SharedFiles,
  chunk: number,
  out: (index: number, analysis: FileAnalysis) => void,
): void {
  const end = Math.min(files.count, (chunk + 1) * CHUNK_FILES);
  for (let ready = Atomics.load(files.ready, 0); ready < end; ready = Atomics.load(files.ready, 0))
    Atomics.wait(files.ready, 0, ready);
  for (let i = chunk * CHUNK_FILES; i < end; i++) {
    const bytes = sharedBytes(files, i);
    if (bytes) out(i, withoutText(analyzeFile(bytes)));
  }
}

const workerUrl = new URL("./analyze-worker.js", import.meta.url);

/**
 * Whether a second thread is worth starting: it costs its start-up and copying its results back,
 * which only pays off with a core to spare (the load average says how busy the cores are, as for
 * `make -l`). STEWARD_ANALYSIS_THREADS=1 or 2 decides instead (tests use it to take each path).
 */
export function secondThreadPays(env: NodeJS.ProcessEnv = process.env): boolean {
  const threads = env.STEWARD_ANALYSIS_THREADS;
  if (threads === "1" || threads === "2") return threads === "2";
  const cores = availableParallelism();
  return cores > 1 && loadavg()[0]! < cores - 0.5;
}

/**
 * Analyses files of `directory`, in order, without their text. For a large directory a second
 * thread is started first (when it pays, see secondThreadPays), and loads its modules while this
 * one reads every file into shared memory (reads from two threads at once contend and end up
 * slower); then each thread claims the next chunk of files from a shared counter, so the work
 * balances itself whatever the second thread's start-up costs, and between its own chunks this
 * thread takes in what the other delivered. If the second thread cannot start or fails, this
 * thread analyses what it had claimed.
 * Small inputs are read and analysed file by file on this thread; code run from TypeScript sources
 * (tests) has no second thread.
 */
export async function analyzeDirectoryFiles(
  directory: string,
  paths: readonly string[],
  /** Room in the shared buffer per file (tests make it small, to fill the buffer). */
  sharedBytesPerFile = SHARED_BYTES_PER_FILE,
): Promise<FileAnalysis[]> {
  const results: (FileAnalysis | undefined)[] = new Array(paths.length);
  if (paths.length < PARALLEL_MIN_FILES) {
    const scratch = readBuffer();
    return paths.map((path) => withoutText(analyzePath(directory, path, scratch)));
  }
  const { port1: inbox, port2: outbox } = new MessageChannel();
  let worker: Worker | undefined;
  try {
    // Run from TypeScript sources there is no compiled worker: this thread does everything.
    if (secondThreadPays() && existsSync(fileURLToPath(workerUrl)))
      worker = new Worker(workerUrl, {
        workerData: { results: outbox } satisfies WorkerInput,
        transferList: [outbox],
      });
  } catch {
    // No second thread here (resource limits): this one does everything.
  }
  try {
    return await analyzeInParallel(directory, paths, results, worker, inbox, sharedBytesPerFile);
  } finally {
    inbox.close();
    await worker?.terminate();
  }
}

/** The two-thread part of analyzeDirectoryFiles: read into shared memory, analyse side by side. */
async function analyzeInParallel(
  directory: string,
  paths: readonly string[],
  results: (FileAnalysis | undefined)[],
  worker: Worker | undefined,
  inbox: MessagePort,
  bytesPerFile: number,
): Promise<FileAnalysis[]> {
  const files = sharedFiles(paths.length, bytesPerFile);
  // The other thread starts on the first chunks while this one is still reading the rest.
  worker?.postMessage(files);
  readShared(directory, paths, files, results as FileAnalysis[]);
  const chunks = Math.ceil(paths.length / CHUNK_FILES);
  const scratch = readBuffer();
  const store = (i: number, analysis: FileAnalysis) => {
    results[i] = analysis;
  };
  // Every chunk nobody delivered: all of them when there is no second thread.
  const analyzeRest = () => {
    for (let chunk = 0; chunk < chunks; chunk++) {
      const end = Math.min(paths.length, (chunk + 1) * CHUNK_FILES);
      for (let i = chunk * CHUNK_FILES; i < end; i++) {
        if (results[i] !== undefined) continue;
        // Files that did not fit in the shared buffer are read again here.
        const bytes = sharedBytes(files, i);
        results[i] = withoutText(bytes ? analyzeFile(bytes) : analyzePath(directory, paths[i]!, scratch));
      }
    }
    return results as FileAnalysis[];
  };
  if (!worker) return analyzeRest();
  let done = false;
  const take = (message: WorkerMessage) => {
    if ("done" in message) {
      done = true;
      return;
    }
    const start = message.chunk * CHUNK_FILES;
    for (const [i, analysis] of message.analyses.entries()) if (analysis) results[start + i] = analysis;
  };
  const drain = () => {
    for (let received = receiveMessageOnPort(inbox); received; received = receiveMessageOnPort(inbox))
      take(received.message as WorkerMessage);
  };
  for (
    let chunk = Atomics.add(files.claimed, 0, 1);
    chunk < chunks;
    chunk = Atomics.add(files.claimed, 0, 1)
  ) {
    analyzeSharedChunk(files, chunk, store);
    drain();
  }
  const running = worker;
  if (!done)
    await new Promise<void>((resolve) => {
      inbox.on("message", (message: WorkerMessage) => {
        take(message);
        if (done) resolve();
      });
      // A worker that fails leaves its claimed chunks undelivered; they are analysed here below.
      running.on("error", () => resolve());
      running.on("exit", () => resolve());
      // Delivered between the last drain and listening.
      drain();
      if (done) resolve();
    });
  return analyzeRest();
}
