/**
 * The second thread of `analyzeDirectoryFiles`: claims chunks of files from the shared counter,
 * analyses them and posts each chunk's analyses back on the port it was given, then says it is done.
 */
import { workerData } from "node:worker_threads";
import {
  analyzePath,
  CHUNK_FILES,
  readBuffer,
  type WorkerInput,
  type WorkerMessage,
  withoutText,
} from "./analyze.js";

const { directory, paths, claimed: buffer, results } = workerData as WorkerInput;
const claimed = new Int32Array(buffer);
const chunks = Math.ceil(paths.length / CHUNK_FILES);
const scratch = readBuffer();
for (let chunk = Atomics.add(claimed, 0, 1); chunk < chunks; chunk = Atomics.add(claimed, 0, 1)) {
  const end = Math.min(paths.length, (chunk + 1) * CHUNK_FILES);
  const analyses = [];
  for (let i = chunk * CHUNK_FILES; i < end; i++) {
    // The text is left out: copying it to the other thread costs more than reading the file again
    // for the few files that turn out to need a position.
    analyses.push(withoutText(analyzePath(directory, paths[i]!, scratch)));
  }
  results.postMessage({ chunk, analyses } satisfies WorkerMessage);
}
results.postMessage({ done: true } satisfies WorkerMessage);
