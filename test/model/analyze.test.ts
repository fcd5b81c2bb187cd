/**
 * A large directory is read into shared memory by one thread and analysed from it (by two threads
 * in the built CLI; by this one when run from the sources, as here). Whatever fits in the shared
 * buffer or not, and whatever cannot be analysed from it, each file gets the analysis reading it on
 * its own gives.
 */
import { describe, expect, it } from "vitest";
import {
  analyzeDirectoryFiles,
  analyzePath,
  PARALLEL_MIN_FILES,
  readBuffer,
  withoutText,
} from "../../src/model/analyze.js";
import { tempRepo } from "../helpers/repo.js";

function largeDirectory(): { dir: string; paths: string[] } {
  const files: Record<string, string> = {};
  for (let i = 0; i < PARALLEL_MIN_FILES + 100; i++)
    files[`assignments/a-${String(i).padStart(5, "0")}.yaml`] =
      i % 211 === 0
        ? "not: [valid\n"
        : `apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: a-${i}\nspec:\n  nodes: [n]\n  resources:\n    - {kind: directory, path: /srv/a-${i}}\n# ${"padding ".repeat(i % 50)}\n`;
  files["assignments/huge.yaml"] = `note: ${"x".repeat(1024 * 1024)}\n`;
  files["assignments/empty.yaml"] = "";
  const paths = Object.keys(files).sort();
  return { dir: tempRepo(files), paths };
}

describe("analyze - large directories", () => {
  it("analyze - files read into shared memory are analysed as they are file by file, also when the buffer is full", async () => {
    const { dir, paths } = largeDirectory();
    const scratch = readBuffer();
    const expected = paths.map((path) => withoutText(analyzePath(dir, path, scratch)));
    // Room for every file, then for about a third of them: the rest are read again.
    for (const bytesPerFile of [16 * 1024, 100]) {
      const analyses = await analyzeDirectoryFiles(dir, paths, bytesPerFile);
      expect(analyses).toEqual(expected);
    }
    const codes = expected.flatMap((analysis) => analysis.parsed.problems.map((p) => p.code));
    expect(codes).toContain("file/too-large");
    expect(codes).toContain("file/empty");
    expect(codes).toContain("yaml/syntax");
  });
});
