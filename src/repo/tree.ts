/**
 * Git trees as the loader's RepoSource. Listings are cached per subtree (by its path and object id),
 * so listing a new commit re-reads only the trees on the paths that changed: an unchanged subtree
 * has the same id and its listing is reused whole. The same walk compares two trees.
 */
import type { RepoFile, RepoSource } from "../model/load.js";
import type { ObjectReader, TreeEntry } from "./objects.js";

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

/** Lists and compares the trees of one repository, remembering the listing of every subtree it saw. */
export class TreeIndex {
  private listings = new Map<string, Listing>();

  constructor(private readonly reader: ObjectReader) {}

  /** Every file below tree `oid` (paths relative to it, `/`-separated), skipping symlinks and submodules. */
  files(oid: string): RepoFile[] {
    const touched = new Set<string>();
    const files = this.list(oid, "", touched);
    // Forget subtrees the newest listing no longer has, so the cache tracks the repo, not its history.
    for (const key of this.listings.keys()) if (!touched.has(key)) this.listings.delete(key);
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
    for (const entry of this.reader.readTree(oid)) {
      const path = prefix ? `${prefix}/${entry.name}` : entry.name;
      if (entry.type === "tree") {
        listing.subtrees.push(`${path}\0${entry.oid}`);
        for (const file of this.list(entry.oid, path, touched)) listing.files.push(file);
      } else if (usable(entry)) listing.files.push({ path, id: entry.oid });
    }
    this.listings.set(key, listing);
    return listing.files;
  }
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
