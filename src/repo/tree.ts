/**
 * Git trees as the loader's RepoSource. Listings are cached per subtree (by its path and object id),
 * so listing a new commit re-reads only the trees on the paths that changed: an unchanged subtree
 * has the same id and its listing is reused whole. The same walk compares two trees.
 *
 * A symlink is a blob of mode 120000 holding its target; the links of a tree follow the rules of
 * model/links.ts, as those of a working directory do, so `steward validate` on a checkout and the
 * syncer on its commit agree.
 */
import { followedName, type LinkedTree, linkedFiles, type RepoEntry, resolveLink } from "../model/links.js";
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
  /** Paths of the symlinks below, outside directories the loader does not read (see followedName). */
  links: string[];
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
  /**
   * When parsed by difference with the tree `from`: the indices of its entries this tree did not
   * take over (`dropped`), and of this tree's entries that are not taken over from it (`fresh`).
   */
  derivation?: { from: string; dropped: number[]; fresh: number[] };
}

/** How far ahead an unchanged entry is looked for after a mismatch (entries deleted in a row). */
const REALIGN_WINDOW = 64;

/** Root trees remembered as having symlinks or not (for `changes`). */
const LINK_STATES = 64;

const SYMLINK_MODE = "120000";

/** Lists and compares the trees of one repository, remembering the listing of every subtree it saw. */
export class TreeIndex {
  private listings = new Map<string, Listing>();
  private parsedAt = new Map<string, ParsedTree>();
  /** Whether a root tree has symlinks the loader reads, for the root trees seen last. */
  private readonly linkStates = new Map<string, boolean>();
  /** The last root tree with symlinks that was listed, and its files. */
  private linkedListing?: { oid: string; files: RepoFile[] };
  /** Whether the running `compare` met a symlink in the tree it compares to. */
  private sawLink = false;

  constructor(private readonly reader: ObjectReader) {}

  /**
   * Every file below tree `oid` (paths relative to it, `/`-separated), skipping submodules; a
   * symlink is listed as what it leads to (see model/links.ts).
   */
  files(oid: string): RepoFile[] {
    const touched = new Set<string>();
    const listing = this.list(oid, "", touched);
    let files = listing.files;
    if (listing.links.length > 0) {
      if (this.linkedListing?.oid !== oid)
        this.linkedListing = {
          oid,
          files: [...files, ...linkedFiles(listing.links, this.linkedTree(oid, touched))],
        };
      files = this.linkedListing.files;
    }
    this.rememberLinks(oid, listing.links.length > 0);
    // Forget subtrees the newest listing no longer has, so the cache tracks the repo, not its history.
    for (const key of this.listings.keys()) if (!touched.has(key)) this.listings.delete(key);
    for (const [prefix, tree] of this.parsedAt)
      if (!touched.has(`${prefix}\0${tree.oid}`)) this.parsedAt.delete(prefix);
    return files;
  }

  /** The blob at `path` of root tree `oid`, following symlinks inside the tree; undefined if none. */
  blobAt(oid: string, path: string): string | undefined {
    const tree = this.linkedTree(oid, new Set());
    const entry = tree.lookup(path);
    if (entry.kind === "file") return entry.id;
    if (entry.kind !== "link") return undefined;
    const resolution = resolveLink(path, tree);
    return resolution.kind === "file" ? resolution.id : undefined;
  }

  /** Root tree `oid` as links.ts reads it; `touched` keeps the listings it makes cached. */
  private linkedTree(oid: string, touched: Set<string>): LinkedTree {
    // Each tree on the way is indexed by name once per listing: links are few, trees may be large.
    const byName = new Map<string, Map<string, TreeEntry>>();
    const entriesOf = (tree: string) => {
      let names = byName.get(tree);
      if (!names) {
        names = new Map(this.reader.readTree(tree).map((entry) => [entry.name, entry]));
        byName.set(tree, names);
      }
      return names;
    };
    const entryAt = (path: string): TreeEntry | undefined => {
      let entry: TreeEntry | undefined = { name: "", mode: "40000", type: "tree", oid };
      for (const name of path.split("/")) {
        if (entry?.type !== "tree") return undefined;
        entry = entriesOf(entry.oid).get(name);
      }
      return entry;
    };
    return {
      lookup: (path): RepoEntry => {
        const entry = entryAt(path);
        if (!entry) return { kind: "missing" };
        if (entry.type === "tree") return { kind: "directory" };
        if (entry.type === "commit") return { kind: "other" };
        if (entry.mode === SYMLINK_MODE)
          return { kind: "link", target: this.reader.readBlob(entry.oid).toString("utf8") };
        return { kind: "file", id: entry.oid };
      },
      below: (dir) => {
        const entry = entryAt(dir)!;
        const listing = this.list(entry.oid, dir, touched);
        return { files: listing.files, links: listing.links };
      },
    };
  }

