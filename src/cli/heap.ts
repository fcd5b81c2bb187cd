/**
 * The hub process's heap policy (a process concern, so it lives at the edge that starts the hub):
 * V8's heap kept near what lives in it while work flows, and the heap a burst of work leaves
 * fragmented given back once the hub is idle.
 */
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/**
 * Lets V8's heap grow only a quarter past what the last full collection found alive. By default it
 * grows up to four times past it, and a rollout allocates fast: 10,000 instances left the hub at
 * 475 MiB resident, at rest, for 71 MiB alive; with this, 160 MiB, at the same CPU per instance
 * (`npm run bench:scale`). A process started with its own `--heap-growing-percent` keeps it.
 */
export function keepHeapNearLive(): void {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)];
  if (given.some((flag) => /^--heap[-_]growing[-_]percent/.test(flag))) return;
  setFlagsFromString("--heap-growing-percent=25");
}

/** Old space as V8 counts it, bytes: what its pages hold, and what lives (or awaits collection) in them. */
export interface OldSpace {
  size: number;
  used: number;
}

const MiB = 2 ** 20;

/**
 * Whether to compact the heap now: the hub is idle, old space holds more than a quarter (and at
 * least 32 MiB) above what it uses, and the last compaction is a minute past. The thresholds keep it
 * to the aftermath of a burst: ordinary traffic between two collections frees less.
 */
export function shouldCompact(input: {
  space: OldSpace;
  idle: boolean;
  now: number;
  lastCompactedAt: number | undefined;
}): boolean {
  const { space, idle, now, lastCompactedAt } = input;
  if (!idle) return false;
  if (lastCompactedAt !== undefined && now - lastCompactedAt < 60_000) return false;
  const free = space.size - space.used;
  return free >= 32 * MiB && free > space.used / 4;
}

/**
 * Every `everyMs`, compacts the heap when `shouldCompact` says so. V8 compacts on its own only the
 * pages it judges sparse enough: after a rollout of 100,000 instances old space held 248 MiB for
 * 163 used (85 MiB resident for nothing); a compacting full collection brings it down to what is
 * used. The collection costs a pause of a few hundred milliseconds on such a heap, taken while the
 * hub has nothing to do. Returns the function that stops it.
 */
export function compactWhenIdle(options: { idle: () => boolean; everyMs?: number }): () => void {
  let lastCompactedAt: number | undefined;
  const timer = setInterval(() => {
    const old = getHeapSpaceStatistics().find((space) => space.space_name === "old_space");
    if (!old) return;
    const now = Date.now();
    const space = { size: old.space_size, used: old.space_used_size };
    if (!shouldCompact({ space, idle: options.idle(), now, lastCompactedAt })) return;
    lastCompactedAt = now;
    try {
      compactHeap();
    } catch {
      // A Node whose V8 refuses flags once started: the heap stays as V8 leaves it.
    }
  }, options.everyMs ?? 10_000);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * One full collection that moves every live object together (V8's flag turned on for it alone),
 * so that the pages it empties are given back.
 */
export function compactHeap(): void {
  setFlagsFromString("--compact-on-every-full-gc");
  try {
    collectGarbage();
  } finally {
    setFlagsFromString("--no-compact-on-every-full-gc");
  }
}

let gc: (() => void) | undefined;

/** V8's `gc()`: exposed to a context made after the flag is set, without starting Node with it. */
function collectGarbage(): void {
  if (!gc) {
    setFlagsFromString("--expose-gc");
    const exposed: unknown = runInNewContext("typeof gc === 'function' ? gc : undefined");
    if (typeof exposed !== "function") throw new Error("V8 did not expose gc()");
    gc = exposed as () => void;
  }
  gc();
}
