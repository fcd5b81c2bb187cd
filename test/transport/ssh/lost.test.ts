import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { Report } from "../../../src/model/generated.js";
import { sshNode, testBundle, until, withHosts } from "./fixtures.js";

// The session drops while the agent runs a one-shot command. The hub hears `lost` (ambiguous), asks
// the host for a report instead of re-running, and a later attempt for the same generation does not
// run the command again.
const hosts = withHosts(1);

describe("ssh transport - session lost mid-run", () => {
  it("ssh transport - a session killed while the agent runs is lost, and the next call settles from a report without re-running", async () => {
    const server = hosts.fleet().servers[0]!;
    const { transport, events } = await hosts.start();
    const node = sshNode("batch-1", server);
    const root = node.spec.roots[0]!;
    const counter = `${root}/ran`;
    const resources = [
      { kind: "directory" as const, path: root },
      {
        kind: "command" as const,
        name: "migrate",
        // A one-shot action: each run appends a line; it takes long enough to cut the session under it.
        run: ["sh", "-c", `echo ran >> ${counter}; sleep 2`],
      },
    ];
    const first = testBundle(node, { assignment: "migrate", generation: 1, resources });

    // Warm up: the agent is uploaded by an observation first, so the cut below hits the agent itself.
    await transport.requestReport(node);
    await transport.dispatch(first, node);
    await until(() => (existsSync(counter) ? true : undefined), "the command to start");
    for (const pid of server.sessionPids()) process.kill(pid, "SIGKILL");

    const lost = await events.waitFor("lost");
    expect(lost).toMatchObject({ attemptId: first.attemptId, node: "batch-1" });
    expect(lost.reason).toContain("session dropped while the agent ran");
    expect(events.of("result")).toEqual([]);

    // The hub's next step: a fresh report. The agent finished on the host after the session died.
    const settled = await until(async () => {
      await transport.requestReport(node);
      const report = events.of("report").at(-1)?.report as Report | undefined;
      const instance = report?.instances.find((i) => i.assignment === "migrate");
      return instance?.generation === 1 ? instance : undefined;
    }, "a report showing generation 1 applied");
    expect(settled.converged).toBe(true);
    expect(readFileSync(counter, "utf8")).toBe("ran\n");

    // A new attempt for the same generation: the agent knows the command already ran.
    const second = testBundle(node, { assignment: "migrate", generation: 1, resources });
    await transport.dispatch(second, node);
    const result = await events.waitFor("result", (e) => e.result.attemptId === second.attemptId);
    expect(result.result.outcome).toBe("succeeded");
    expect(readFileSync(counter, "utf8")).toBe("ran\n");
    await transport.stop();
  });

  it("ssh transport - an agent killed mid-run is lost (AgentKilled), never a result", async () => {
    const server = hosts.fleet().servers[0]!;
    const { transport, events } = await hosts.start();
    const node = sshNode("batch-1", server);
    const root = node.spec.roots[0]!;
    const marker = `${root}/slow-started`;
    const bundle = testBundle(node, {
      assignment: "slow",
      generation: 1,
      resources: [
        { kind: "directory", path: root },
        // Its parent is the one-shot wrapper; the wrapper's parent (field 4 of its stat) is the agent.
        {
          kind: "command",
          name: "slow",
          run: ["sh", "-c", `awk '{print $4}' /proc/$PPID/stat > ${marker}; sleep 5`],
        },
      ],
    });
    await transport.dispatch(bundle, node);
    // Kill the agent process, as an OOM killer or an operator would.
    const agentPid = Number(
      await until(
        () => (existsSync(marker) ? readFileSync(marker, "utf8").trim() || undefined : undefined),
        "the command",
      ),
    );
    process.kill(agentPid, "SIGKILL");
    const lost = await events.waitFor("lost");
    expect(lost.attemptId).toBe(bundle.attemptId);
    expect(lost.reason).toContain("the agent was killed (SIGKILL)");
    expect(events.of("result")).toEqual([]);
    await transport.stop();
  });
});