  private rememberLinks(oid: string, linked: boolean): void {
    this.linkStates.delete(oid);
    this.linkStates.set(oid, linked);
    if (this.linkStates.size > LINK_STATES) this.linkStates.delete(this.linkStates.keys().next().value!);
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

  private list(oid: string, prefix: string, touched: Set<string>): Listing {
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
      return cached;
    }
    const listing: Listing = { files: [], links: [], subtrees: [] };
    const tree = this.parse(oid, prefix);
    for (let i = 0; i < tree.entries.length; i++) {
      const entry = tree.entries[i]!;
      if (entry.type === "tree") {
        const path = prefix ? `${prefix}/${entry.name}` : entry.name;
        listing.subtrees.push(`${path}\0${entry.oid}`);
        const below = this.list(entry.oid, path, touched);
        for (const file of below.files) listing.files.push(file);
        // The loader reads nothing in dot-directories and node_modules: their links are not followed.
        if (below.links.length > 0 && followedName(entry.name))
          for (const link of below.links) listing.links.push(link);
      } else {
        const file = tree.files[i];
        if (file) listing.files.push(file);
        else if (entry.mode === SYMLINK_MODE)
          listing.links.push(prefix ? `${prefix}/${entry.name}` : entry.name);
      }
    }
    this.listings.set(key, listing);
    return listing;
  }

  /**
   * The files that differ between root trees `before` and `after`: by path, the file in `after`,
   * or undefined when `after` has none there. Equal subtrees are skipped by object id, and a changed
   * tree is compared by the entries its parse did not reuse, so the work grows with the change.
   * Undefined when either tree has symlinks (what a link leads to may change anywhere), or when
   * `before` was never listed: then compare their `files()`.
   */
  changes(before: string, after: string): Map<string, RepoFile | undefined> | undefined {
    if (this.linkStates.get(before) !== false) return undefined;
    const out = new Map<string, RepoFile | undefined>();
    this.sawLink = false;
    this.compare(before, after, "", out);
    this.rememberLinks(after, this.sawLink);
    return this.sawLink ? undefined : out;
  }

  private compare(
    before: string | undefined,
    after: string | undefined,
    prefix: string,
    out: Map<string, RepoFile | undefined>,
  ): void {
    if (before === after) return;
    if (before === undefined || after === undefined) {
      // A whole directory came or went.
      const files: RepoFile[] = [];
      this.walk((after ?? before)!, prefix, files);
      for (const file of files) out.set(file.path, after === undefined ? undefined : file);
      if (after === undefined) this.forgetBelow(prefix);
      return;
    }
    // Parsing `after` right after `before` makes it a parse by difference from `before`.
    const old = this.parse(before, prefix);
    const tree = this.parse(after, prefix);
    const { dropped, fresh } =
      tree.derivation?.from === before
        ? tree.derivation
        : { dropped: old.entries.map((_, i) => i), fresh: tree.entries.map((_, i) => i) };
    const gone = new Map<string, number>();
    for (const i of dropped) gone.set(old.entries[i]!.name, i);
    const pathOf = (name: string) => (prefix ? `${prefix}/${name}` : name);
    for (const k of fresh) {
      const entry = tree.entries[k]!;
      if (entry.mode === SYMLINK_MODE) this.sawLink = true;
      const i = gone.get(entry.name);
      gone.delete(entry.name);
      const was = i === undefined ? undefined : old.entries[i]!;
      const path = pathOf(entry.name);
      const wasTree = was?.type === "tree" ? was.oid : undefined;
      const isTree = entry.type === "tree" ? entry.oid : undefined;
      if (wasTree !== undefined || isTree !== undefined) this.compare(wasTree, isTree, path, out);
      const wasFile = i === undefined ? undefined : old.files[i];
      const isFile = tree.files[k];
      if (wasFile?.id !== isFile?.id) out.set(path, isFile);
    }
    for (const [name, i] of gone) {
      const was = old.entries[i]!;
      if (was.type === "tree") this.compare(was.oid, undefined, pathOf(name), out);
      else if (old.files[i]) out.set(pathOf(name), undefined);
    }
  }

