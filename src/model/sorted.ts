/** Maps kept sorted by key, changed by difference. */

function byKey<V>(a: [string, V], b: [string, V]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

/**
 * A copy of `previous` (sorted by key) with `changes` applied (undefined: removed), still sorted by
 * key. Maps handed out by a load are never changed afterwards, so a load that changes one copies it
 * (natively when no key is new; otherwise a merge, not a sort).
 */
export function sortedWith<V>(
  previous: ReadonlyMap<string, V>,
  changes: ReadonlyMap<string, V | undefined>,
): Map<string, V> {
  const added: [string, V][] = [];
  for (const [key, value] of changes) if (value !== undefined && !previous.has(key)) added.push([key, value]);
  if (added.length === 0) {
    // Values replaced or keys removed: the order stands, and the copy is native.
    const next = new Map(previous);
    for (const [key, value] of changes) {
      if (value === undefined) next.delete(key);
      else next.set(key, value);
    }
    return next;
  }
  added.sort(byKey);
  const next = new Map<string, V>();
  let i = 0;
  for (const [key, value] of previous) {
    while (i < added.length && added[i]![0] < key) next.set(added[i]![0], added[i++]![1]);
    if (!changes.has(key)) next.set(key, value);
    else {
      const changed = changes.get(key);
      if (changed !== undefined) next.set(key, changed);
    }
  }
  for (; i < added.length; i++) next.set(added[i]![0], added[i]![1]);
  return next;
}
