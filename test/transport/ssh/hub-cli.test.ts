import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { ensureHostIdentity } from "../../../src/agent/identity.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { assignmentYaml, fleetYaml } from "../../hub/helpers/fleet.js";
import { runSteward } from "../../hub/helpers/process.js";
import { sshNode, startSshHub, until, withHosts } from "./fixtures.js";

// The operator's path: `steward hub --ssh-key ...` as a process, syncing a fleet repo whose nodes
// are loopback sshd hosts with pinned keys and no steward installed; on first contact the hub
// collects each host's identity (made there by `steward agent identity`, its state under the SSH
// user's home) and asks for it to be declared.
const hosts = withHosts(2);
afterAll(removeTempDirs);

describe("ssh transport - steward hub", () => {
  it("ssh transport - `steward hub --ssh-key` converges SSH nodes, raises each host's identity as a task, and shows nothing open once Git declares them", async () => {
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
      // On first contact the hub collected each host's identity: none is declared yet, so each is
      // a task with the identity to add.
      const open = async () =>
        JSON.parse((await runSteward(["--state", state, "status", "--json"], { cwd: dir })).stdout)
          .conditions as {
          type: string;
          subject: string;
          reason: string;
          evidence: { observed?: { nkey: string; age: string } };
          procedure?: string;
        }[];
      const identities = await Promise.all(
        servers.map(
          async (server) => (await ensureHostIdentity(join(server.root, ".local/state/steward"))).identity,
        ),
      );
      const undeclared = await until(async () => {
        const conditions = (await open()).filter((c) => c.type === "IdentityUndeclared");
        return conditions.length === 2 ? conditions : undefined;
      }, "an IdentityUndeclared task per host");
      for (const [i, identity] of identities.entries()) {
        const condition = undeclared.find((c) => c.subject === `edge-${i}`)!;
        expect(condition).toMatchObject({ reason: "IdentityCollected", evidence: { observed: identity } });
        expect(condition.procedure).toContain(
          `identity:\n    nkey: ${identity.nkey}\n    age: ${identity.age}`,
        );
      }
      const tasks = await runSteward(["--state", state, "tasks"], { cwd: dir });
      expect(tasks.stdout).toMatch(/IdentityUndeclared\s+node edge-0\s+open/);
      // The operator pastes them; edge-1 by mistake gets edge-0's: a conflict a person decides.
      const declare = (i: number, identity: { nkey: string; age: string }) => {
        const node = sshNode(`edge-${i}`, servers[i]!);
        node.metadata.labels = { env: "edge" };
        node.spec.identity = identity;
        return stringify(node);
      };
      repo.commit("identities", {
        "nodes/edge-0.yaml": declare(0, identities[0]!),
        "nodes/edge-1.yaml": declare(1, identities[0]!),
      });
      const conflict = await until(async () => {
        const conditions = await open();
        return conditions.some((c) => c.subject === "edge-0") ? undefined : conditions;
      }, "edge-0's identity declared");
      expect(conflict.map((c) => [c.type, c.subject, c.reason])).toEqual([
        ["IdentityConflict", "edge-1", "HostIdentityDiffers"],
      ]);
      repo.commit("edge-1's own identity", { "nodes/edge-1.yaml": declare(1, identities[1]!) });
      const status = await until(
        async () => {
          const run = await runSteward(["--state", state, "status", "--json"], { cwd: dir });
          return run.code === 0 ? run : undefined;
        },
        "steward status to report nothing open",
        60_000,
      );
      expect(JSON.parse(status.stdout)).toMatchObject({ conditions: [] });
      // The private keys stayed on the hosts.
      for (const server of servers)
        for (const file of ["nkey.seed", "age.key"]) {
          const secret = readFileSync(
            join(server.root, ".local/state/steward/identity", file),
            "utf8",
          ).trim();
          expect(log()).not.toContain(secret);
          expect(status.stdout).not.toContain(secret);
        }
    } finally {
      await stop();
    }
    expect(readFileSync(join(dir, "hub.log"), "utf8")).toContain("steward hub: serving");
  }, 120_000);
});
