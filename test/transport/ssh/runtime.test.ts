import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentArtifact } from "../../../src/transport/ssh/artifact.js";
import { connect } from "../../../src/transport/ssh/connection.js";
import { KnownHostsFile } from "../../../src/transport/ssh/hostkeys.js";
import { installAgent } from "../../../src/transport/ssh/install.js";
import { uploadedAgentPath } from "../../../src/transport/ssh/launch.js";
import { generateKeyPair, type KeyPair, type Sshd, startSshd } from "../../helpers/sshd.js";
import { refusalOf, sshNode, startTransport } from "./fixtures.js";

// Hosts whose runtime is wrong for the agent: no node on PATH, or a node that is too old. The
// launcher stops before the agent, so the artifact here is never run.
let clientKey: KeyPair;
let noNode: Sshd;
let oldNode: Sshd;
let plain: Sshd;
let artifactFile: string;

beforeAll(async () => {
  noNode = await startSshd({ authorizedKeys: [], env: { PATH: "/nonexistent" } });
  clientKey = generateKeyPair(noNode.dir, "client");
  writeFileSync(join(noNode.dir, "authorized_keys"), `${clientKey.publicKey}\n`);
  const oldBin = join(noNode.dir, "old-bin");
  mkdirSync(oldBin);
  // A host with Node.js 18 installed: `node --version` is all the launcher asks of it.
  writeFileSync(join(oldBin, "node"), "#!/bin/sh\necho v18.19.1\n");
  chmodSync(join(oldBin, "node"), 0o755);
  oldNode = await startSshd({
    authorizedKeys: [clientKey.publicKey],
    env: { PATH: `${oldBin}:/usr/bin:/bin` },
  });
  plain = await startSshd({ authorizedKeys: [clientKey.publicKey] });
  artifactFile = join(noNode.dir, "steward-agent.mjs");
  const bytes = Buffer.from("#!/usr/bin/env node\n// steward-agent 0.0.0-test\n");
  writeFileSync(artifactFile, bytes);
  writeFileSync(
    `${artifactFile}.sha256`,
    `${createHash("sha256").update(bytes).digest("hex")}  steward-agent.mjs\n`,
  );
});
afterAll(async () => {
  await Promise.all([noNode, oldNode, plain].map((server) => server.stop({ remove: true })));
});

describe("ssh transport - Node.js on the host", () => {
  it("ssh transport - a host without node fails permanently with NoNodeRuntime and says what to do", async () => {
    const { transport, events } = await startTransport(clientKey.privateKeyFile, { agentFile: artifactFile });
    const error = await refusalOf(transport.requestReport(sshNode("bare-1", noNode)));
    expect([error.failureClass, error.reason]).toEqual(["permanent", "NoNodeRuntime"]);
    expect(error.message).toContain('node "bare-1"');
    expect(error.message).toContain("node not found on PATH=/nonexistent");
    expect(error.message).toContain("install Node.js 20 or newer");
    expect(events.of("health").map((e) => [e.health.status, e.health.reason])).toEqual([
      ["degraded", "NoNodeRuntime"],
    ]);
    // Nothing was uploaded to a host that cannot run it.
    expect(existsSync(join(noNode.root, ".steward"))).toBe(false);
    await transport.stop();
  });

  it("ssh transport - a host with Node.js older than 20 fails permanently, naming the version found", async () => {
    const { transport } = await startTransport(clientKey.privateKeyFile, { agentFile: artifactFile });
    const error = await refusalOf(transport.requestReport(sshNode("old-1", oldNode)));
    expect([error.failureClass, error.reason]).toEqual(["permanent", "NoNodeRuntime"]);
    expect(error.message).toContain("node v18.19.1 found at");
    await transport.stop();
  });
});

describe("ssh transport - installing the agent", () => {
  function artifactOf(
    bytes: Buffer,
    sha256 = createHash("sha256").update(bytes).digest("hex"),
  ): AgentArtifact {
    return { file: "x", bytes, sha256, version: "0.0.0-test", id: `0.0.0-test-${sha256.slice(0, 12)}` };
  }

  async function session() {
    return connect(
      { host: plain.host, port: plain.port, user: plain.user, hostKey: plain.hostKey.publicKey },
      undefined,
      {
        credentials: { privateKey: readFileSync(clientKey.privateKeyFile) },
        hostKeys: { knownHosts: new KnownHostsFile("/nonexistent"), trustOnFirstUse: false },
        timeoutMs: 5_000,
        node: "plain-1",
      },
    );
  }

  it("ssh transport - uploads over SFTP, verifies the sha256 on the host and renames into the versioned path", async () => {
    const artifact = artifactOf(Buffer.from(`// steward-agent 0.0.0-test\n${"x".repeat(300_000)}\n`));
    const path = join(plain.root, uploadedAgentPath(artifact.id));
    const connection = await session();
    try {
      await installAgent(connection, artifact, path, "plain-1");
    } finally {
      connection.close();
    }
    expect(readFileSync(path).equals(artifact.bytes)).toBe(true);
    // No temporary upload is left next to it.
    expect(readdirSync(join(path, ".."))).toEqual(["steward-agent.mjs"]);
  });

  it("ssh transport - an upload whose bytes do not match the checksum is removed and never put in place", async () => {
    const artifact = artifactOf(Buffer.from("// steward-agent 0.0.0-test\nbytes\n"), "0".repeat(64));
    const path = join(plain.root, uploadedAgentPath(artifact.id));
    const connection = await session();
    const error = await refusalOf(
      installAgent(connection, artifact, path, "plain-1").finally(() => connection.close()),
    );
    expect([error.failureClass, error.reason]).toEqual(["transient", "AgentChecksumMismatch"]);
    expect(existsSync(path)).toBe(false);
    expect(readdirSync(join(path, ".."))).toEqual([]);
  });
});
