/**
 * Read-only access to a git object database (loose objects and version 2 pack indexes), for the
 * syncer's hot path: listing trees and reading blobs. isomorphic-git does everything else (clone,
 * fetch, push, refs, commits, writing); its object reads stat the git directory, list the pack
 * directory and inflate with a JavaScript zlib on every call, which costs ~0.25 ms per object — too
 * slow for a 10,000-file fleet. This reader keeps pack indexes (and packs up to 64 MiB) in memory,
 * reads entries of larger packs with positioned reads, and inflates with node:zlib.
 */
import { closeSync, fstatSync, openSync, readdirSync, readFileSync, readSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { inflateSync } from "node:zlib";
import { GitObjectMissingError } from "./errors.js";

/** The four kinds of git object. */
export type GitObjectType = "commit" | "tree" | "blob" | "tag";

/** An object's kind and inflated content (without the `type size\0` header). */
export interface GitObject {
  type: GitObjectType;
  data: Buffer;
}

/** One entry of a tree object. */
export interface TreeEntry {
  /** The entry's name within its tree. */
  name: string;
  mode: string;
  /** `tree` for a directory, `blob` for a file or symlink, `commit` for a submodule. */
  type: "tree" | "blob" | "commit";
  oid: string;
}

const TYPES: Record<number, GitObjectType> = { 1: "commit", 2: "tree", 3: "blob", 4: "tag" };
const OFS_DELTA = 6;
const REF_DELTA = 7;

interface PackIndex {
  path: string;
  fd: number;
  /** The whole pack when it is small enough to keep in memory; otherwise entries are read from `fd`. */
  data?: Buffer;
  count: number;
  fanout: Uint32Array;
  oids: Buffer;
  offsets: Buffer;
  largeOffsets: Buffer;
}

/** Packs up to this size are read into memory once; larger ones are read entry by entry. */
const IN_MEMORY_PACK_BYTES = 64 * 1024 * 1024;

/** Delta bases and trees read from packs are cached by pack and offset up to this many bytes. */
const BASE_CACHE_BYTES = 32 * 1024 * 1024;

/**
 * Reads objects of the git directory `gitdir` (and of the object directories its
 * `objects/info/alternates` names, as `git clone --shared` or `--reference` makes). Call `close()`
 * to release pack file descriptors.
 */
export class ObjectReader {
  private packs: PackIndex[] = [];
  private readonly bases = new Map<string, GitObject>();
  private baseBytes = 0;
  private readonly objectDirs: string[];

  constructor(readonly gitdir: string) {
    this.objectDirs = objectDirectories(join(gitdir, "objects"));
    this.scanPacks();
  }

  /** The object `oid`, inflated. Throws GitObjectMissingError when the repository lacks it. */
  read(oid: string): GitObject {
    const found = this.readPacked(oid) ?? this.readLoose(oid);
    if (found) return found;
    // A fetch or `git gc` may have written a new pack since the last scan.
    this.scanPacks();
    const again = this.readPacked(oid);
    if (again) return again;
    throw new GitObjectMissingError(oid, this.gitdir);
  }

  /** The entries of tree `oid`, in git's order. */
  readTree(oid: string): TreeEntry[] {
    return parseTree(this.readTreeData(oid));
  }

  /** The raw content of tree `oid` (entries as git stores them). */
  readTreeData(oid: string): Buffer {
    const object = this.read(oid);
    if (object.type !== "tree")
      throw new GitObjectMissingError(oid, this.gitdir, `expected a tree, found a ${object.type}`);
    return object.data;
  }

  /** The bytes of blob `oid`. */
  readBlob(oid: string): Buffer {
    const object = this.read(oid);
    if (object.type !== "blob")
      throw new GitObjectMissingError(oid, this.gitdir, `expected a blob, found a ${object.type}`);
    return object.data;
  }

  close(): void {
    for (const pack of this.packs) closeSync(pack.fd);
    this.packs = [];
    this.bases.clear();
    this.baseBytes = 0;
  }

  private scanPacks(): void {
    const known = new Set(this.packs.map((p) => p.path));
    for (const objects of this.objectDirs) {
      const dir = join(objects, "pack");
      let names: string[];
      try {
        names = readdirSync(dir).filter((name) => name.endsWith(".idx"));
      } catch {
        continue;
      }
      for (const name of names) {
        const path = join(dir, name);
        if (known.has(path)) continue;
        try {
          this.packs.push(openPackIndex(path));
        } catch {
          // A pack being written (idx before pack) is picked up by the next scan.
        }
      }
    }
  }

  private readLoose(oid: string): GitObject | undefined {
    let raw: Buffer | undefined;
    for (const objects of this.objectDirs) {
      try {
        raw = readFileSync(join(objects, oid.slice(0, 2), oid.slice(2)));
        break;
      } catch {
        // Not in this object directory.
      }
    }
    if (!raw) return undefined;
    const data = inflateSync(raw);
    const space = data.indexOf(0x20);
    const nul = data.indexOf(0, space);
    const type = data.toString("latin1", 0, space) as GitObjectType;
    return { type, data: data.subarray(nul + 1) };
  }

  private readPacked(oid: string): GitObject | undefined {
    const key = Buffer.from(oid, "hex");
    for (const pack of this.packs) {
      const index = findInIndex(pack, key);
      if (index >= 0) return this.readAt(pack, offsetOf(pack, index));
    }
    return undefined;
  }

  /** The object at `offset`; kept in the cache when it is a delta base or a tree (read again on the next sync). */
  private readAt(pack: PackIndex, offset: number, asBase = false): GitObject {
    const cacheKey = `${pack.path}:${offset}`;
    const cached = this.bases.get(cacheKey);
    if (cached) return cached;
    // Header: type and size in a varint, then for deltas the base's offset or id.
    const head = readPack(pack, offset, 32);
    let byte = head[0]!;
    const kind = (byte >> 4) & 7;
    let size = byte & 15;
    let shift = 4;
    let pos = 1;
    while (byte & 0x80) {
      byte = head[pos++]!;
      size += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    }
    let base: GitObject | undefined;
    if (kind === OFS_DELTA) {
      byte = head[pos++]!;
      let distance = byte & 0x7f;
      while (byte & 0x80) {
        byte = head[pos++]!;
        distance = (distance + 1) * 128 + (byte & 0x7f);
      }
      base = this.readAt(pack, offset - distance, true);
    } else if (kind === REF_DELTA) {
      const baseOid = head.toString("hex", pos, pos + 20);
      pos += 20;
      base = this.read(baseOid);
    }
    const data = inflateAt(pack, offset + pos, size);
    let object: GitObject;
    if (base) object = { type: base.type, data: applyDelta(data, base.data) };
    else {
      const type = TYPES[kind];
      if (!type)
        throw new GitObjectMissingError(`offset ${offset}`, pack.path, `unknown pack entry type ${kind}`);
      object = { type, data };
    }
    // Blobs are read once (their analysis is cached by id): keeping them would only grow the heap.
    if (asBase || object.type === "tree") this.remember(cacheKey, object);
    return object;
  }

  private remember(key: string, object: GitObject): void {
    this.bases.set(key, object);
    this.baseBytes += object.data.length;
    while (this.baseBytes > BASE_CACHE_BYTES && this.bases.size > 1) {
      const [oldest, value] = this.bases.entries().next().value as [string, GitObject];
      this.bases.delete(oldest);
      this.baseBytes -= value.data.length;
    }
  }
}

/** `objects` and, recursively, the object directories its `info/alternates` lists. */
function objectDirectories(objects: string, seen = new Set<string>()): string[] {
  if (seen.has(objects)) return [];
  seen.add(objects);
  const dirs = [objects];
  let alternates: string[] = [];
  try {
    alternates = readFileSync(join(objects, "info", "alternates"), "utf8").split("\n");
  } catch {
    return dirs;
  }
  for (const line of alternates) {
    const entry = line.trim();
    if (!entry || entry.startsWith("#")) continue;
    dirs.push(...objectDirectories(isAbsolute(entry) ? entry : resolve(objects, entry), seen));
  }
  return dirs;
}

function openPackIndex(path: string): PackIndex {
  const idx = readFileSync(path);
  if (idx.readUInt32BE(0) !== 0xff744f63 || idx.readUInt32BE(4) !== 2)
    throw new GitObjectMissingError("pack index", path, "not a version 2 pack index");
  const fanout = new Uint32Array(256);
  for (let i = 0; i < 256; i++) fanout[i] = idx.readUInt32BE(8 + i * 4);
  const count = fanout[255]!;
  const oidsStart = 8 + 256 * 4;
  const offsetsStart = oidsStart + count * 20 + count * 4;
  const largeStart = offsetsStart + count * 4;
  const packPath = path.replace(/\.idx$/, ".pack");
  const fd = openSync(packPath, "r");
  const index: PackIndex = {
    path,
    fd,
    count,
    fanout,
    oids: idx.subarray(oidsStart, oidsStart + count * 20),
    offsets: idx.subarray(offsetsStart, largeStart),
    largeOffsets: idx.subarray(largeStart, idx.length - 40),
  };
  if (fstatSync(fd).size <= IN_MEMORY_PACK_BYTES) index.data = readFileSync(packPath);
  return index;
}

/** Up to `length` bytes of the pack at `position` (fewer at its end). */
function readPack(pack: PackIndex, position: number, length: number): Buffer {
  if (pack.data) return pack.data.subarray(position, position + length);
  const buffer = Buffer.alloc(length);
  const read = readSync(pack.fd, buffer, 0, length, position);
  return buffer.subarray(0, read);
}

function findInIndex(pack: PackIndex, key: Buffer): number {
  const first = key[0]!;
  let low = first === 0 ? 0 : pack.fanout[first - 1]!;
  let high = pack.fanout[first]!;
  while (low < high) {
    const mid = (low + high) >>> 1;
    const cmp = pack.oids.compare(key, 0, 20, mid * 20, mid * 20 + 20);
    if (cmp === 0) return mid;
    if (cmp < 0) low = mid + 1;
    else high = mid;
  }
  return -1;
}

function offsetOf(pack: PackIndex, index: number): number {
  const small = pack.offsets.readUInt32BE(index * 4);
  if (!(small & 0x80000000)) return small;
  return Number(pack.largeOffsets.readBigUInt64BE((small & 0x7fffffff) * 8));
}

/** Inflates the zlib stream at `position` whose inflated size is `size`. */
function inflateAt(pack: PackIndex, position: number, size: number): Buffer {
  // Deflate never grows data by more than 5 bytes per 16 KiB block plus its 6-byte frame.
  const bound = size + 5 * Math.ceil((size + 1) / 16_383) + 64;
  return inflateSync(readPack(pack, position, bound));
}

function readVarint(data: Buffer, start: number): [number, number] {
  let value = 0;
  let shift = 0;
  let pos = start;
  let byte: number;
  do {
    byte = data[pos++]!;
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80);
  return [value, pos];
}

/** Applies a git delta (copy/insert instructions) to `base`. */
function applyDelta(delta: Buffer, base: Buffer): Buffer {
  const [, afterBaseSize] = readVarint(delta, 0);
  const [size, start] = readVarint(delta, afterBaseSize);
  let pos = start;
  const out = Buffer.allocUnsafe(size);
  let written = 0;
  while (pos < delta.length) {
    const op = delta[pos++]!;
    if (op & 0x80) {
      let offset = 0;
      let length = 0;
      for (let bit = 0; bit < 4; bit++) if (op & (1 << bit)) offset += delta[pos++]! * 2 ** (8 * bit);
      for (let bit = 0; bit < 3; bit++) if (op & (16 << bit)) length += delta[pos++]! * 2 ** (8 * bit);
      if (length === 0) length = 0x10000;
      base.copy(out, written, offset, offset + length);
      written += length;
    } else if (op > 0) {
      delta.copy(out, written, pos, pos + op);
      written += op;
      pos += op;
    }
  }
  return out;
}

/** Where the tree entry starting at `pos` ends (`mode SP name NUL oid20`). */
export function treeEntryEnd(data: Buffer, pos: number): number {
  return data.indexOf(0, data.indexOf(0x20, pos)) + 21;
}

/** Parses the tree entry in `data` from `pos` to `end`. */
export function parseTreeEntry(data: Buffer, pos: number, end: number): TreeEntry {
  const space = data.indexOf(0x20, pos);
  const mode = data.toString("latin1", pos, space);
  const name = data.toString("utf8", space + 1, end - 21);
  const oid = data.toString("hex", end - 20, end);
  const type = mode === "40000" ? "tree" : mode === "160000" ? "commit" : "blob";
  return { name, mode, type, oid };
}

/** Parses a tree object's entries. */
export function parseTree(data: Buffer): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (let pos = 0; pos < data.length; ) {
    const end = treeEntryEnd(data, pos);
    entries.push(parseTreeEntry(data, pos, end));
    pos = end;
  }
  return entries;
}
