import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { makeRepo, removeTempDirs, tempDir } from "../../helpers/git.js";
import { assignmentYaml, fleetYaml } from "../../hub/helpers/fleet.js";
import { runSteward, startSteward, stewardEntry } from "../../hub/helpers/process.js";
import { sshNode, until, withHosts } from "./fixtures.js";

// The operator's path: `steward hub --ssh-key ...` as a process, syncing a fleet repo whose nodes
// are loopback sshd hosts with pinned keys and no steward installed.
const hosts = withHosts(2);
const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");
afterAll(removeTempDirs);

describe("ssh transport - steward hub", () => {
  it("ssh transport - `steward hub --ssh-key` converges SSH nodes and `steward status` shows nothing open", async () => {
    const servers = hosts.fleet().servers;
    const files: Record<string, string> = {
      "steward.yaml": fleetYaml({ mode: "apply", heartbeat: { interval: "2s", missed: 3 } }),
      "assignments/motd.yaml": assignmentYaml("motd", {
        selector: { matchLabels: { env: "edge" } },
        version: "7",
        resources: [
          { kind: "directory", path: `\${node.vars.root}/etc` },
          {
            kind: "file",
            path: `\${node.vars.root}/etc/motd`,
            content: `release \${assignment.version} on \${node.name}\n`,
          },
        ],
      }),
    };
    servers.forEach((server, i) => {
      const node = sshNode(`edge-${i}`, server);
      node.metadata.labels = { env: "edge" };
      files[`nodes/edge-${i}.yaml`] = stringify(node);
    });
    const repo = makeRepo();
    repo.commit("two edge hosts", files);

    // The hub finds the single-file agent next to its own entry, as in an installed package.
    const entry = await stewardEntry();
    const agent = join(dirname(dirname(entry)), "steward-agent.mjs");
    if (!existsSync(agent))
      execFileSync(process.execPath, [join(REPO_ROOT, "scripts/build-agent.mjs"), "--out", agent], {
        cwd: REPO_ROOT,
        stdio: "pipe",
      });

    const dir = tempDir("steward-hub-ssh-");
    const state = join(dir, "state");
    const hub = await startSteward(
      [
        "--state",
        state,
        "hub",
        "--repo",
        repo.dir,
        "--listen",
        "127.0.0.1:0",
        "--sync-interval",
        "1s",
        "--ssh-key",
        hosts.fleet().clientKey.privateKeyFile,
      ],
      { cwd: dir, log: join(dir, "hub.log"), env: { SSH_AUTH_SOCK: "" } },
    );
    const log = () => readFileSync(join(dir, "hub.log"), "utf8");
    try {
      const motd = (i: number) => join(servers[i]!.root, "managed", "etc", "motd");
      await until(
        () => (servers.every((_, i) => existsSync(motd(i))) ? true : undefined),
        "the motd on both hosts",
        60_000,
      ).catch((error: Error) => {
        throw new Error(`${error.message}; the hub's log:\n${log().slice(-4000)}`);
      });
      expect(servers.map((_, i) => readFileSync(motd(i), "utf8"))).toEqual([
        "release 7 on edge-0\n",
        "release 7 on edge-1\n",
      ]);
      const status = await until(
        async () => {
          const run = await runSteward(["--state", state, "status", "--json"], { cwd: dir });
          return run.code === 0 ? run : undefined;
        },
        "steward status to report nothing open",
        60_000,
      );
      expect(JSON.parse(status.stdout)).toMatchObject({ conditions: [] });
    } finally {
      hub.kill("SIGTERM");
      await new Promise((resolve) => hub.once("exit", resolve));
    }
    expect(readFileSync(join(dir, "hub.log"), "utf8")).toContain("steward hub: serving");
  }, 120_000);
});
