/**
 * Maps sorted by key that are never changed once made: a change makes a new map that shares every
 * part the change does not touch. The loader hands its nodes, assignments and instances out as
 * these, so a one-file change of a fleet of 10,000 copies one chunk of a map, not the map.
 */

/** A run of consecutive entries, sorted by key. Never changed once in a map. */
interface Chunk<V> {
  keys: string[];
  values: V[];
}

/** Entries per chunk when a map is built; a chunk that grows to twice this is split. */
const CHUNK = 128;

/** Beyond this share of the size, a change rebuilds the map in one merge rather than chunk by chunk. */
const REBUILD_SHARE = 0.25;

function byKey<V>(a: readonly [string, V], b: readonly [string, V]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

/** Index of `key` in sorted `keys`, or `-(insertion point) - 1` when it is not there. */
function search(keys: readonly string[], key: string): number {
  let low = 0;
  let high = keys.length - 1;
  while (low <= high) {
    const mid = (low + high) >>> 1;
    const at = keys[mid]!;
    if (at < key) low = mid + 1;
    else if (at > key) high = mid - 1;
    else return mid;
  }
  return -low - 1;
}

function chunked<V>(entries: readonly (readonly [string, V])[]): Chunk<V>[] {
  const chunks: Chunk<V>[] = [];
  for (let start = 0; start < entries.length; start += CHUNK) {
    const keys: string[] = [];
    const values: V[] = [];
    for (let i = start; i < Math.min(entries.length, start + CHUNK); i++) {
      keys.push(entries[i]![0]);
      values.push(entries[i]![1]);
    }
    chunks.push({ keys, values });
  }
  return chunks;
}

/**
 * An immutable map from string keys, iterated in key order (`<` on strings). `get` and `has` are
 * binary searches; `with` copies only the chunks (of about 128 entries) that a change touches.
 */
export class SortedMap<V> implements ReadonlyMap<string, V> {
  readonly size: number;
  private readonly chunks: readonly Chunk<V>[];
  /** The first key of each chunk. */
  private readonly firsts: readonly string[];

  private constructor(chunks: readonly Chunk<V>[], size: number) {
    this.chunks = chunks;
    this.size = size;
    this.firsts = chunks.map((chunk) => chunk.keys[0]!);
  }

  /** The map of `entries`, which must be sorted by key with no key twice. */
  static fromSorted<V>(entries: readonly (readonly [string, V])[]): SortedMap<V> {
    return new SortedMap(chunked(entries), entries.length);
  }

  /** The map of `entries` in any order; of two entries with one key, the later counts. */
  static from<V>(entries: Iterable<readonly [string, V]>): SortedMap<V> {
    const unique = new Map<string, V>();
    for (const [key, value] of entries) unique.set(key, value);
    return SortedMap.fromSorted([...unique].sort(byKey));
  }

  /**
   * The entries of `next` that `previous` lacks or holds another value for (`same(later, earlier)`
   * says whether two values are alike; identity by default), and the keys of `previous` that `next`
   * lacks. Between two SortedMaps that share chunks (one made from the other by `with`), only the
   * chunks they do not share are looked at: a one-file change of a fleet of 10,000 nodes compares a
   * chunk, not the fleet. Other maps are compared entry by entry.
   */
  static changesSince<V>(
    next: ReadonlyMap<string, V>,
    previous: ReadonlyMap<string, V>,
    same: (later: V, earlier: V) => boolean = (later, earlier) => later === earlier,
  ): MapChanges<V> {
    const out: MapChanges<V> = { changed: [], removed: [] };
    const differs = (key: string, value: V) => {
      const before = previous.get(key);
      return before === undefined || !same(value, before);
    };
    if (next instanceof SortedMap && previous instanceof SortedMap) {
      const later = new Set(next.chunks);
      const earlier = new Set(previous.chunks);
      for (const chunk of next.chunks)
        if (!earlier.has(chunk))
          for (let i = 0; i < chunk.keys.length; i++)
            if (differs(chunk.keys[i]!, chunk.values[i]!))
              out.changed.push([chunk.keys[i]!, chunk.values[i]!]);
      for (const chunk of previous.chunks)
        if (!later.has(chunk)) for (const key of chunk.keys) if (!next.has(key)) out.removed.push(key);
      return out;
    }
    for (const [key, value] of next) if (differs(key, value)) out.changed.push([key, value]);
    for (const key of previous.keys()) if (!next.has(key)) out.removed.push(key);
    return out;
  }

  /** The chunk that holds `key` if the map has it: the last chunk starting at or before it. */
  private chunkFor(key: string): number {
    const at = search(this.firsts, key);
    return at >= 0 ? at : Math.max(0, -at - 2);
  }

  get(key: string): V | undefined {
    if (this.size === 0) return undefined;
    const chunk = this.chunks[this.chunkFor(key)]!;
    const i = search(chunk.keys, key);
    return i >= 0 ? chunk.values[i] : undefined;
  }

  has(key: string): boolean {
    if (this.size === 0) return false;
    return search(this.chunks[this.chunkFor(key)]!.keys, key) >= 0;
  }

  /**
   * This map with `changes` applied (a value of undefined removes the key). This map stays as it
   * is; the new one shares its untouched chunks.
   */
  with(changes: ReadonlyMap<string, V | undefined>): SortedMap<V> {
    if (changes.size === 0) return this;
    if (this.size === 0 || changes.size > this.size * REBUILD_SHARE) return this.merged(changes);
    const byChunk = new Map<number, [string, V | undefined][]>();
    for (const [key, value] of changes) {
      const index = this.chunkFor(key);
      const list = byChunk.get(index);
      if (list) list.push([key, value]);
      else byChunk.set(index, [[key, value]]);
    }
    let size = this.size;
    const chunks: Chunk<V>[] = [];
    for (let index = 0; index < this.chunks.length; index++) {
      const chunk = this.chunks[index]!;
      const list = byChunk.get(index);
      if (!list) {
        chunks.push(chunk);
        continue;
      }
      const keys = chunk.keys.slice();
      const values = chunk.values.slice();
      for (const [key, value] of list.sort(byKey)) {
        const i = search(keys, key);
        if (value === undefined) {
          if (i >= 0) {
            keys.splice(i, 1);
            values.splice(i, 1);
            size--;
          }
        } else if (i >= 0) values[i] = value;
        else {
          keys.splice(-i - 1, 0, key);
          values.splice(-i - 1, 0, value);
          size++;
        }
      }
      if (keys.length === 0) continue;
      if (keys.length < CHUNK * 2) chunks.push({ keys, values });
      else
        for (let start = 0; start < keys.length; start += CHUNK)
          chunks.push({ keys: keys.slice(start, start + CHUNK), values: values.slice(start, start + CHUNK) });
    }
    return new SortedMap(chunks, size);
  }

  /** `with` for a change to much of the map: one merge of the entries and the sorted changes. */
  private merged(changes: ReadonlyMap<string, V | undefined>): SortedMap<V> {
    const sorted = [...changes].sort(byKey);
    const out: [string, V][] = [];
    let j = 0;
    for (const chunk of this.chunks)
      for (let i = 0; i < chunk.keys.length; i++) {
        const key = chunk.keys[i]!;
        while (j < sorted.length && sorted[j]![0] < key) {
          const [added, value] = sorted[j++]!;
          if (value !== undefined) out.push([added, value]);
        }
        if (j < sorted.length && sorted[j]![0] === key) {
          const value = sorted[j++]![1];
          if (value !== undefined) out.push([key, value]);
        } else out.push([key, chunk.values[i]!]);
      }
    for (; j < sorted.length; j++) {
      const [added, value] = sorted[j]!;
      if (value !== undefined) out.push([added, value]);
    }
    return SortedMap.fromSorted(out);
  }

  *entries(): MapIterator<[string, V]> {
    for (const chunk of this.chunks)
      for (let i = 0; i < chunk.keys.length; i++) yield [chunk.keys[i]!, chunk.values[i]!];
  }

  *keys(): MapIterator<string> {
    for (const chunk of this.chunks) yield* chunk.keys;
  }

  *values(): MapIterator<V> {
    for (const chunk of this.chunks) yield* chunk.values;
  }

  [Symbol.iterator](): MapIterator<[string, V]> {
    return this.entries();
  }

  forEach(callback: (value: V, key: string, map: ReadonlyMap<string, V>) => void, thisArg?: unknown): void {
    for (const chunk of this.chunks)
      for (let i = 0; i < chunk.keys.length; i++)
        callback.call(thisArg, chunk.values[i]!, chunk.keys[i]!, this);
  }

  get [Symbol.toStringTag](): string {
    return "SortedMap";
  }
}

/** What differs in a map from an earlier one: entries added or changed, and keys removed. */
export interface MapChanges<V> {
  changed: [string, V][];
  removed: string[];
}

/** An empty SortedMap. */
export function emptySorted<V>(): SortedMap<V> {
  return SortedMap.fromSorted<V>([]);
}
