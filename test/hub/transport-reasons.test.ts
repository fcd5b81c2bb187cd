/**
 * `TransportDegraded` is kept per reason, and a reason that no longer holds resolves by
 * observation — at hub start and whenever the node's transport changes — instead of staying open
 * beside the current one (the seed's case: `NoCredentials` from an earlier hub run that ran SSH,
 * next to `TransportNotEnabled` from one that does not).
 */
import { describe, expect, it } from "vitest";
import { markOpen } from "../../src/hub/conditions.js";
import { idFactory } from "../../src/hub/ids.js";
import { assignmentYaml, file, nodes, nodeYaml } from "./helpers/fleet.js";
import type { Harness } from "./helpers/harness.js";
import { startHarness } from "./helpers/harness.js";

/** What an earlier hub's transport observed about `node`, as it recorded it. */
async function observedEarlier(h: Harness, node: string, transport: string, reason: string): Promise<void> {
  await h.store.transaction((tx) =>
    markOpen(
      tx,
      {
        type: "TransportDegraded",
        subjectKind: "node",
        subject: node,
        reason,
        message: `${transport}: ${reason} on ${node}`,
        evidence: { transport },
        resolver: "steward",
        node,
      },
      h.clock.now().toISOString(),
      idFactory(h.clock),
    ),
  );
}

const open = async (h: Harness) =>
  (await h.store.conditions.list({ type: "TransportDegraded", status: "open" }))
    .map((c) => `${c.subject} ${c.reason}`)
    .sort();

describe("hub - transport reasons that no longer hold", () => {
  it("hub - at start, a reason an earlier hub observed over a transport this one does not run resolves; TransportNotEnabled says why", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "nodes/edge.yaml": nodeYaml("edge", { transport: "ssh", ssh: { host: "127.0.0.1" } }),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1", "edge"],
          resources: [file("conf", "v1")],
        }),
      },
    });
    await h.commit();
    await h.settle();
    await h.stopHub();
    // The hub before this one ran SSH, without a key.
    await observedEarlier(h, "edge", "ssh", "NoCredentials");
    await h.startHub();
    expect(await open(h)).toEqual(["edge TransportNotEnabled"]);
    const [noCredentials] = await h.store.conditions.list({ type: "TransportDegraded", status: "resolved" });
    expect(noCredentials).toMatchObject({
      reason: "NoCredentials",
      resolution:
        "this hub does not run transport ssh: ssh does not reach node edge now (TransportNotEnabled says why nothing does)",
    });
  });

  it("hub - a node's first report since start over the transport an earlier hub saw fail resolves that failure", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v1")] }),
      },
    });
    await h.commit();
    await h.settle();
    await h.stopHub();
    await observedEarlier(h, "n1", "local", "AgentDisconnected");
    await h.advance(1_000);
    await h.startHub();
    expect(await open(h)).toEqual([]);
    expect((await h.store.conditions.list({ type: "TransportDegraded" }))[0]!.resolution).toMatch(
      /^node n1 reported over local at .*, after this was observed$/,
    );
  });

  it("hub - a node that moves to another transport leaves the old transport's problems behind", async () => {
    const ssh = nodeYaml("n2", { transport: "ssh", ssh: { host: "127.0.0.1" } });
    const h = await startHarness({ files: { ...nodes("n1"), "nodes/n2.yaml": ssh } });
    await h.commit();
    await h.settle();
    await observedEarlier(h, "n2", "ssh", "HostKeyChanged");
    expect(await open(h)).toEqual(["n2 HostKeyChanged", "n2 TransportNotEnabled"]);
    h.write({ "nodes/n2.yaml": nodeYaml("n2") });
    await h.commit("n2 is local now");
    await h.settle();
    expect(await open(h)).toEqual([]);
  });
});
