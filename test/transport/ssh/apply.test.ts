import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadAgentArtifact, ObservationScheduler } from "../../../src/transport/ssh/index.js";
import { uploadedAgentPath } from "../../../src/transport/ssh/launch.js";
import { sshNode, testAgentFile, testBundle, withHosts } from "./fixtures.js";

// A host with sshd and Node.js but no steward: the transport uploads the single-file agent, then every
// attempt and observation runs it one shot.
const hosts = withHosts(1);

describe("ssh transport - apply and report", () => {
  it("ssh transport - uploads the agent to a host without steward, applies the bundle and delivers result and report", async () => {
    const server = hosts.fleet().servers[0]!;
    const { transport, events } = await hosts.start();
    const node = sshNode("web-1", server);
    const root = node.spec.roots[0]!;
    const bundle = testBundle(node, {
      generation: 1,
      resources: [{ kind: "file", path: `${root}/etc/app.conf`, content: "listen 8080\n" }],
    });

    await transport.dispatch(bundle, node);
    const result = await events.waitFor("result");
    expect(result.result).toMatchObject({
      attemptId: bundle.attemptId,
      node: "web-1",
      generation: 1,
      outcome: "succeeded",
    });
    const report = await events.waitFor("report");
    expect(report.report.node).toBe("web-1");
    expect(report.report.instances).toEqual([
      expect.objectContaining({ assignment: "app", generation: 1, converged: true }),
    ]);
    // The file is really there, on the host's own root.
    expect(readFileSync(`${root}/etc/app.conf`, "utf8")).toBe("listen 8080\n");
    // Result, then report, then the heartbeat the reply counts as.
    await events.waitFor("heartbeat");
    expect(events.events.map((e) => e.type)).toEqual(["result", "report", "heartbeat"]);
    expect(transport.lastObserved("web-1")).toBeInstanceOf(Date);

    // The agent sits at its versioned path with the bytes the hub built (checked on the host by sha256).
    const artifact = loadAgentArtifact(testAgentFile());
    const uploaded = readFileSync(join(server.root, uploadedAgentPath(artifact.id)));
    expect(createHash("sha256").update(uploaded).digest("hex")).toBe(artifact.sha256);
    expect(readdirSync(join(server.root, ".steward/bin", artifact.id))).toEqual(["steward-agent.mjs"]);
    await transport.stop();
  });

  it("ssh transport - reuses the uploaded agent and observes without changing anything", async () => {
    const server = hosts.fleet().servers[0]!;
    const { transport, events } = await hosts.start();
    const node = sshNode("web-1", server);
    const sftpBefore = server.log().split("subsystem request for sftp").length;
    const scheduler = new ObservationScheduler({ transport, nodes: () => [node], intervalMs: 60_000 });
    await scheduler.round();
    await scheduler.stop();
    const report = await events.waitFor("report");
    expect(report.report.instances).toEqual([
      expect.objectContaining({ assignment: "app", generation: 1, converged: true }),
    ]);
    expect(scheduler.lastObserved("web-1")).toBeInstanceOf(Date);
    expect(events.of("heartbeat").map((e) => e.node)).toEqual(["web-1"]);
    // No second upload: the host already had this version of the agent.
    expect(server.log().split("subsystem request for sftp").length).toBe(sftpBefore);
    await transport.stop();
  });

  it("ssh transport - a failed attempt's reply is delivered with the result's own failure class", async () => {
    const server = hosts.fleet().servers[0]!;
    const { transport, events } = await hosts.start();
    const node = sshNode("web-1", server);
    const bundle = testBundle(node, {
      assignment: "job",
      generation: 1,
      resources: [{ kind: "command", name: "fails", run: ["sh", "-c", "echo nope >&2; exit 3"] }],
    });
    await transport.dispatch(bundle, node);
    const result = await events.waitFor("result");
    expect(result.result).toMatchObject({ attemptId: bundle.attemptId, outcome: "failed" });
    expect(result.result.failureClass).toBeDefined();
    expect(events.of("lost")).toEqual([]);
    await transport.stop();
  });

  it("ssh transport - a bundle the agent refuses outright becomes a permanent failed result, not a loss", async () => {
    const server = hosts.fleet().servers[0]!;
    const { transport, events } = await hosts.start();
    const node = sshNode("web-1", server);
    // Rendered for another node: the agent on web-1 must not apply it.
    const bundle = testBundle(sshNode("web-2", server), { generation: 1, resources: [] });
    await transport.dispatch(bundle, node);
    const result = await events.waitFor("result");
    expect(result.result).toMatchObject({
      attemptId: bundle.attemptId,
      outcome: "failed",
      failureClass: "permanent",
      reason: "BundleRefused",
    });
    expect(result.result.message).toContain('bundle is for node "web-2" but this agent is node "web-1"');
    expect(events.of("lost")).toEqual([]);
    await transport.stop();
  });

  it("ssh transport - keeps a node's connection for the next job, and reconnects once when it died idle", async () => {
    const server = hosts.fleet().servers[0]!;
    const { transport, events } = await hosts.start();
    const node = sshNode("web-1", server);
    const logins = () => server.log().split("Accepted publickey").length - 1;
    const before = logins();
    await transport.requestReport(node);
    await transport.requestReport(node);
    expect(logins() - before).toBe(1);
    // The kept connection dies while idle (host rebooted, NAT forgot it): the next job still works.
    for (const pid of server.sessionPids()) process.kill(pid, "SIGKILL");
    await transport.requestReport(node);
    expect(logins() - before).toBe(2);
    expect(events.of("report")).toHaveLength(3);
    expect(events.of("health")).toEqual([]);
    await transport.stop();
  });
});
