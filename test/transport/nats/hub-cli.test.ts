import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/main.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { startNatsAgent, startNatsHub } from "../../helpers/nats-processes.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { assignmentYaml, file, nodeYaml } from "../../hub/helpers/fleet.js";
import { eventually, runSteward } from "../../hub/helpers/process.js";

describe("nats hub cli - steward hub --nats dispatches to an agent process on the bus", () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-hub-nats-"));
  const children: ChildProcess[] = [];
  let server: TestNatsServer | undefined;

  afterAll(async () => {
    for (const child of children) await stopChild(child);
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
    removeTempDirs();
  });

  it("nats hub cli - a commit reaches a nats node through steward hub --nats and steward agent --nats", async () => {
    const repo = makeRepo({
      files: {
        "nodes/edge-9.yaml": nodeYaml("edge-9", { transport: "nats" }),
        "assignments/motd.yaml": assignmentYaml("motd", {
          nodes: ["edge-9"],
          resources: [file("motd", "managed over NATS\n")],
        }),
      },
    }).dir;

    const io = { stdout: () => {}, stderr: () => {}, env: {}, cwd: dir, isTty: false };
    expect(await main(["nats", "config", "--static", "--out", "bus", "--nodes-from", repo], io)).toBe(0);
    server = await startNatsServer({ configFile: join(dir, "bus", "nats-server.conf") });
    const creds = (path: string) => join(dir, "bus", "credentials", path);
    const hubState = join(dir, "hub-state");
    children.push(
      await startNatsHub({ cwd: dir, state: hubState, repo, url: server.url, creds: creds("hub.nk") }),
      await startNatsAgent({
        cwd: dir,
        url: server.url,
        node: "edge-9",
        creds: creds("nodes/edge-9.nk"),
      }),
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
