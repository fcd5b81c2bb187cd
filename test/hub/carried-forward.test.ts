/**
 * A commit that is no longer the newest synced revision keeps no `pending` status: each of its
 * contexts that had not reached a final state ends, naming the commit that carried it forward;
 * the contexts that had keep theirs. (The seed's case: the example's first commit never fully
 * converges — its edge nodes are not reached — and a second commit changing `base` left the first
 * commit's statuses pending for ever.)
 */
import { describe, expect, it } from "vitest";
import { assignmentYaml, file, nodes, nodeYaml } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";
import { notesPublisher } from "./helpers/notes.js";

const base = (content: string) =>
  assignmentYaml("base", { nodes: ["n1", "edge"], resources: [file("motd", content)] });

describe("hub - statuses of a commit carried forward", () => {
  it("hub - a newer commit ends the older one's pending statuses, naming it; a final state stays", async () => {
    const notes = notesPublisher();
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        // A node this hub does not reach: base never converges everywhere.
        "nodes/edge.yaml": nodeYaml("edge", { transport: "nats" }),
        "assignments/base.yaml": base("v1"),
        "assignments/web.yaml": assignmentYaml("web", { nodes: ["n1"], resources: [file("conf", "v1")] }),
      },
      hubOptions: notes.hubOptions,
    });
    const read = async (sha: string) => {
      await h.advance(1_000);
      await notes.publisher().flushNow();
      return Object.fromEntries(
        (await notes.read(sha)).map((s) => [s.context, `${s.state}: ${s.description}`]),
      );
    };
    const first = await h.commit("the fleet");
    await h.settle();
    expect(await read(first.sha)).toEqual({
      "steward/fleet": "pending: 2/3 instances converged; skipped edge (transport not run here)",
      "steward/base": "pending: 1/2 nodes at generation 1; skipped edge (transport not run here)",
      "steward/web": "success: 1/1 node at generation 1, probes passing",
    });

    h.write({ "assignments/base.yaml": base("v2") });
    const second = await h.commit("base v2");
    await h.settle();
    const short = second.sha.slice(0, 12);
    expect(await read(first.sha)).toEqual({
      "steward/fleet": `error: superseded by ${short} before it converged; was 2/3 instances converged; skipped edge (transport not run here)`,
      "steward/base": `error: superseded by ${short} before it converged; was 1/2 nodes at generation 1; skipped edge (transport not run here)`,
      "steward/web": "success: 1/1 node at generation 1, probes passing",
    });
    expect(await read(second.sha)).toEqual({
      "steward/fleet": "pending: 1/2 nodes at generation 2; skipped edge (transport not run here)",
      "steward/base": "pending: 1/2 nodes at generation 2; skipped edge (transport not run here)",
    });
    notes.publisher().close();
  });
});
