/**
 * One bad node must not freeze a fleet-wide rollout: a drained node, a node whose transport the hub
 * does not run and a silent node hold no in-flight slot and count as no failure; the rollout goes on
 * around them, and its progress and commit statuses say which nodes it skipped and why.
 */
import { describe, expect, it } from "vitest";
import { setNodeDraining } from "../../src/hub/operator.js";
import { revisionProgress, statusInputs } from "../../src/hub/progress.js";
import { revisionStatuses } from "../../src/hub/status.js";
import type { Transport, TransportEvents } from "../../src/hub/transport.js";
import type { Bundle, Node, Resource } from "../../src/model/generated.js";
import type { LocalTransport } from "../../src/transport/local.js";
import { assignmentYaml, file, fleetYaml, nodeYaml } from "./helpers/fleet.js";
import { type Harness, startHarness } from "./helpers/harness.js";

const NODES = ["n1", "n2", "n3"];

/** Nodes whose `reload` command is `vars.reload`: a missing executable (a permanent failure) on `broken`. */
function fleet(broken: readonly string[]): Record<string, string> {
  return Object.fromEntries(
    NODES.map((n) => [
      `nodes/${n}.yaml`,
      nodeYaml(n, { vars: { reload: broken.includes(n) ? "/nonexistent/reload" : "/bin/true" } }),
    ]),
  );
}

const web = (content: string, rollout = { maxInFlight: 1, maxFailures: 0 }) =>
  assignmentYaml("web", {
    nodes: NODES,
    resources: [
      file("conf", content),
      { kind: "command", name: "reload", run: ["${node.vars.reload}"] } as Resource,
    ],
    rollout,
  });

/** The local transport, except that one node goes quiet: its attempts are taken and never answered. */
class QuietNode implements Transport {
  readonly name = "local" as const;
  quiet: string | undefined;
  constructor(private readonly inner: LocalTransport) {}
  start(events: TransportEvents): Promise<void> {
    const from = (node: string) => node !== this.quiet;
    return this.inner.start({
      report: (report) => (from(report.node) ? events.report(report) : undefined),
      result: (result) => (from(result.node) ? events.result(result) : undefined),
      heartbeat: (node, at) => (from(node) ? events.heartbeat(node, at) : undefined),
      lost: (id, node, reason) => events.lost(id, node, reason),
      health: (event) => events.health(event),
    });
  }
  async dispatch(bundle: Bundle, node: Node): Promise<void> {
    // Accepted (as a NATS stream would), and never applied: the agent is gone.
    if (node.metadata.name !== this.quiet) await this.inner.dispatch(bundle, node);
  }
  requestReport(node: Node): Promise<void> {
    return node.metadata.name === this.quiet ? Promise.resolve() : this.inner.requestReport(node);
  }
  stop(): Promise<void> {
    return this.inner.stop();
  }
}

const statuses = async (h: Harness) =>
  (await Promise.all(NODES.map((n) => h.intent(`web@${n}`)))).map(
    (i) => `${i.node} ${i.status}${i.holdReason ? ` (${i.holdReason})` : ""}`,
  );
const pauses = (h: Harness) => h.store.conditions.list({ type: "RolloutPaused" });

async function commitStatuses(h: Harness, sha: string) {
  const inputs = (await statusInputs(h.store, sha))!;
  return revisionStatuses(inputs.revision, inputs).map((s) => [s.context, s.state, s.description]);
}

describe("hub - a rollout goes on around skipped nodes", () => {
  it("hub - a failed node that is drained no longer pauses the rollout: the rest start, and the status names it skipped", async () => {
    const h = await startHarness({ files: { ...fleet(["n1"]), "assignments/web.yaml": web("v1") } });
    const { sha } = await h.commit();
    await h.settle();
    expect(await statuses(h)).toEqual(["n1 blocked", "n2 held (paused)", "n3 held (paused)"]);
    const [paused] = await pauses(h);
    // The pause names the instance that caused it, with its attempt.
    expect(paused!.message).toContain(
      `web@n1 blocked (CommandNotFound, attempt ${(await h.intent("web@n1")).lastAttemptId})`,
    );

    await setNodeDraining(h.store, "n1", true, { by: "alice", reason: "broken disk", at: h.clock.now() });
    await h.hub.nudge({ node: "n1" });
    await h.settle();
    expect(await statuses(h)).toEqual(["n1 blocked", "n2 converged", "n3 converged"]);
    expect(await h.store.conditions.get(paused!.id)).toMatchObject({
      status: "resolved",
      resolution:
        "the rollout moves again (web@n2 started): 0 failed instances counted, within maxFailures 0",
    });

    const progress = (await revisionProgress(h.store, sha))!.assignments[0]!;
    expect(progress.skipped).toEqual([{ instance: "web@n1", node: "n1", skip: "drained" }]);
    expect(progress.description).toContain("2/3 nodes at generation 1; skipped n1 (drained)");
    // Blocked stays what it is; the commit status says so, and that the rollout skipped the node.
    expect((await commitStatuses(h, sha))[1]).toEqual([
      "steward/web",
      "failure",
      expect.stringMatching(/^Blocked on n1/),
    ]);
  });

  it("hub - a silent node holds no in-flight slot: once NodeSilent opens the next member starts", async () => {
    let quiet: QuietNode | undefined;
    const h = await startHarness({
      files: {
        ...fleet([]),
        "steward.yaml": fleetYaml({ heartbeat: { interval: "10s", missed: 3 } }),
        "assignments/web.yaml": web("v1"),
      },
      wrap: (local) => {
        quiet = new QuietNode(local);
        return quiet;
      },
    });
    quiet!.quiet = "n1";
    const { sha } = await h.commit();
    await h.settle();
    expect(await statuses(h)).toEqual(["n1 dispatched", "n2 held (batch)", "n3 held (batch)"]);

    // Silence past the window, then no answer to a request for a report: NodeSilent.
    for (let i = 0; i < 5 && (await h.store.conditions.list({ type: "NodeSilent" })).length === 0; i++)
      await h.advance(10_000);
    expect(await h.store.conditions.list({ type: "NodeSilent", status: "open" })).toMatchObject([
      { subject: "n1" },
    ]);
    expect(await statuses(h)).toEqual(["n1 dispatched", "n2 converged", "n3 converged"]);
    expect(await pauses(h)).toEqual([]);
    const [fleetStatus, webStatus] = await commitStatuses(h, sha);
    expect(fleetStatus).toEqual([
      "steward/fleet",
      "pending",
      "2/3 nodes at generation 1; skipped n1 (silent)",
    ]);
    expect(webStatus).toEqual(["steward/web", "pending", "2/3 nodes at generation 1; skipped n1 (silent)"]);
  });

  it("hub - a node whose transport the hub does not run is skipped, not waited for", async () => {
    const files = {
      ...fleet([]),
      "nodes/n3.yaml": nodeYaml("n3", { transport: "nats", vars: { reload: "/bin/true" } }),
    };
    const h = await startHarness({ files: { ...files, "assignments/web.yaml": web("v1") } });
    const { sha } = await h.commit();
    await h.settle();
    expect(await statuses(h)).toEqual(["n1 converged", "n2 converged", "n3 held (transport-disabled)"]);
    expect((await revisionProgress(h.store, sha))!.assignments[0]!.description).toBe(
      "2/3 nodes at generation 1; skipped n3 (transport not run here)",
    );
  });
});
