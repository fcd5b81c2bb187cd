import { type ChildProcess, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/main.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { assignmentYaml, file, nodeYaml } from "../../hub/helpers/fleet.js";
import { eventually, runSteward, startSteward } from "../../hub/helpers/process.js";

describe("nats hub cli - steward hub --nats dispatches to an agent process on the bus", () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-hub-nats-"));
  const children: ChildProcess[] = [];
  let server: TestNatsServer | undefined;

  afterAll(async () => {
    for (const child of children) await stopChild(child);
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats hub cli - a commit reaches a nats node through steward hub --nats and steward agent --nats", async () => {
    const repo = join(dir, "repo");
    mkdirSync(join(repo, "nodes"), { recursive: true });
    mkdirSync(join(repo, "assignments"));
    writeFileSync(join(repo, "nodes", "edge-9.yaml"), nodeYaml("edge-9", { transport: "nats" }));
    writeFileSync(
      join(repo, "assignments", "motd.yaml"),
      assignmentYaml("motd", { nodes: ["edge-9"], resources: [file("motd", "managed over NATS\n")] }),
    );
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd: repo });
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-qm", "one node on the bus");

    const io = { stdout: () => {}, stderr: () => {}, env: {}, cwd: dir, isTty: false };
    expect(await main(["nats", "config", "--out", "bus", "--nodes-from", repo], io)).toBe(0);
    server = await startNatsServer({ configFile: join(dir, "bus", "nats-server.conf") });
    const creds = (path: string) => join(dir, "bus", "credentials", path);
    const hubState = join(dir, "hub-state");
    children.push(
      await startSteward(
        [
          "--state",
          hubState,
          "hub",
          "--repo",
          repo,
          "--listen",
          "127.0.0.1:0",
          "--sync-interval",
          "1s",
          "--nats",
          server.url,
          "--nats-creds",
          creds("hub.nk"),
        ],
        { cwd: dir, log: join(dir, "hub.log") },
      ),
      await startSteward(
        [
          "--state",
          join(dir, "agent-state"),
          "agent",
          "--nats",
          server.url,
          "--creds",
          creds("nodes/edge-9.nk"),
          "--node",
          "edge-9",
          "--root",
          join(dir, "edge-9"),
          "--heartbeat",
          "1s",
        ],
        { cwd: dir, log: join(dir, "agent.log") },
      ),
    );
    const motd = join(dir, "edge-9", "srv", "motd");
    await eventually(
      () => existsSync(motd),
      60_000,
      `the file on edge-9 (hub log:\n${readLog(dir, "hub.log")})`,
    );
    expect(readFileSync(motd, "utf8")).toBe("managed over NATS\n");
    // The hub saw it converge: `steward status` exits 0 once no condition is open.
    let status = await runSteward(["--state", hubState, "status"], { cwd: dir });
    for (let tries = 0; status.code !== 0 && tries < 60; tries++) {
      await new Promise((r) => setTimeout(r, 1_000));
      status = await runSteward(["--state", hubState, "status"], { cwd: dir });
    }
    expect(status.stdout).toMatch(/no open conditions/i);
    expect(status.code).toBe(0);
  }, 150_000);
});

function readLog(dir: string, name: string): string {
  const path = join(dir, name);
  return existsSync(path) ? readFileSync(path, "utf8").slice(-3000) : "";
}
