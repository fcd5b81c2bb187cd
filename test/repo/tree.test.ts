import { chmodSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RepoFile } from "../../src/model/load.js";
import { ObjectReader } from "../../src/repo/objects.js";
import { TreeIndex } from "../../src/repo/tree.js";
import { type FileChanges, makeRepo, removeTempDirs, tempDir } from "../helpers/git.js";
import { randomNumbers } from "../model/random-fleet.js";

afterAll(removeTempDirs);

/** `git ls-tree -r` as {path, id} pairs: the listing git itself gives, without its symlinks. */
function gitListing(repo: ReturnType<typeof makeRepo>, rev: string): { path: string; id: string }[] {
  return gitEntries(repo, rev).flatMap(({ mode, path, id }) => (mode === "120000" ? [] : [{ path, id }]));
}

function gitEntries(
  repo: ReturnType<typeof makeRepo>,
  rev: string,
): { mode: string; path: string; id: string }[] {
  return repo
    .git("ls-tree", "-r", rev)
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [meta, path] = line.split("\t") as [string, string];
      const [mode, , id] = meta.split(" ") as [string, string, string];
      return { mode, path, id };
    });
}

/**
 * What the tree index lists at `rev`: git's listing, with each symlink (whose target here is a
 * sibling's name) as the file it leads to, or with its problem when that file is missing.
 */
function linkedListing(repo: ReturnType<typeof makeRepo>, rev: string): RepoFile[] {
  const entries = gitEntries(repo, rev);
  const ids = new Map(entries.map((e) => [e.path, e.id]));
  return entries
    .map(({ mode, path, id }): RepoFile => {
      if (mode !== "120000") return { path, id };
      const real = `${path.slice(0, path.lastIndexOf("/") + 1)}${repo.git("cat-file", "blob", id)}`;
      const target = ids.get(real);
      return target
        ? { path, id: target, real }
        : { path, problem: expect.objectContaining({ code: "file/symlink-dangling" }) };
    })
    .sort((a, b) => (a.path < b.path ? -1 : 1));
}

const byPath = (files: RepoFile[]) => [...files].sort((a, b) => (a.path < b.path ? -1 : 1));

