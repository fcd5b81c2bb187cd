import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { runEvidence } from "../../src/agent/evidence.js";
import { errorLine } from "../../src/model/error-line.js";

/** Runs a real process and returns its output as steward's command evidence records it. */
function crash(argv: string[]): string {
  return evidenceOf(spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", timeout: 20_000 }));
}

function evidenceOf(result: SpawnSyncReturns<string>): string {
  return runEvidence({
    exitCode: result.status,
    signal: result.signal,
    stdout: result.stdout,
    stderr: result.stderr,
  });
}

let listener: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
  listener = undefined;
});

describe("model - error line", () => {
  it("model - error line: a Node server crashing with EADDRINUSE shows the Error line, not node:events:502", async () => {
    listener = createServer();
    await new Promise<void>((resolve) => listener!.listen(0, "127.0.0.1", resolve));
    const port = (listener.address() as { port: number }).port;
    const run = spawnSync(
      process.execPath,
      ["-e", `require("node:net").createServer().listen(${port}, "127.0.0.1")`],
      { encoding: "utf8", timeout: 20_000 },
    );
    expect(run.stderr).toMatch(/^node:events:\d+\n/);
    const line = `Error: listen EADDRINUSE: address already in use 127.0.0.1:${port}`;
    expect(errorLine(run.stderr)).toBe(line);
    const output = evidenceOf(run);
    // Recorded as the command driver records it: the last lines of stderr, and the line naming the error.
    expect(output).toMatch(/^exit code 1\nstderr:\nError: listen EADDRINUSE/);
    expect(errorLine(output)).toBe(line);
  });

  const cases: { name: string; argv: string[]; line: string }[] = [
    {
      name: "a thrown TypeError",
      argv: [process.execPath, "-e", 'console.log("starting"); throw new TypeError("boom")'],
      line: "TypeError: boom",
    },
    {
      name: "an unhandled rejection",
      argv: [process.execPath, "-e", 'Promise.reject(new RangeError("out of range"))'],
      line: "RangeError: out of range",
    },
    {
      name: "a Python traceback",
      argv: ["python3", "-c", 'def f():\n    raise ValueError("bad value")\nf()'],
      line: "ValueError: bad value",
    },
    {
      name: "a shell `set -e` failure: the last thing it printed",
      argv: ["sh", "-c", "set -e; echo starting; cat /nonexistent/config; echo never"],
      line: "cat: /nonexistent/config: No such file or directory",
    },
    {
      name: "git refusing: its `fatal:` line",
      argv: ["git", "-C", process.cwd(), "rev-parse", "--verify", "no-such-ref-anywhere"],
      line: "fatal: Needed a single revision",
    },
    {
      name: "a command that printed nothing: its exit code",
      argv: ["sh", "-c", "exit 3"],
      line: "exit code 3",
    },
  ];
  for (const c of cases)
    it(`model - error line: ${c.name}`, () => {
      expect(errorLine(crash(c.argv))).toBe(c.line);
    });

  it("model - error line: nothing to say for no output", () => {
    expect(errorLine(undefined)).toBeUndefined();
    expect(errorLine("\n  \n")).toBeUndefined();
  });
});
