/**
 * Git trees as the loader's RepoSource. Listings are cached per subtree (by its path and object id),
 * so listing a new commit re-reads only the trees on the paths that changed: an unchanged subtree
 * has the same id and its listing is reused whole. The same walk compares two trees.
 */
import type { RepoFile, RepoSource } from "../model/load.js";
import { type ObjectReader, parseTreeEntry, type TreeEntry, treeEntryEnd } from "./objects.js";

/** A path whose blob differs between two trees; `before`/`after` are blob ids, absent when added/removed. */
export interface TreeChange {
  path: string;
  before?: string;
  after?: string;
  /** File modes (`100644`, `100755`) on each side. */
  beforeMode?: string;
  afterMode?: string;
}

interface Listing {
  files: RepoFile[];
  /** Cache keys of the subtrees directly below, so reusing a listing keeps them cached too. */
  subtrees: string[];
}

/**
 * The last tree parsed at a path, kept with its bytes so the next version of that directory is
 * parsed by difference: an entry whose bytes are unchanged keeps its parsed object and RepoFile
 * (no new strings, so later map lookups reuse their cached hashes). One file changed in a directory
 * of 10,000 costs a byte comparison per entry, not a parse.
 */
interface ParsedTree {
  oid: string;
  data: Buffer;
  /** Offset of each entry's start, then the end of the last. */
  bounds: number[];
  entries: TreeEntry[];
  /** The RepoFile of each blob entry (undefined for subtrees, symlinks, submodules). */
  files: (RepoFile | undefined)[];
}

/** How far ahead an unchanged entry is looked for after a mismatch (entries deleted in a row). */
const REALIGN_WINDOW = 64;

/** Lists and compares the trees of one repository, remembering the listing of every subtree it saw. */
export class TreeIndex {
  private listings = new Map<string, Listing>();
  private parsedAt = new Map<string, ParsedTree>();

  constructor(private readonly reader: ObjectReader) {}

  /** Every file below tree `oid` (paths relative to it, `/`-separated), skipping symlinks and submodules. */
  files(oid: string): RepoFile[] {
    const touched = new Set<string>();
    const files = this.list(oid, "", touched);
    // Forget subtrees the newest listing no longer has, so the cache tracks the repo, not its history.
    for (const key of this.listings.keys()) if (!touched.has(key)) this.listings.delete(key);
    for (const [prefix, tree] of this.parsedAt)
      if (!touched.has(`${prefix}\0${tree.oid}`)) this.parsedAt.delete(prefix);
    return files;
  }

  /** The blobs that differ between two trees; equal subtrees are skipped without being read. */
  diff(before: string | undefined, after: string | undefined, prefix = ""): TreeChange[] {
    if (before === after) return [];
    const changes: TreeChange[] = [];
    const left = new Map((before ? this.reader.readTree(before) : []).map((e) => [e.name, e]));
    const right = new Map((after ? this.reader.readTree(after) : []).map((e) => [e.name, e]));
    for (const name of new Set([...left.keys(), ...right.keys()])) {
      const a = usable(left.get(name));
      const b = usable(right.get(name));
      if (a?.oid === b?.oid && a?.type === b?.type && a?.mode === b?.mode) continue;
      const path = prefix ? `${prefix}/${name}` : name;
      const aTree = a?.type === "tree" ? a.oid : undefined;
      const bTree = b?.type === "tree" ? b.oid : undefined;
      if (aTree || bTree) changes.push(...this.diff(aTree, bTree, path));
      const aBlob = a?.type === "blob" ? a.oid : undefined;
      const bBlob = b?.type === "blob" ? b.oid : undefined;
      if (aBlob !== bBlob || (aBlob && a?.mode !== b?.mode)) {
        const change: TreeChange = { path };
        if (aBlob) {
          change.before = aBlob;
          change.beforeMode = a!.mode;
        }
        if (bBlob) {
          change.after = bBlob;
          change.afterMode = b!.mode;
        }
        changes.push(change);
      }
    }
    return changes.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
  }

