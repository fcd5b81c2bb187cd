import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "../../../src/transport/ssh/connection.js";
import { KnownHostsFile } from "../../../src/transport/ssh/hostkeys.js";
import { endpointsOf } from "../../../src/transport/ssh/transport.js";
import { generateKeyPair, type KeyPair, type Sshd, startSshd } from "../../helpers/sshd.js";
import { refusalOf, sshNode, startTransport, testAgentFile, testBundle } from "./fixtures.js";

// Two servers: a bastion, and a host the hub reaches only through it (ProxyJump-style).
let dir: string;
let clientKey: KeyPair;
let bastion: Sshd;
let target: Sshd;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "steward-jump-"));
  clientKey = generateKeyPair(dir, "client");
  // The bastion logs forwarding requests at DEBUG1: that is how the test sees the hop was taken.
  bastion = await startSshd({
    authorizedKeys: [clientKey.publicKey],
    dir: join(dir, "bastion"),
    config: ["LogLevel DEBUG1"],
  });
  target = await startSshd({ authorizedKeys: [clientKey.publicKey], dir: join(dir, "target") });
});
afterAll(async () => {
  await Promise.all([bastion.stop(), target.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

function options() {
  return {
    credentials: { privateKey: readFileSync(clientKey.privateKeyFile) },
    hostKeys: { knownHosts: new KnownHostsFile("/nonexistent"), trustOnFirstUse: false },
    timeoutMs: 5_000,
    node: "behind-1",
  };
}

describe("ssh transport - jump host", () => {
  it("ssh transport - reaches a host through a bastion, checking both hosts' pinned keys", async () => {
    const node = sshNode("behind-1", target, {
      jump: {
        host: bastion.host,
        port: bastion.port,
        user: bastion.user,
        hostKey: bastion.hostKey.publicKey,
      },
    });
    const { target: end, jump } = endpointsOf(node);
    const connection = await connect(end, jump, options());
    const run = await connection.exec('echo "$HOME"');
    connection.close();
    // The command ran on the target (its own root), not on the bastion.
    expect(run.stdout.toString().trim()).toBe(target.root);
    expect(connection.label).toBe(
      `${target.user}@127.0.0.1:${target.port} via jump host ${bastion.user}@127.0.0.1:${bastion.port}`,
    );
    expect(bastion.log()).toMatch(
      new RegExp(`direct_tcpip: originator .* target 127\\.0\\.0\\.1 port ${target.port}`),
    );
  });

  it("ssh transport - refuses a bastion whose key differs from spec.ssh.jump.hostKey", async () => {
    const node = sshNode("behind-1", target, {
      jump: { host: bastion.host, port: bastion.port, hostKey: target.hostKey.publicKey },
    });
    const { target: end, jump } = endpointsOf(node);
    const error = await refusalOf(connect(end, jump, options()));
    expect(error.reason).toBe("HostKeyChanged");
    expect(error.message).toContain("jump host");
    expect(error.message).toContain("spec.ssh.jump.hostKey");
  });

  it("ssh transport - a target the bastion cannot reach is a transient failure naming both", async () => {
    const node = sshNode("behind-1", target, {
      jump: { host: bastion.host, port: bastion.port, hostKey: bastion.hostKey.publicKey },
    });
    const { target: end, jump } = endpointsOf(node);
    const error = await refusalOf(connect({ ...end, port: 1 }, jump, options()));
    expect([error.failureClass, error.reason]).toEqual(["transient", "JumpForwardFailed"]);
    expect(error.message).toContain("could not reach 127.0.0.1:1");
  });

  it("ssh transport - applies a bundle on a host behind the bastion, uploading the agent through the hop", async () => {
    const { transport, events } = await startTransport(clientKey.privateKeyFile, {
      agentFile: testAgentFile(),
    });
    const node = sshNode("behind-1", target, {
      jump: { host: bastion.host, port: bastion.port, hostKey: bastion.hostKey.publicKey },
    });
    const root = node.spec.roots[0]!;
    const bundle = testBundle(node, {
      generation: 1,
      resources: [{ kind: "file", path: `${root}/behind.conf`, content: "reached through the bastion\n" }],
    });
    await transport.dispatch(bundle, node);
    const result = await events.waitFor("result");
    expect(result.result).toMatchObject({ attemptId: bundle.attemptId, outcome: "succeeded" });
    expect(readFileSync(`${root}/behind.conf`, "utf8")).toBe("reached through the bastion\n");
    // The agent went to the target's home, not the bastion's.
    expect(existsSync(join(target.root, ".steward/bin"))).toBe(true);
    expect(existsSync(join(bastion.root, ".steward"))).toBe(false);
    await transport.stop();
  });
});
