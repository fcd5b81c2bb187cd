import { describe, expect, it } from "vitest";
import { DispatchError } from "../../../src/hub/transport.js";
import type { SshProgress } from "../../../src/transport/ssh/index.js";
import { refusalOf, sshNode, testBundle, until, withHosts } from "./fixtures.js";

// Twenty hosts, one of them dead: its sshd is stopped (SIGSTOP), so the kernel still accepts the TCP
// connection but nothing ever answers — the worst kind of dead, which only a timeout ends.
const hosts = withHosts(20);

describe("ssh transport - fan-out", () => {
  it("ssh transport - one dead host among twenty does not delay the others", async () => {
    const dead = hosts.fleet().servers[7]!;
    const deadPid = dead.pid;
    process.kill(deadPid, "SIGSTOP");
    try {
      const progress: SshProgress[] = [];
      const { transport, events } = await hosts.start({
        concurrency: 4,
        // Far longer than the live hosts need: they must all finish while the dead one still waits.
        connectTimeoutMs: 10 * 60_000,
        stopGraceMs: 0,
        onProgress: (p) => progress.push(p),
      });
      const nodes = hosts.fleet().servers.map((server, i) => sshNode(`host-${i}`, server));
      const settled: string[] = [];
      const dispatches = nodes.map((node) => {
        const root = node.spec.roots[0]!;
        const bundle = testBundle(node, {
          generation: 1,
          resources: [{ kind: "file", path: `${root}/motd`, content: `hello ${node.metadata.name}\n` }],
        });
        return transport
          .dispatch(bundle, node)
          .then(
            () => "accepted",
            (error: unknown) => error,
          )
          .finally(() => settled.push(node.metadata.name));
      });
      // All nineteen live hosts converge while the dead one holds its slot.
      for (const [i, node] of nodes.entries())
        if (i !== 7) await events.waitFor("report", (e) => e.report.node === node.metadata.name, 120_000);
      expect(events.of("result").filter((e) => e.result.outcome === "succeeded")).toHaveLength(19);
      await until(
        () => (progress.filter((p) => p.outcome === "answered").length === 19 ? true : undefined),
        "progress of 19 hosts",
      );
      expect(settled).not.toContain("host-7");
      expect(progress.find((p) => p.node === "host-7")).toBeUndefined();

      // Stopping gives up on the dead host: nothing ran there, so it is a plain transient refusal.
      await transport.stop();
      const refused = (await dispatches[7]) as DispatchError;
      expect(refused).toBeInstanceOf(DispatchError);
      expect([refused.failureClass, refused.reason]).toEqual(["transient", "TransportStopped"]);
      expect((await Promise.all(dispatches)).filter((o) => o === "accepted")).toHaveLength(19);
      expect(events.of("lost")).toEqual([]);
    } finally {
      process.kill(deadPid, "SIGCONT");
    }
  }, 90_000);

  it("ssh transport - a host that accepts TCP but never answers is a transient ConnectTimeout at the per-host timeout", async () => {
    const dead = hosts.fleet().servers[3]!;
    process.kill(dead.pid, "SIGSTOP");
    try {
      const { transport } = await hosts.start({ hostTimeoutMs: 500 });
      const error = await refusalOf(transport.requestReport(sshNode("host-3", dead)));
      expect([error.failureClass, error.reason]).toEqual(["transient", "ConnectTimeout"]);
      await transport.stop();
    } finally {
      process.kill(dead.pid, "SIGCONT");
    }
  });
});