describe("tree index", () => {
  it("tree - listings match git ls-tree across insertions, deletions, modifications and moves, reusing unchanged entries", () => {
    const files: FileChanges = { "steward.yaml": "fleet\n", "nodes/a.yaml": "a\n" };
    for (let i = 0; i < 300; i++) files[`assignments/app-${String(i).padStart(3, "0")}.yaml`] = `app ${i}\n`;
    const repo = makeRepo({ files });
    const first = repo.rev();
    const changes: FileChanges = {
      "assignments/app-000.yaml": null,
      "assignments/app-150.yaml": "app 150 v2\n",
      "assignments/app-151.yaml": null,
      "assignments/app-152.yaml": null,
      "assignments/app-150a.yaml": "inserted\n",
      "assignments/zzz.yaml": "appended\n",
      "assignments/sub/moved.yaml": "app 299\n",
      "assignments/app-299.yaml": null,
    };
    for (let i = 200; i < 280; i++) changes[`assignments/app-${i}.yaml`] = null;
    const second = repo.commit("reshuffle", changes);

    const reader = new ObjectReader(join(repo.dir, ".git"));
    const index = new TreeIndex(reader);
    const tree = (rev: string) => repo.git("rev-parse", `${rev}^{tree}`);
    const before = index.files(tree(first));
    expect(before).toEqual(gitListing(repo, first));
    const after = index.files(tree(second));
    expect(after).toEqual(gitListing(repo, second));

    const old = new Map(before.map((f) => [f.path, f]));
    const reused = after.filter((f) => old.get(f.path) === f).map((f) => f.path);
    const unchanged = after.filter((f) => old.get(f.path)?.id === f.id).map((f) => f.path);
    expect(reused).toEqual(unchanged);
    expect(reused.length).toBe(300 - 1 - 3 - 80 - 1 + 2);
    // Back to the first tree: the same listing again.
    expect(index.files(tree(first))).toEqual(before);
    reader.close();
  });

  it("tree - a clone made with --shared reads the objects it borrows through alternates", () => {
    const repo = makeRepo({ files: { "assignments/web.yaml": "web\n", "nodes/a.yaml": "a\n" } });
    const clone = join(tempDir("steward-shared-"), "fleet");
    repo.git("clone", "-q", "--shared", repo.dir, clone);
    const reader = new ObjectReader(join(clone, ".git"));
    const index = new TreeIndex(reader);
    const files = index.files(repo.git("rev-parse", "HEAD^{tree}"));
    expect(files).toEqual(gitListing(repo, "HEAD"));
    expect(reader.readBlob(files[0]!.id!).toString()).toBe("web\n");
    reader.close();
  });

  it("tree - diff reports changed blobs with their modes and skips equal subtrees", () => {
    const repo = makeRepo({ files: { "a/x.yaml": "x\n", "a/y.yaml": "y\n", "b/z.yaml": "z\n" } });
    const first = repo.rev();
    repo.write({ "a/y.yaml": "y2\n" });
    chmodSync(join(repo.dir, "a/x.yaml"), 0o755);
    const second = repo.commit("change y, x executable", { "c/new.yaml": "new\n", "b/z.yaml": null });
    const reader = new ObjectReader(join(repo.dir, ".git"));
    const index = new TreeIndex(reader);
    const tree = (rev: string) => repo.git("rev-parse", `${rev}^{tree}`);
    const blob = (rev: string, path: string) => repo.git("rev-parse", `${rev}:${path}`);
    expect(index.diff(tree(first), tree(second))).toEqual([
      {
        path: "a/x.yaml",
        before: blob(first, "a/x.yaml"),
        beforeMode: "100644",
        after: blob(first, "a/x.yaml"),
        afterMode: "100755",
      },
      {
        path: "a/y.yaml",
        before: blob(first, "a/y.yaml"),
        beforeMode: "100644",
        after: blob(second, "a/y.yaml"),
        afterMode: "100644",
      },
      { path: "b/z.yaml", before: blob(first, "b/z.yaml"), beforeMode: "100644" },
      { path: "c/new.yaml", after: blob(second, "c/new.yaml"), afterMode: "100644" },
    ]);
    reader.close();
  });

  it("tree - changes between two trees are the difference of their git listings, over random commits in either direction", () => {
    const random = randomNumbers(11);
    const files: FileChanges = { "steward.yaml": "fleet\n" };
    for (let i = 0; i < 400; i++) files[`big/app-${String(i).padStart(3, "0")}.yaml`] = `app ${i}\n`;
    const repo = makeRepo({ files });
    const revisions = [repo.rev()];
    const pick = (n: number) => Math.floor(random() * n);
    for (let step = 0; step < 25; step++) {
      const changes: FileChanges = {};
      const edits = random() < 0.2 ? 40 : 1 + pick(3);
      for (let i = 0; i < edits; i++) {
        const name = `big/app-${String(pick(420)).padStart(3, "0")}.yaml`;
        if (random() < 0.3) rmSync(join(repo.dir, name), { force: true });
        else changes[name] = `app ${step}.${i}\n`;
      }
      const dir = `dirs/d${pick(4)}`;
      const roll = random();
      if (roll < 0.3) rmSync(join(repo.dir, dir), { recursive: true, force: true });
      else if (roll < 0.51) changes[`${dir}/f${pick(3)}.yaml`] = `in ${dir} ${step}\n`;
      // A path that is a file, then a directory, then a file again.
      if (random() < 0.2) {
        rmSync(join(repo.dir, "flip"), { recursive: true, force: true });
        if (random() < 0.5) changes.flip = `file ${step}\n`;
        else changes["flip/inner.yaml"] = `dir ${step}\n`;
      }
      repo.write(changes);
      if (random() < 0.15) {
        rmSync(join(repo.dir, "big/link.yaml"), { force: true });
        if (random() < 0.5) symlinkSync("app-001.yaml", join(repo.dir, "big/link.yaml"));
        else changes["big/link.yaml"] = `now a file ${step}\n`;
      }
      if (random() < 0.15) chmodSync(join(repo.dir, "big/app-002.yaml"), random() < 0.5 ? 0o755 : 0o644);
      mkdirSync(join(repo.dir, "dirs"), { recursive: true });
      revisions.push(repo.commit(`step ${step}`, changes, { allowEmpty: true }));
    }
    const reader = new ObjectReader(join(repo.dir, ".git"));
    const index = new TreeIndex(reader);
    const trees = revisions.map((rev) => repo.git("rev-parse", `${rev}^{tree}`));
    const tree = (rev: string) => trees[revisions.indexOf(rev)]!;
    const listings = revisions.map((rev) => linkedListing(repo, rev));
    const listing = (rev: string) => new Map(listings[revisions.indexOf(rev)]!.map((f) => [f.path, f.id]));
    const linked = (rev: string) => listings[revisions.indexOf(rev)]!.some((f) => f.real || f.problem);
    index.files(tree(revisions[0]!));
    // Forwards one commit at a time, then jumps back and forth.
    const pairs: [number, number][] = revisions.slice(1).map((_, i) => [i, i + 1]);
    for (let i = 0; i < 15; i++) pairs.push([pick(revisions.length), pick(revisions.length)]);
    let compared = 0;
    for (const [a, b] of pairs) {
      const found = index.changes(tree(revisions[a]!), tree(revisions[b]!));
      // With a symlink on either side, what it leads to may have changed anywhere: the loader
      // compares whole listings instead.
      expect(found === undefined, `${a} → ${b}`).toBe(linked(revisions[a]!) || linked(revisions[b]!));
      if (found) {
        compared++;
        const before = listing(revisions[a]!);
        const after = listing(revisions[b]!);
        const expected = new Map<string, string | undefined>();
        for (const [path, id] of after) if (before.get(path) !== id) expected.set(path, id);
        for (const path of before.keys()) if (!after.has(path)) expected.set(path, undefined);
        const ids = new Map([...found].map(([path, file]) => [path, file?.id]));
        expect(ids, `${a} → ${b}`).toEqual(expected);
        for (const [path, file] of found) if (file) expect(file.path).toBe(path);
      }
      expect(byPath(index.files(tree(revisions[b]!))), `listing of ${b}`).toEqual(listings[b]);
    }
    expect(compared).toBeGreaterThan(5);
    reader.close();
  });
});
