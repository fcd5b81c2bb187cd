import { describe, expect, it } from "vitest";
import { HostPool } from "../../../src/transport/ssh/pool.js";

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

describe("ssh fan-out pool", () => {
  it("ssh fan-out pool - runs at most `concurrency` jobs at once and starts the next as one finishes", async () => {
    const pool = new HostPool(2);
    const gates = [gate(), gate(), gate()];
    const started: string[] = [];
    const jobs = ["a", "b", "c"].map((host, i) =>
      pool.run(host, 10_000, async () => {
        started.push(host);
        await gates[i]!.opened;
      }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(["a", "b"]);
    expect(pool.load).toEqual({ queued: 1, running: 2 });
    gates[1]!.open();
    await jobs[1];
    expect(started).toEqual(["a", "b", "c"]);
    gates[0]!.open();
    gates[2]!.open();
    await Promise.all(jobs);
    await pool.idle();
    expect(pool.load).toEqual({ queued: 0, running: 0 });
  });

  it("ssh fan-out pool - runs one job at a time per host, in order, while other hosts go ahead", async () => {
    const pool = new HostPool(4);
    const first = gate();
    const order: string[] = [];
    const a1 = pool.run("a", 10_000, async () => {
      order.push("a1 start");
      await first.opened;
      order.push("a1 end");
    });
    const a2 = pool.run("a", 10_000, async () => {
      order.push("a2");
    });
    const b1 = pool.run("b", 10_000, async () => {
      order.push("b1");
    });
    await b1;
    expect(order).toEqual(["a1 start", "b1"]);
    first.open();
    await Promise.all([a1, a2]);
    expect(order).toEqual(["a1 start", "b1", "a1 end", "a2"]);
  });

  it("ssh fan-out pool - aborts a job that runs past its timeout and frees its slot", async () => {
    const pool = new HostPool(1);
    const slow = pool.run(
      "dead",
      50,
      (signal) =>
        new Promise<string>((resolve) =>
          signal.addEventListener("abort", () => resolve(`aborted: ${signal.reason}`)),
        ),
    );
    const next = pool.run("alive", 10_000, async () => "ran");
    expect(await slow).toBe("aborted: Error: timeout");
    expect(await next).toBe("ran");
  });
});
