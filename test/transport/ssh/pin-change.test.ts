/**
 * A host key that is no longer pinned is never trusted for another job. The seed's case: a Node's
 * `spec.ssh.hostKey` changed in Git to a wrong key, and the hub still converged the next generation
 * over SSH before it refused the key (at the generation after): the revision had been synced by
 * `steward sync`, the running hub took its generations in at its next look (a nudge, or its own
 * sync finding nothing new), and dispatched them with the Node document of the revision before,
 * whose declarations it had not recorded.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import { makeRepo, removeTempDirs, tempDir } from "../../helpers/git.js";
import { generateKeyPair } from "../../helpers/sshd.js";
import { assignmentYaml, fleetYaml } from "../../hub/helpers/fleet.js";
import { runSteward } from "../../hub/helpers/process.js";
import { refusalOf, sshNode, startSshHub, until, withHosts } from "./fixtures.js";

const hosts = withHosts(1);
afterAll(removeTempDirs);

function fleetFiles(release: string, hostKey?: string): Record<string, string> {
  const server = hosts.fleet().servers[0]!;
  return {
    "steward.yaml": fleetYaml({ mode: "apply" }),
    "assignments/motd.yaml": assignmentYaml("motd", {
      nodes: ["edge-0"],
      resources: [
        { kind: "directory", path: `\${node.vars.root}/etc` },
        { kind: "file", path: `\${node.vars.root}/etc/motd`, content: `${release}\n` },
      ],
    }),
    "nodes/edge-0.yaml": stringify(sshNode("edge-0", server, hostKey ? { hostKey } : {})),
  };
}

describe("ssh transport - a pin changed in Git", () => {
  it("ssh transport - a Node whose pinned key changed to a wrong one is refused at its very next generation, synced by `steward sync`", async () => {
    const repo = makeRepo();
    repo.commit("release 1", fleetFiles("release 1"));
    // The hub never fetches on its own here: the revision reaches it only through `steward sync`.
    const {
      state,
      dir,
      log: fullLog,
      stop,
    } = await startSshHub({
      repo: repo.dir,
      clientKeyFile: hosts.fleet().clientKey.privateKeyFile,
      syncInterval: "1h",
    });
    const log = () => fullLog().slice(-4000);
    const motd = join(hosts.fleet().servers[0]!.root, "managed", "etc", "motd");
    const read = () => (existsSync(motd) ? readFileSync(motd, "utf8") : undefined);
    const intent = async () => {
      const store = new SqliteStore(join(state, "hub.db"));
      try {
        const desired = await store.desired.instance("motd@edge-0");
        return desired ? await store.intents.get("motd@edge-0", desired.generation) : undefined;
      } finally {
        await store.close();
      }
    };
    try {
      await until(() => (read() === "release 1\n" ? true : undefined), "release 1", 60_000).catch(
        (error: Error) => {
          throw new Error(`${error.message}; the hub's log:\n${log()}`);
        },
      );

      const wrong = generateKeyPair(tempDir("steward-wrong-key-"), "wrong").publicKey;
      repo.commit("release 2, pinned to the wrong key", fleetFiles("release 2", wrong));
      const sync = await runSteward(["--state", state, "sync", "--repo", repo.dir], { cwd: dir });
      expect(sync.code).toBe(0);
      // What the CLI does after it writes to the hub's database: the running hub looks again.
      const { url } = JSON.parse(readFileSync(join(state, "hub.json"), "utf8")) as { url: string };
      await fetch(`${url}/nudge`, { method: "POST", body: "{}" });
      const refused = await until(
        async () => {
          const current = await intent();
          return current?.generation === 2 && current.status === "blocked" ? current : undefined;
        },
        "generation 2 refused",
        60_000,
      ).catch(async (error: Error) => {
        throw new Error(
          `${error.message} (intent: ${JSON.stringify(await intent())}); the hub's log:\n${log()}`,
        );
      });
      expect(refused.reason).toBe("HostKeyChanged");
      expect(readFileSync(motd, "utf8")).toBe("release 1\n");
    } finally {
      await stop();
    }
  }, 150_000);

  it("ssh transport - a kept connection is not reused once the key it was trusted with is no longer held", async () => {
    const server = hosts.fleet().servers[0]!;
    const knownHosts = join(tempDir("steward-known-"), "known_hosts");
    writeFileSync(knownHosts, `${server.knownHostsLine}\n`);
    const { transport, events } = await hosts.start({ knownHostsFile: knownHosts, idleMs: 60_000 });
    const node = sshNode("kept-0", server, { pin: false });
    try {
      await transport.requestReport(node);
      expect(events.of("report")).toHaveLength(1);
      // The operator replaces the host's entry: the key the open connection was trusted with is gone.
      const other = generateKeyPair(tempDir("steward-other-key-"), "other").publicKey;
      writeFileSync(knownHosts, `[${server.host}]:${server.port} ${other}\n`);
      const refused = await refusalOf(transport.requestReport(node));
      expect([refused.failureClass, refused.reason]).toEqual(["permanent", "HostKeyChanged"]);
      expect(events.of("report")).toHaveLength(1);
    } finally {
      await transport.stop();
    }
  });
});
