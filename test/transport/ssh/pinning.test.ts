import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type SshEndpoint } from "../../../src/transport/ssh/connection.js";
import { KnownHostsFile } from "../../../src/transport/ssh/hostkeys.js";
import { createSshTransport } from "../../../src/transport/ssh/index.js";
import { generateKeyPair, type KeyPair, type Sshd, startSshd } from "../../helpers/sshd.js";
import { EventLog, refusalOf, sshNode, startTransport } from "./fixtures.js";

let server: Sshd;
let clientKey: KeyPair;
let otherKey: KeyPair;

beforeAll(async () => {
  server = await startSshd({ authorizedKeys: [] });
  clientKey = generateKeyPair(server.dir, "client");
  otherKey = generateKeyPair(server.dir, "other");
  writeFileSync(join(server.dir, "authorized_keys"), `${clientKey.publicKey}\n`);
});
afterAll(() => server.stop({ remove: true }));

function endpoint(hostKey?: string): SshEndpoint {
  return { host: server.host, port: server.port, user: server.user, ...(hostKey ? { hostKey } : {}) };
}

function connectWith(options: { hostKey?: string; knownHosts?: string; tofu?: boolean; key?: KeyPair }) {
  const knownHosts = new KnownHostsFile(options.knownHosts ?? join(server.dir, "no_known_hosts"));
  return connect(endpoint(options.hostKey), undefined, {
    credentials: { privateKey: readFileSync((options.key ?? clientKey).privateKeyFile) },
    hostKeys: { knownHosts, trustOnFirstUse: options.tofu ?? false },
    timeoutMs: 5_000,
    node: "n1",
  });
}

describe("ssh transport - pinned host keys", () => {
  it("ssh transport - connects when the host presents the key pinned in spec.ssh.hostKey", async () => {
    const connection = await connectWith({ hostKey: server.hostKey.publicKey });
    const run = await connection.exec("echo pinned-ok");
    connection.close();
    expect(run.stdout.toString().trim()).toBe("pinned-ok");
    expect(run.code).toBe(0);
  });

  it("ssh transport - asks a host with several keys for the pinned type (an RSA pin beside an ed25519 key)", async () => {
    const rsa = generateKeyPair(server.dir, "host_rsa", "rsa");
    const both = await startSshd({
      authorizedKeys: [clientKey.publicKey],
      config: [`HostKey ${rsa.privateKeyFile}`],
    });
    try {
      const connection = await connect(
        { host: both.host, port: both.port, user: both.user, hostKey: rsa.publicKey },
        undefined,
        {
          credentials: { privateKey: readFileSync(clientKey.privateKeyFile) },
          hostKeys: { knownHosts: new KnownHostsFile("/nonexistent"), trustOnFirstUse: false },
          timeoutMs: 5_000,
          node: "n1",
        },
      );
      const run = await connection.exec("echo rsa-ok");
      connection.close();
      expect(run.stdout.toString().trim()).toBe("rsa-ok");
    } finally {
      await both.stop({ remove: true });
    }
  });

  it("ssh transport - connects when known_hosts lists the host's key", async () => {
    const file = join(server.dir, "known_hosts_good");
    writeFileSync(file, `# fleet keys\n${server.knownHostsLine}\n`);
    const connection = await connectWith({ knownHosts: file });
    const run = await connection.exec("echo listed-ok");
    connection.close();
    expect(run.stdout.toString().trim()).toBe("listed-ok");
  });

  it("ssh transport - refuses a changed host key permanently, with a degraded HostKeyChanged event", async () => {
    const { transport, events } = await startTransport(clientKey.privateKeyFile);
    const node = sshNode("changed-1", server, { hostKey: otherKey.publicKey });
    const logBefore = server.log().length;
    const error = await refusalOf(transport.requestReport(node));
    expect(error.failureClass).toBe("permanent");
    expect(error.reason).toBe("HostKeyChanged");
    expect(error.message).toContain('node "changed-1"');
    expect(error.message).toContain("refusing to connect");
    expect(events.of("health")).toEqual([
      {
        type: "health",
        health: { status: "degraded", node: "changed-1", reason: "HostKeyChanged", message: error.message },
      },
    ]);
    // Nothing reached the host: sshd never saw our key.
    expect(server.log().slice(logBefore)).not.toContain("Accepted publickey");
    await transport.stop();
  });

  it("ssh transport - refuses a key that differs from the known_hosts entry", async () => {
    const file = join(server.dir, "known_hosts_stale");
    writeFileSync(file, `[${server.host}]:${server.port} ${otherKey.publicKey}\n`);
    const error = await refusalOf(connectWith({ knownHosts: file }));
    expect([error.failureClass, error.reason]).toEqual(["permanent", "HostKeyChanged"]);
    expect(error.message).toContain(file);
  });

  it("ssh transport - refuses an unknown host permanently, naming the key and how to trust it", async () => {
    const events = new EventLog();
    const knownHostsFile = join(server.dir, "known_hosts_empty");
    const transport = createSshTransport({
      keyFile: clientKey.privateKeyFile,
      agentSocket: null,
      knownHostsFile,
    });
    await transport.start(events);
    const node = sshNode("unknown-1", server, { pin: false });
    const error = await refusalOf(
      transport.dispatch(
        {
          apiVersion: "steward.dev/v1",
          kind: "Bundle",
          attemptId: "01JUNKNOWNHOST0000000000000",
          generation: 1,
          hash: "sha256:x",
          spec: {
            assignment: "a",
            node: "unknown-1",
            state: "running",
            dependsOn: [],
            roots: [],
            resources: [],
            probes: [],
          },
          issuedAt: new Date().toISOString(),
        },
        node,
      ),
    );
    expect([error.failureClass, error.reason]).toEqual(["permanent", "HostKeyUnknown"]);
    expect(error.message).toContain(server.hostKey.publicKey);
    expect(error.message).toContain("--ssh-tofu");
    expect(events.of("health").map((e) => e.health.reason)).toEqual(["HostKeyUnknown"]);
    expect(events.of("lost")).toEqual([]);
    await transport.stop();
  });

  it("ssh transport - trusts on first use only when enabled, and records the key it trusted", async () => {
    const file = join(server.dir, "known_hosts_tofu");
    const connection = await connectWith({ knownHosts: file, tofu: true });
    connection.close();
    const recorded = readFileSync(file, "utf8");
    expect(recorded).toContain(`${server.knownHostsLine} steward-tofu node=n1`);
    // From now on the key is pinned: a host presenting another key is refused even with TOFU on.
    const impostor = await startSshd({ authorizedKeys: [clientKey.publicKey], port: undefined });
    try {
      writeFileSync(file, recorded.replace(`]:${server.port} `, `]:${impostor.port} `));
      const error = await refusalOf(
        connect({ host: impostor.host, port: impostor.port, user: impostor.user }, undefined, {
          credentials: { privateKey: readFileSync(clientKey.privateKeyFile) },
          hostKeys: { knownHosts: new KnownHostsFile(file), trustOnFirstUse: true },
          timeoutMs: 5_000,
          node: "n1",
        }),
      );
      expect(error.reason).toBe("HostKeyChanged");
    } finally {
      await impostor.stop({ remove: true });
    }
  });
});

