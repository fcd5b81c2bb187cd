/**
 * The second thread of `analyzeDirectoryFiles`: loads its modules while the first thread reads the
 * files, then, given the shared files, claims chunks from the shared counter, analyses them (once
 * read) and posts each chunk's analyses back on the port it was given, then says it is done.
 */
import { parentPort, workerData } from "node:worker_threads";
import {
  analyzeSharedChunk,
  CHUNK_FILES,
  type FileAnalysis,
  type SharedFiles,
  type WorkerInput,
  type WorkerMessage,
} from "./analyze.js";

const { results } = workerData as WorkerInput;
parentPort!.once("message", (files: SharedFiles) => {
  const chunks = Math.ceil(files.count / CHUNK_FILES);
  for (
    let chunk = Atomics.add(files.claimed, 0, 1);
    chunk < chunks;
    chunk = Atomics.add(files.claimed, 0, 1)
  ) {
    // Files the first thread analyses itself are left as holes.
    const analyses: (FileAnalysis | undefined)[] = new Array(
      Math.min(CHUNK_FILES, files.count - chunk * CHUNK_FILES),
    );
    analyzeSharedChunk(files, chunk, (i, analysis) => {
      analyses[i - chunk * CHUNK_FILES] = analysis;
    });
    results.postMessage({ chunk, analyses } as WorkerMessage);
  }
  results.postMessage({ done: true } satisfies WorkerMessage);
});
