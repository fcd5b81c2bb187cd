import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { assignmentYaml, fleetYaml } from "../../hub/helpers/fleet.js";
import { runSteward } from "../../hub/helpers/process.js";
import { sshNode, startSshHub, until, withHosts } from "./fixtures.js";

// The operator's path: `steward hub --ssh-key ...` as a process, syncing a fleet repo whose nodes
// are loopback sshd hosts with pinned keys and no steward installed.
const hosts = withHosts(2);
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

    const { dir, state, log, stop } = await startSshHub({
      repo: repo.dir,
      clientKeyFile: hosts.fleet().clientKey.privateKeyFile,
      syncInterval: "1s",
    });
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
      await stop();
    }
    expect(readFileSync(join(dir, "hub.log"), "utf8")).toContain("steward hub: serving");
  }, 120_000);
});
