import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createSshTransport, ObservationScheduler } from "../../../src/transport/ssh/index.js";
import { assignmentYaml, fleetYaml, nodeYaml } from "../../hub/helpers/fleet.js";
import { startHarness } from "../../hub/helpers/harness.js";
import { testAgentFile, until, withHosts } from "./fixtures.js";

// The whole path over SSH: a real git repo synced by the real syncer, the hub reconciling, and the
// SSH transport running the uploaded agent on three loopback hosts that have no steward.
const hosts = withHosts(3);

function fleetFiles(release: string): Record<string, string> {
  const files: Record<string, string> = {
    "steward.yaml": fleetYaml({ mode: "apply" }),
    "assignments/motd.yaml": assignmentYaml("motd", {
      selector: { matchLabels: { env: "test" } },
      resources: [
        // Paths must be absolute as written; each host's root is its own directory on this machine.
        { kind: "directory", path: `/\${node.vars.root}/etc` },
        { kind: "file", path: `/\${node.vars.root}/etc/motd`, content: `${release} on \${node.name}\n` },
      ],
    }),
  };
  hosts.fleet().servers.forEach((server, i) => {
    files[`nodes/edge-${i}.yaml`] = nodeYaml(`edge-${i}`, {
      transport: "ssh",
      ssh: { host: server.host, port: server.port, user: server.user, hostKey: server.hostKey.publicKey },
      roots: [`${server.root}/managed`],
      vars: { root: `${server.root.slice(1)}/managed` },
    });
  });
  return files;
}

describe("ssh transport - with the hub", () => {
  it("ssh transport - the hub converges SSH nodes on loopback, commit after commit, and observes them", async () => {
    const transport = createSshTransport({
      keyFile: hosts.fleet().clientKey.privateKeyFile,
      agentSocket: null,
      agentFile: testAgentFile(),
    });
    const h = await startHarness({ files: fleetFiles("release 1"), wrap: () => transport });
    const keys = hosts.fleet().servers.map((_, i) => `motd@edge-${i}`);
    const status = async (key: string) => {
      try {
        return await h.intent(key);
      } catch {
        return undefined; // not synced into an intent yet
      }
    };
    const motd = (i: number) => readFileSync(`${hosts.fleet().servers[i]!.root}/managed/etc/motd`, "utf8");

    await h.commit("release 1");
    await until(
      async () =>
        (await Promise.all(keys.map(status))).every((i) => i?.status === "converged") ? true : undefined,
      "release 1 converged",
    );
    expect(hosts.fleet().servers.map((_, i) => motd(i))).toEqual([
      "release 1 on edge-0\n",
      "release 1 on edge-1\n",
      "release 1 on edge-2\n",
    ]);

    h.write(fleetFiles("release 2"));
    await h.commit("release 2");
    await until(
      async () =>
        (await Promise.all(keys.map(status))).every((i) => i?.status === "converged" && i.generation === 2)
          ? true
          : undefined,
      "release 2 converged",
    );
    expect(motd(1)).toBe("release 2 on edge-1\n");

    // Observation without change keeps the nodes heard from: each answers, none is silent.
    const specs = await Promise.all(keys.map(async (_, i) => (await h.store.nodes.get(`edge-${i}`))!.spec));
    const scheduler = new ObservationScheduler({
      transport,
      nodes: () => specs,
      intervalMs: 60_000,
    });
    await scheduler.round();
    await scheduler.stop();
    expect(keys.map((_, i) => scheduler.lastObserved(`edge-${i}`))).toEqual([
      expect.any(Date),
      expect.any(Date),
      expect.any(Date),
    ]);
    // What is open is only the question the hosts' identities raise: none is declared yet.
    expect(
      (await h.store.conditions.list({ status: "open" })).map((c) => [c.type, c.subject]).sort(),
    ).toEqual([
      ["IdentityUndeclared", "edge-0"],
      ["IdentityUndeclared", "edge-1"],
      ["IdentityUndeclared", "edge-2"],
    ]);
  }, 120_000);
});
