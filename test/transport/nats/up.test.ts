import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { killServices } from "../../agent/helpers.js";
import { exampleRepoOnFreePorts } from "../../helpers/example-repo.js";
import { runSteward } from "../../hub/helpers/process.js";

/** Command lines of running processes that contain `text`. */
function processesMentioning(text: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const command = readFileSync(join("/proc", pid, "cmdline"), "utf8").replaceAll("\0", " ");
      if (command.includes(text)) found.push(command);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

describe("nats up - steward up --transport nats runs the local nodes as agent processes on a local nats-server", () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-up-nats-"));
  const state = join(dir, "state");

  const agents = join(state, "agents");
  let ports = new Map<string, number>();
  const repo = join(dir, "repo");
  // Wherever an agent recorded them (before agents shared one state, the NATS ones kept their own).
  const killWebServers = () => {
    for (const [parent, below] of [
      [agents, ""],
      [join(state, "fleet", "nodes"), "state"],
    ] as const)
      if (existsSync(parent)) for (const node of readdirSync(parent)) killServices(join(parent, node, below));
  };

  afterAll(() => {
    killWebServers();
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats up - the example fleet converges over NATS and the processes are gone after --once", async () => {
    ports = await exampleRepoOnFreePorts(repo);
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd: repo });
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-qm", "the example fleet");

    const run = await runSteward(
      ["--state", state, "up", "--transport", "nats", "--repo", repo, "--once", "--timeout", "150s"],
      { cwd: dir, timeoutMs: 180_000 },
    );
    expect(run.stderr).toBe("");
    expect(run.stdout).toMatch(
      /right: no open conditions; 6\/6 instances converged \(3 local nodes in [0-9.]+s; 2 nodes not reached by this hub, see steward status\)\n$/,
    );
    // Each node applied under <state>/root/<node>, as with the in-process agent, but from its own process.
    expect(readFileSync(join(state, "root", "db-1", "var", "lib", "db", "schema-version"), "utf8")).toBe(
      "migrated to 7\n",
    );
    // The example's key came encrypted over the bus; db-1's agent process decrypted it with the demo
    // identity `steward up` installed for it.
    expect(run.stdout).toContain("installed the example's DEMO identities");
    expect(readFileSync(join(state, "root", "db-1", "etc", "db", "tls", "server.key"), "utf8")).toContain(
      "BEGIN PRIVATE KEY",
    );
    // Each agent keeps its state where the in-process agent keeps it, so either finds what the other did.
    for (const node of ["db-1", "web-1", "web-2"])
      expect(existsSync(join(agents, node, "attempts")), node).toBe(true);
    expect(readFileSync(join(state, "fleet", "nats", "nats-server.conf"), "utf8")).toContain("# node web-2");
    expect(run.code).toBe(0);
    // The agents' lines in the hub's log are their own JSON, with one line per attempt.
    const lines = readFileSync(join(state, "hub.log"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.filter((line) => /^\s*\{/.test(String(line.msg)))).toEqual([]);
    const attempts = lines.filter((line) => line.name === "steward-agent" && line.attemptId);
    expect(attempts.length).toBeGreaterThanOrEqual(6);
    for (const line of attempts)
      expect(line).toEqual(
        expect.objectContaining({
          node: expect.stringMatching(/^(db-1|web-1|web-2)$/),
          attemptId: expect.stringMatching(/^[0-9A-Z]{26}$/),
          assignment: expect.any(String),
          generation: expect.any(Number),
          outcome: expect.any(String),
          durationMs: expect.any(Number),
        }),
      );
    // The server and the agent processes went with `steward up` (services stay: a later run adopts them).
    expect(processesMentioning(join(state, "fleet"))).toEqual([]);
  }, 200_000);

  it("nats up - with the web servers killed, a plain steward up in the same state starts them again before it says right", async () => {
    const answers = async (port: number) => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/version`, { signal: AbortSignal.timeout(2_000) })).ok;
      } catch {
        return false;
      }
    };
    expect(await answers(ports.get("web-1")!)).toBe(true);
    killWebServers();
    for (let i = 0; i < 50 && (await answers(ports.get("web-1")!)); i++)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await answers(ports.get("web-1")!)).toBe(false);

    const run = await runSteward(["--state", state, "up", "--repo", repo, "--once", "--timeout", "120s"], {
      cwd: dir,
      timeoutMs: 150_000,
    });
    expect(run.stdout).toMatch(/right: no open conditions; 6\/6 instances converged/);
    expect(run.code).toBe(0);
    // What it said is what is: both servers answer.
    expect([await answers(ports.get("web-1")!), await answers(ports.get("web-2")!)]).toEqual([true, true]);
  }, 200_000);
});
