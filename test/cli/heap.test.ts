import { getHeapSpaceStatistics } from "node:v8";
import { describe, expect, it } from "vitest";
import { compactHeap, shouldCompact } from "../../src/cli/heap.js";

const MiB = 2 ** 20;
const NOW = 1_000_000;

describe("cli - heap", () => {
  const cases: {
    name: string;
    size: number;
    used: number;
    idle: boolean;
    lastCompactedAt?: number;
    compact: boolean;
  }[] = [
    {
      name: "idle after a burst left a third free",
      size: 248 * MiB,
      used: 163 * MiB,
      idle: true,
      compact: true,
    },
    { name: "busy: never while work flows", size: 248 * MiB, used: 163 * MiB, idle: false, compact: false },
    {
      name: "a small heap's free space is not worth it",
      size: 60 * MiB,
      used: 30 * MiB,
      idle: true,
      compact: false,
    },
    {
      name: "free space under a quarter of use",
      size: 400 * MiB,
      used: 330 * MiB,
      idle: true,
      compact: false,
    },
    {
      name: "compacted less than a minute ago",
      size: 248 * MiB,
      used: 163 * MiB,
      idle: true,
      lastCompactedAt: NOW - 30_000,
      compact: false,
    },
    {
      name: "compacted a minute ago",
      size: 248 * MiB,
      used: 163 * MiB,
      idle: true,
      lastCompactedAt: NOW - 60_000,
      compact: true,
    },
  ];
  for (const c of cases)
    it(`cli - heap: ${c.name}`, () => {
      expect(
        shouldCompact({
          space: { size: c.size, used: c.used },
          idle: c.idle,
          now: NOW,
          lastCompactedAt: c.lastCompactedAt,
        }),
      ).toBe(c.compact);
    });

  it("cli - heap: a compaction gives back the pages a burst left sparse", () => {
    // A burst: many objects made, one in sixteen kept, so the pages they sit on are mostly empty.
    const kept: object[] = [];
    for (let round = 0; round < 40; round++) {
      const made: object[] = [];
      for (let i = 0; i < 100_000; i++) made.push({ i, text: `x${i}`, list: [i] });
      for (let i = 0; i < made.length; i += 16) kept.push(made[i] as object);
    }
    compactHeap();
    const old = getHeapSpaceStatistics().find((space) => space.space_name === "old_space");
    expect(old).toBeDefined();
    const { space_size: size, space_used_size: used } = old as {
      space_size: number;
      space_used_size: number;
    };
    // What survives fills its pages again: V8 alone left some 30 MiB free here (size ~2× used).
    expect(size - used).toBeLessThan(Math.max(4 * MiB, used / 4));
    expect(kept.length).toBe(250_000);
  });
});