  private list(oid: string, prefix: string, touched: Set<string>): RepoFile[] {
    const key = `${prefix}\0${oid}`;
    touched.add(key);
    const cached = this.listings.get(key);
    if (cached) {
      const stack = [...cached.subtrees];
      while (stack.length > 0) {
        const below = stack.pop()!;
        touched.add(below);
        stack.push(...(this.listings.get(below)?.subtrees ?? []));
      }
      return cached.files;
    }
    const listing: Listing = { files: [], subtrees: [] };
    const tree = this.parse(oid, prefix);
    for (let i = 0; i < tree.entries.length; i++) {
      const entry = tree.entries[i]!;
      if (entry.type === "tree") {
        const path = prefix ? `${prefix}/${entry.name}` : entry.name;
        listing.subtrees.push(`${path}\0${entry.oid}`);
        for (const file of this.list(entry.oid, path, touched)) listing.files.push(file);
      } else {
        const file = tree.files[i];
        if (file) listing.files.push(file);
      }
    }
    this.listings.set(key, listing);
    return listing.files;
  }

  /** Parses tree `oid` found at `prefix`, by difference with the last tree parsed there. */
  private parse(oid: string, prefix: string): ParsedTree {
    const old = this.parsedAt.get(prefix);
    if (old?.oid === oid) return old;
    const data = this.reader.readTreeData(oid);
    const tree: ParsedTree = { oid, data, bounds: [0], entries: [], files: [] };
    const sameBytes = (j: number, pos: number, end: number) => {
      const start = old!.bounds[j]!;
      const stop = old!.bounds[j + 1]!;
      return stop - start === end - pos && data.compare(old!.data, start, stop, pos, end) === 0;
    };
    let byName: Map<string, number> | undefined;
    let next = 0;
    for (let pos = 0; pos < data.length; ) {
      const end = treeEntryEnd(data, pos);
      let same = -1;
      let entry: TreeEntry | undefined;
      if (old) {
        // Unchanged entries are usually next in line, or a few deletions further on.
        for (let j = next; j < Math.min(old.entries.length, next + REALIGN_WINDOW) && same < 0; j++)
          if (sameBytes(j, pos, end)) same = j;
        if (same < 0) {
          // Changed in place (same name), or realign by name after many deletions.
          entry = parseTreeEntry(data, pos, end);
          let at: number | undefined = next;
          if (old.entries[next]?.name !== entry.name) {
            byName ??= nameIndex(old);
            at = byName.get(entry.name);
          }
          if (at !== undefined && at >= next) {
            if (sameBytes(at, pos, end)) same = at;
            next = at + 1;
          }
        }
      }
      if (same >= 0) {
        tree.entries.push(old!.entries[same]!);
        tree.files.push(old!.files[same]);
        next = same + 1;
      } else {
        entry ??= parseTreeEntry(data, pos, end);
        tree.entries.push(entry);
        const path = prefix ? `${prefix}/${entry.name}` : entry.name;
        tree.files.push(entry.type === "blob" && usable(entry) ? { path, id: entry.oid } : undefined);
      }
      tree.bounds.push(end);
      pos = end;
    }
    this.parsedAt.set(prefix, tree);
    return tree;
  }
}

function nameIndex(tree: ParsedTree): Map<string, number> {
  const index = new Map<string, number>();
  for (let i = 0; i < tree.entries.length; i++) index.set(tree.entries[i]!.name, i);
  return index;
}

/** Symlinks (mode 120000) and submodules are not files of the fleet repo. */
function usable(entry: TreeEntry | undefined): TreeEntry | undefined {
  if (!entry || entry.type === "commit" || entry.mode === "120000") return undefined;
  return entry;
}

/** The loader's view of tree `oid`: file ids are blob ids, so the analysis cache works across commits. */
export function treeSource(reader: ObjectReader, index: TreeIndex, oid: string): RepoSource {
  return {
    files: () => index.files(oid),
    read: (file) => reader.readBlob(file.id!),
  };
}
