import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, killServices } from "../../agent/helpers.js";
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

  afterAll(() => {
    const nodes = join(state, "fleet", "nodes");
    if (existsSync(nodes)) for (const node of readdirSync(nodes)) killServices(join(nodes, node, "state"));
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats up - the example fleet converges over NATS and the processes are gone after --once", async () => {
    // The example fleet, with its web ports moved to free ones (other tests may use the declared ones).
    const repo = join(dir, "repo");
    cpSync(resolve("examples/repo"), repo, { recursive: true });
    for (const node of ["web-1", "web-2"]) {
      const file = join(repo, "nodes", `${node}.yaml`);
      writeFileSync(
        file,
        readFileSync(file, "utf8").replace(/httpPort: "\d+"/, `httpPort: "${await freePort()}"`),
      );
    }
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
    expect(run.stdout).toMatch(/converged: 6\/6 instances on 3 local nodes in [0-9.]+s\n$/);
    // Each node applied under <state>/root/<node>, as with the in-process agent, but from its own process.
    expect(readFileSync(join(state, "root", "db-1", "var", "lib", "db", "schema-version"), "utf8")).toBe(
      "migrated to 7\n",
    );
    for (const node of ["db-1", "web-1", "web-2"])
      expect(existsSync(join(state, "fleet", "nodes", node, "state", "attempts")), node).toBe(true);
    expect(readFileSync(join(state, "fleet", "nats", "nats-server.conf"), "utf8")).toContain("# node web-2");
    expect(run.code).toBe(0);
    // The server and the agent processes went with `steward up` (services stay: a later run adopts them).
    expect(processesMentioning(join(state, "fleet"))).toEqual([]);
  }, 200_000);
});
