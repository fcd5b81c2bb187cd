import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EnvironmentError, UsageError } from "../../../src/model/errors.js";
import { createSshTransport, SSH_HUB_FLAGS, sshOptionsFromFlags } from "../../../src/transport/ssh/index.js";
import { EventLog, refusalOf, sshNode, withHosts } from "./fixtures.js";

const hosts = withHosts(1);

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("expected an error");
}

describe("ssh transport - options", () => {
  it("ssh transport - a key file that cannot be read is one line naming the flag and the fix", () => {
    const error = thrown(() => createSshTransport({ keyFile: "/nonexistent/id_ed25519" }));
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as Error).message).toBe(
      "--ssh-key /nonexistent/id_ed25519: cannot read it (ENOENT) — give the path of the hub's private key",
    );
  });

  it("ssh transport - an encrypted key file is refused with the ssh-agent way out", () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-key-"));
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "secret", "-f", join(dir, "id")]);
    const error = thrown(() => createSshTransport({ keyFile: join(dir, "id") }));
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as Error).message).toContain("the key is encrypted — load it into ssh-agent");
    writeFileSync(join(dir, "junk"), "not a key\n");
    expect((thrown(() => createSshTransport({ keyFile: join(dir, "junk") })) as Error).message).toContain(
      "not a private key ssh2 can read",
    );
  });

  it("ssh transport - concurrency must be a whole number of at least one", () => {
    for (const concurrency of [0, 1.5, Number.NaN]) {
      const error = thrown(() => createSshTransport({ concurrency }));
      expect(error).toBeInstanceOf(UsageError);
      expect((error as Error).message).toContain("--ssh-concurrency must be a whole number >= 1");
    }
  });

  it("ssh transport - the hub's --ssh-* flags become transport options, paths from the working directory", () => {
    expect(SSH_HUB_FLAGS.map(([flag]) => flag.split(" ")[0])).toEqual([
      "--ssh-key",
      "--ssh-known-hosts",
      "--ssh-concurrency",
      "--ssh-tofu",
    ]);
    const env = { HOME: "/home/hub" };
    expect(
      sshOptionsFromFlags(
        { sshKey: "keys/id", sshKnownHosts: "/etc/steward/known_hosts", sshConcurrency: "32", sshTofu: true },
        "/srv/hub",
        env,
      ),
    ).toEqual({
      env,
      keyFile: "/srv/hub/keys/id",
      knownHostsFile: "/etc/steward/known_hosts",
      concurrency: 32,
      trustOnFirstUse: true,
    });
    expect(sshOptionsFromFlags({}, "/srv/hub", env)).toEqual({ env, trustOnFirstUse: false });
    const error = thrown(() => sshOptionsFromFlags({ sshConcurrency: "many" }, "/", env));
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toBe('--ssh-concurrency must be a whole number >= 1 (got "many")');
  });

  it("ssh transport - without a key file or ssh-agent, dispatching fails permanently with NoCredentials", async () => {
    const transport = createSshTransport({ agentSocket: null });
    await transport.start(new EventLog());
    const error = await refusalOf(transport.requestReport(sshNode("n1", hosts.fleet().servers[0]!)));
    expect([error.failureClass, error.reason]).toEqual(["permanent", "NoCredentials"]);
    expect(error.message).toContain("--ssh-key FILE");
    await transport.stop();
  });

  it("ssh transport - a missing agent build fails permanently with AgentNotBuilt, after the host checked out", async () => {
    const { transport, events } = await hosts.start({ agentFile: "/nonexistent/steward-agent.mjs" });
    const error = await refusalOf(transport.requestReport(sshNode("n1", hosts.fleet().servers[0]!)));
    expect([error.failureClass, error.reason]).toEqual(["permanent", "AgentNotBuilt"]);
    expect(error.message).toContain("npm run build:agent");
    expect(events.of("health").map((e) => e.health.reason)).toEqual(["AgentNotBuilt"]);
    await transport.stop();
  });

  it("ssh transport - a node on transport ssh without spec.ssh fails permanently with NoSshTarget", async () => {
    const { transport } = await hosts.start();
    const node = sshNode("n2", hosts.fleet().servers[0]!);
    delete node.spec.ssh;
    const error = await refusalOf(transport.requestReport(node));
    expect([error.failureClass, error.reason]).toEqual(["permanent", "NoSshTarget"]);
    expect(error.message).toContain('node "n2" uses transport ssh but has no spec.ssh');
    await transport.stop();
  });
});