describe("ssh transport - trust on first use through the transport", () => {
  it("ssh transport - --ssh-tofu records the key in the known_hosts file and warns in the log", async () => {
    const file = join(server.dir, "known_hosts_transport_tofu");
    const warnings: [Record<string, unknown>, string][] = [];
    const { transport } = await startTransport(clientKey.privateKeyFile, {
      knownHostsFile: file,
      trustOnFirstUse: true,
      // No agent build here: the run stops right after the connection, which is all this test needs.
      agentFile: "/nonexistent/steward-agent.mjs",
      logger: { info: () => {}, warn: (fields, message) => warnings.push([fields, message]) },
    });
    const error = await refusalOf(transport.requestReport(sshNode("tofu-1", server, { pin: false })));
    expect(error.reason).toBe("AgentNotBuilt");
    expect(readFileSync(file, "utf8")).toContain(`${server.knownHostsLine} steward-tofu node=tofu-1`);
    expect(warnings[0]).toEqual([
      expect.objectContaining({ node: "tofu-1", port: server.port, file }),
      "trusted an unknown host key on first use (--ssh-tofu) and recorded it",
    ]);
    await transport.stop();
  });
});

describe("ssh transport - client authentication", () => {
  it("ssh transport - a client key the host does not authorise is refused permanently (AuthFailed)", async () => {
    const error = await refusalOf(connectWith({ hostKey: server.hostKey.publicKey, key: otherKey }));
    expect([error.failureClass, error.reason]).toEqual(["permanent", "AuthFailed"]);
    expect(error.message).toContain(`user "${server.user}"`);
  });

  it("ssh transport - a closed port is a transient ConnectionRefused", async () => {
    const closed = await startSshd({ authorizedKeys: [] });
    const port = closed.port;
    await closed.stop({ remove: true });
    const error = await refusalOf(
      connect({ host: "127.0.0.1", port, user: "root" }, undefined, {
        credentials: { privateKey: readFileSync(clientKey.privateKeyFile) },
        hostKeys: { knownHosts: new KnownHostsFile("/nonexistent"), trustOnFirstUse: false },
        timeoutMs: 5_000,
        node: "n1",
      }),
    );
    expect([error.failureClass, error.reason]).toEqual(["transient", "ConnectionRefused"]);
  });

  it("ssh transport - authenticates with a key held by ssh-agent (SSH_AUTH_SOCK)", async () => {
    const { spawn, execFileSync } = await import("node:child_process");
    const socket = join(server.dir, "agent.sock");
    const agent = spawn("ssh-agent", ["-D", "-a", socket], { stdio: "ignore" });
    try {
      for (let i = 0; i < 50; i++) {
        try {
          execFileSync("ssh-add", [clientKey.privateKeyFile], {
            env: { SSH_AUTH_SOCK: socket },
            stdio: "pipe",
          });
          break;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      const events = new EventLog();
      const transport = createSshTransport({ env: { SSH_AUTH_SOCK: socket, HOME: server.dir } });
      await transport.start(events);
      // The launcher runs (so authentication worked); this node's steward command is missing on purpose.
      const error = await refusalOf(
        transport.requestReport(sshNode("agent-1", server, { steward: "steward-not-installed" })),
      );
      expect(error.reason).toBe("StewardNotFound");
      expect(error.message).toContain("steward-not-installed");
      await transport.stop();
    } finally {
      agent.kill();
    }
  });
});
