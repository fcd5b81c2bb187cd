import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { WarningDigest } from "../../src/hub/warning-digest.js";

function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { lines, log };
}

describe("hub - warning digest", () => {
  afterEach(() => vi.useRealTimers());

  it("hub - a warning repeated for thousands of nodes is one full line, then one summary per window with counts, reasons and a few names", () => {
    vi.useFakeTimers();
    const { lines, log } = capture();
    const digest = new WarningDigest(
      log,
      "could not ask node %s for a report",
      "could not ask %d more nodes for a report in the last %s",
      30_000,
    );
    for (let i = 0; i < 3_000; i++)
      digest.warn(`node-${i}`, new Error(i % 3 === 0 ? "TIMEOUT" : "no responders"), { node: `node-${i}` });
    // The first one, in full: its node and its error with the stack.
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: "could not ask node node-0 for a report",
      node: "node-0",
      err: { stack: expect.stringContaining("TIMEOUT") },
    });

    vi.advanceTimersByTime(30_000);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({
      level: 40,
      msg: "could not ask 2999 more nodes for a report in the last 30 s",
      count: 2_999,
      examples: ["node-1", "node-2", "node-3", "node-4", "node-5"],
      reasons: { TIMEOUT: 999, "no responders": 2_000 },
    });

    // A quiet window writes nothing; the next warning is in full again.
    vi.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(2);
    digest.warn("node-7", new Error("TIMEOUT"));
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({ msg: "could not ask node node-7 for a report" });
  });

  it("hub - the summary keeps secrets out and caps the reasons it names; flush writes what is counted at once", () => {
    const { lines, log } = capture();
    const digest = new WarningDigest(log, "failed for %s", "failed for %d more in the last %s", 60_000);
    digest.warn("a", new Error("first"));
    for (let i = 0; i < 8; i++) digest.warn(`n${i}`, new Error(`reason ${i} token=abc${i}`));
    digest.flush();
    expect(lines).toHaveLength(2);
    const reasons = lines[1]?.reasons as Record<string, number>;
    expect(Object.keys(reasons)).toHaveLength(6);
    expect(reasons.other).toBe(3);
    expect(reasons["reason 0 token=[redacted]"]).toBe(1);
    expect(JSON.stringify(lines[1])).not.toContain("abc");
    digest.flush();
    expect(lines).toHaveLength(2);
  });
});