  /** Every file below tree `oid` at `prefix`, without keeping a listing of it. */
  private walk(oid: string, prefix: string, out: RepoFile[]): void {
    const tree = this.parse(oid, prefix);
    for (let i = 0; i < tree.entries.length; i++) {
      const entry = tree.entries[i]!;
      if (entry.type === "tree") this.walk(entry.oid, prefix ? `${prefix}/${entry.name}` : entry.name, out);
      else if (tree.files[i]) out.push(tree.files[i]!);
      else if (entry.mode === SYMLINK_MODE) this.sawLink = true;
    }
  }

  /** Drops what is remembered of the trees at `prefix` and below (a directory that went away). */
  private forgetBelow(prefix: string): void {
    for (const at of this.parsedAt.keys())
      if (at === prefix || at.startsWith(`${prefix}/`)) this.parsedAt.delete(at);
  }

  /**
   * Parses tree `oid` found at `prefix`, by difference with the last tree parsed there: the bytes
   * both share at their start and at their end (one native comparison each) are entries the new
   * tree takes over as they are; between them, an entry whose bytes are unchanged keeps its parsed
   * object and RepoFile too. What was not taken over is recorded in `derivation`.
   */
  private parse(oid: string, prefix: string): ParsedTree {
    const old = this.parsedAt.get(prefix);
    if (old?.oid === oid) return old;
    const data = this.reader.readTreeData(oid);
    const tree: ParsedTree = old ? parseAgainst(old, oid, data, prefix) : parseWhole(oid, data, prefix);
    this.parsedAt.set(prefix, tree);
    return tree;
  }
}

/** A tree parsed with nothing to compare it with. */
function parseWhole(oid: string, data: Buffer, prefix: string): ParsedTree {
  const tree: ParsedTree = { oid, data, bounds: [0], entries: [], files: [] };
  for (let pos = 0; pos < data.length; ) {
    const end = treeEntryEnd(data, pos);
    const entry = parseTreeEntry(data, pos, end);
    tree.entries.push(entry);
    tree.files.push(fileOf(entry, prefix));
    tree.bounds.push(end);
    pos = end;
  }
  return tree;
}

function fileOf(entry: TreeEntry, prefix: string): RepoFile | undefined {
  if (entry.type !== "blob" || !usable(entry)) return undefined;
  return { path: prefix ? `${prefix}/${entry.name}` : entry.name, id: entry.oid };
}

/** Bytes compared at once when looking for where two buffers start (or stop) being equal. */
const BLOCK = 4096;

/** How many bytes `a` and `b` share at their start. */
function commonPrefix(a: Buffer, b: Buffer): number {
  const length = Math.min(a.length, b.length);
  let at = 0;
  while (at < length) {
    const end = Math.min(length, at + BLOCK);
    if (a.compare(b, at, end, at, end) !== 0) break;
    at = end;
  }
  while (at < length && a[at] === b[at]) at++;
  return at;
}

/** How many bytes `a` and `b` share at their end, at most `limit`. */
function commonSuffix(a: Buffer, b: Buffer, limit: number): number {
  let shared = 0;
  while (shared < limit) {
    const size = Math.min(limit - shared, BLOCK);
    if (
      a.compare(
        b,
        b.length - shared - size,
        b.length - shared,
        a.length - shared - size,
        a.length - shared,
      ) !== 0
    )
      break;
    shared += size;
  }
  while (shared < limit && a[a.length - shared - 1] === b[b.length - shared - 1]) shared++;
  return shared;
}

