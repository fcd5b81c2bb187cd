/**
 * What each file says on its own: bytes → YAML documents → schema findings. This depends only on a
 * file's bytes, so it is cached by content id (git blob) and, for a large directory, shared between
 * this thread and a second one (analyze-worker.ts): on a machine with two cores, parsing is most of
 * the time `steward validate` takes.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads";
import type { Finding } from "./findings.js";
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
 * The files' bytes, read by the first thread for both: one shared buffer, and per file its start
 * and end in it (`[2i]`, `[2i + 1]`), or -1 for a file the first thread analysed itself.
 */
export interface SharedFiles {
  data: SharedArrayBuffer;
  bounds: Int32Array;
  /** The next chunk to claim (an Int32Array's first entry), shared by both threads. */
  claimed: Int32Array;
}

/** The bytes of file `i` of shared files, or undefined when the first thread took it on itself. */
export function sharedBytes(files: SharedFiles, i: number): Uint8Array | undefined {
  const start = files.bounds[2 * i]!;
  return start < 0 ? undefined : new Uint8Array(files.data, start, files.bounds[2 * i + 1]! - start);
}

/**
 * Reads every file into one shared buffer; a file that cannot be read, or that is too large to be
 * a fleet document, is analysed right away into `results` instead.
 */
function readShared(directory: string, paths: readonly string[], results: FileAnalysis[]): SharedFiles {
  const scratch = readBuffer();
  const read: (Uint8Array | undefined)[] = [];
  let total = 0;
  for (const [i, path] of paths.entries()) {
    let bytes: Uint8Array;
    try {
      bytes = readWhole(join(directory, path), scratch);
    } catch (error) {
      results[i] = unreadable(error);
      read.push(undefined);
      continue;
    }
    if (bytes.length > MAX_YAML_BYTES) {
      results[i] = withoutText(analyzeFile(bytes));
      read.push(undefined);
      continue;
    }
    read.push(bytes);
    total += bytes.length;
  }
  const data = new SharedArrayBuffer(total);
  const view = new Uint8Array(data);
  const bounds = new Int32Array(2 * paths.length);
  let at = 0;
  for (const [i, bytes] of read.entries()) {
    if (!bytes) {
      bounds[2 * i] = -1;
      continue;
    }
    view.set(bytes, at);
    bounds[2 * i] = at;
    at += bytes.length;
    bounds[2 * i + 1] = at;
  }
  return { data, bounds, claimed: new Int32Array(new SharedArrayBuffer(4)) };
}

/** Analyses the files of chunk `chunk` that have shared bytes, into `out` (by file index). */
export function analyzeSharedChunk(
  files: SharedFiles,
  count: number,
  chunk: number,
  out: (index: number, analysis: FileAnalysis) => void,
): void {
  const end = Math.min(count, (chunk + 1) * CHUNK_FILES);
  for (let i = chunk * CHUNK_FILES; i < end; i++) {
    const bytes = sharedBytes(files, i);
    if (bytes) out(i, withoutText(analyzeFile(bytes)));
  }
}

const workerUrl = new URL("./analyze-worker.js", import.meta.url);

/**
 * Analyses files of `directory`, in order, without their text. For a large directory a second
 * thread is started first, and loads its modules while this one reads every file into shared
 * memory (reads from two threads at once contend and end up slower); then each thread claims the
 * next chunk of files from a shared counter, so the work balances itself whatever the second
 * thread's start-up costs, and between its own chunks this thread takes in what the other
 * delivered. If the second thread cannot start or fails, this thread analyses what it had claimed.
 * Small inputs, and code run from TypeScript sources (tests), use this thread only.
 */
export async function analyzeDirectoryFiles(
  directory: string,
  paths: readonly string[],
): Promise<FileAnalysis[]> {
  const results: (FileAnalysis | undefined)[] = new Array(paths.length);
  if (paths.length < PARALLEL_MIN_FILES || !existsSync(fileURLToPath(workerUrl))) {
    const scratch = readBuffer();
    return paths.map((path) => withoutText(analyzePath(directory, path, scratch)));
  }
  const { port1: inbox, port2: outbox } = new MessageChannel();
  let worker: Worker | undefined;
  try {
    worker = new Worker(workerUrl, {
      workerData: { results: outbox } satisfies WorkerInput,
      transferList: [outbox],
    });
  } catch {
    // No second thread here (resource limits): this one does everything.
  }
  try {
    return await analyzeInParallel(directory, paths, results, worker, inbox);
  } finally {
    inbox.close();
    await worker?.terminate();
  }
}

/** The two-thread part of analyzeDirectoryFiles: read, hand the files over, analyse side by side. */
async function analyzeInParallel(
  directory: string,
  paths: readonly string[],
  results: (FileAnalysis | undefined)[],
  worker: Worker | undefined,
  inbox: MessagePort,
): Promise<FileAnalysis[]> {
  const files = readShared(directory, paths, results as FileAnalysis[]);
  const chunks = Math.ceil(paths.length / CHUNK_FILES);
  const store = (i: number, analysis: FileAnalysis) => {
    results[i] = analysis;
  };
  // Every chunk nobody delivered: all of them when there is no second thread.
  const analyzeRest = () => {
    for (let chunk = 0; chunk < chunks; chunk++) {
      const end = Math.min(paths.length, (chunk + 1) * CHUNK_FILES);
      for (let i = chunk * CHUNK_FILES; i < end; i++) {
        // Files without shared bytes were analysed while they were read.
        if (results[i] === undefined) results[i] = withoutText(analyzeFile(sharedBytes(files, i)!));
      }
    }
    return results as FileAnalysis[];
  };
  if (!worker) return analyzeRest();
  worker.postMessage({ files, count: paths.length });
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
    analyzeSharedChunk(files, paths.length, chunk, store);
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
