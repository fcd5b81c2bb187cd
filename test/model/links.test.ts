/**
 * Symlinks follow one rule in a working directory and in a git commit: the same repository, on
 * disk and committed, lists the same paths seen through links, leading to the same files, and
 * the same links refused for the same reason.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { directorySource, type RepoFile } from "../../src/model/load.js";
import { ObjectReader } from "../../src/repo/objects.js";
import { TreeIndex } from "../../src/repo/tree.js";
import { makeRepo, removeTempDirs } from "../helpers/git.js";
import { writeRepository } from "../helpers/holes.js";

afterAll(removeTempDirs);

/** What a listing says of the paths seen through links: where each leads, or why it does not. */
function throughLinks(files: readonly RepoFile[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const file of [...files].sort((a, b) => (a.path < b.path ? -1 : 1)))
    if (file.problem) out[file.path] = file.problem.code;
    else if (file.real) out[file.path] = `→ ${file.real}`;
  return out;
}

describe("links - one rule for a directory and a commit", () => {
  it("links - a repository on disk and committed lists the same links the same way", () => {
    const repo = makeRepo({
      files: {
        "c/d.yaml": "d\n",
        "z.yaml": "z\n",
        "deep/er/g.yaml": "g\n",
        "deep/f.yaml": "f\n",
        "plain.yaml": "plain\n",
        "b/y.yaml": "y\n",
        ".hidden/n.yaml": "n\n",
      },
    });
    const links: Record<string, string> = {
      // Relative, through a directory: read as the file.
      "a/b.yaml": "../c/d.yaml",
      // A chain of links.
      "x.yaml": "y.yaml",
      "y.yaml": "z.yaml",
      // `..` after a linked directory climbs from where that link leads (deep/er → deep).
      linked: "deep/er",
      "top/k.yaml": "../linked/../f.yaml",
      // A file is not a directory.
      "n.yaml": "plain.yaml/x",
      // .git is the repository's own metadata, never its content.
      "g.yaml": ".git/config",
      // Directories that lead into each other: each link closes a loop.
      "a/x": "../b",
      "b/back": "../a",
      // A directory steward does not read on its own, seen through a link.
      conf: ".hidden",
      // Links steward never follows: dot-names, node_modules, and anything in a dot-directory.
      ".dot": "/etc",
      node_modules: "/usr/lib/node_modules",
      ".hidden/out.yaml": "/etc/passwd",
    };
    writeRepository(repo.dir, {}, links);
    const sha = repo.commit("links");

    const expected = {
      "a/b.yaml": "→ c/d.yaml",
      "a/x": "file/symlink-loop",
      "b/back": "file/symlink-loop",
      "conf/n.yaml": "→ .hidden/n.yaml",
      // Not followed in the dot-directory, but seen here through a link.
      "conf/out.yaml": "file/symlink-outside",
      "g.yaml": "file/symlink-outside",
      "linked/g.yaml": "→ deep/er/g.yaml",
      "n.yaml": "file/symlink-dangling",
      "top/k.yaml": "→ deep/f.yaml",
      "x.yaml": "→ z.yaml",
      "y.yaml": "→ z.yaml",
    };
    expect(throughLinks(directorySource(repo.dir).files() as RepoFile[])).toEqual(expected);
    const reader = new ObjectReader(join(repo.dir, ".git"));
    const committed = new TreeIndex(reader).files(repo.git("rev-parse", `${sha}^{tree}`));
    expect(throughLinks(committed)).toEqual(expected);
    // In a commit a linked file has the id of the file it leads to.
    const ids = new Map(committed.map((file) => [file.path, file.id]));
    expect(ids.get("x.yaml")).toBe(ids.get("z.yaml"));
    reader.close();
  });
});