/** How many of `bounds` (ascending) are at most `value`. */
function countAtMost(bounds: readonly number[], value: number): number {
  let low = 0;
  let high = bounds.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (bounds[mid]! <= value) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** Tree `oid` (bytes `data`) parsed by difference with `old`, the last tree parsed at `prefix`. */
function parseAgainst(old: ParsedTree, oid: string, data: Buffer, prefix: string): ParsedTree {
  const count = old.entries.length;
  const shift = data.length - old.data.length;
  const head = commonPrefix(old.data, data);
  const tail = commonSuffix(old.data, data, Math.min(old.data.length, data.length) - head);
  // Entries wholly inside the shared start are the same entries at the same offsets.
  const start = countAtMost(old.bounds, head) - 1;
  // Old entries starting inside the shared end may be taken over once parsing lands on one of them.
  const stop = Math.max(start, countAtMost(old.bounds, old.data.length - tail - 1));
  const tree: ParsedTree = {
    oid,
    data,
    bounds: old.bounds.slice(0, start + 1),
    entries: old.entries.slice(0, start),
    files: old.files.slice(0, start),
    derivation: { from: old.oid, dropped: [], fresh: [] },
  };
  const { dropped, fresh } = tree.derivation!;
  const sameBytes = (j: number, pos: number, end: number) => {
    const from = old.bounds[j]!;
    const to = old.bounds[j + 1]!;
    return to - from === end - pos && data.compare(old.data, from, to, pos, end) === 0;
  };
  let byName: Map<string, number> | undefined;
  let next = start;
  let pos = old.bounds[start]!;
  let taken = count;
  for (let k = stop; pos < data.length; ) {
    // Landed where an old entry of the shared end now starts: it and all after it are unchanged.
    while (k < count && old.bounds[k]! + shift < pos) k++;
    if (k < count && k >= next && old.bounds[k]! + shift === pos) {
      taken = k;
      break;
    }
    const end = treeEntryEnd(data, pos);
    let same = -1;
    // Unchanged entries are usually next in line, or a few deletions further on.
    for (let j = next; j < Math.min(count, next + REALIGN_WINDOW) && same < 0; j++)
      if (sameBytes(j, pos, end)) same = j;
    let entry: TreeEntry | undefined;
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
        for (let j = next; j < at; j++) dropped.push(j);
        next = at;
        if (same < 0) {
          dropped.push(at);
          next = at + 1;
        }
      }
    }
    if (same >= 0) {
      for (let j = next; j < same; j++) dropped.push(j);
      tree.entries.push(old.entries[same]!);
      tree.files.push(old.files[same]);
      next = same + 1;
    } else {
      entry ??= parseTreeEntry(data, pos, end);
      fresh.push(tree.entries.length);
      tree.entries.push(entry);
      tree.files.push(fileOf(entry, prefix));
    }
    tree.bounds.push(end);
    pos = end;
  }
  for (let j = next; j < taken; j++) dropped.push(j);
  if (taken < count) {
    for (let j = taken; j < count; j++) {
      tree.entries.push(old.entries[j]!);
      tree.files.push(old.files[j]);
      tree.bounds.push(old.bounds[j + 1]! + shift);
    }
  }
  return tree;
}

function nameIndex(tree: ParsedTree): Map<string, number> {
  const index = new Map<string, number>();
  for (let i = 0; i < tree.entries.length; i++) index.set(tree.entries[i]!.name, i);
  return index;
}

/** Submodules are not files of the fleet repo; symlinks (mode 120000) are listed by what they lead to. */
function usable(entry: TreeEntry | undefined): TreeEntry | undefined {
  if (!entry || entry.type === "commit" || entry.mode === SYMLINK_MODE) return undefined;
  return entry;
}

/** The tree index and root tree of each source treeSource made, for `changesSince`. */
const trees = new WeakMap<RepoSource, { index: TreeIndex; oid: string }>();

/**
 * The loader's view of tree `oid`: file ids are blob ids, so the analysis cache works across
 * commits, and a tree of the same index tells what changed since another by comparing the trees.
 */
export function treeSource(reader: ObjectReader, index: TreeIndex, oid: string): RepoSource {
  const source: RepoSource = {
    files: () => index.files(oid),
    read: (file) => {
      if (file.problem) throw new Error(file.problem.message);
      return reader.readBlob(file.id!);
    },
    changesSince(earlier) {
      const tree = trees.get(earlier);
      return tree?.index === index ? index.changes(tree.oid, oid) : undefined;
    },
  };
  trees.set(source, { index, oid });
  return source;
}
