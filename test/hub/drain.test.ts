import { describe, expect, it } from "vitest";
import { setNodeDraining } from "../../src/hub/operator.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const app = (content: string) =>
  assignmentYaml("app", { nodes: ["n1", "n2"], resources: [file("conf", content)] });

describe("hub - drain", () => {
  it("hub - a draining node gets no new dispatches and keeps its desired state; undrain resumes the current generation", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    await h.commit();
    await h.settle();
    expect((await h.intent("app@n1")).status).toBe("converged");

    await setNodeDraining(h.store, "n1", true, { by: "alice", reason: "disk swap", at: h.clock.now() });
    await h.hub.nudge({ node: "n1" });
    h.write({ "assignments/app.yaml": app("v2") });
    await h.commit("v2");
    await h.settle();
    h.write({ "assignments/app.yaml": app("v3") });
    await h.commit("v3");
    await h.settle();

    expect(await h.intent("app@n2")).toMatchObject({ generation: 3, status: "converged" });
    // n1: the desired generation is recorded and held, nothing was sent, the node still has v1.
    expect(await h.intent("app@n1")).toMatchObject({ generation: 3, status: "held", holdReason: "draining" });
    expect(await h.store.desired.instance("app@n1")).toMatchObject({ generation: 3 });
    expect((await h.store.attempts.ofInstance("app@n1")).map((a) => a.generation)).toEqual([1]);
    expect(h.read("n1", "srv/conf")).toBe("v1");
    expect(await h.store.nodes.get("n1")).toMatchObject({
      draining: true,
      drainedBy: "alice",
      drainReason: "disk swap",
    });

    await setNodeDraining(h.store, "n1", false, { by: "alice", at: h.clock.now() });
    await h.hub.nudge({ node: "n1" });
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ generation: 3, status: "converged" });
    expect((await h.store.attempts.ofInstance("app@n1")).map((a) => a.generation)).toEqual([1, 3]);
    expect(h.read("n1", "srv/conf")).toBe("v3");
  });

  it("hub - draining an unknown node is refused with the known names", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    await h.commit();
    await expect(setNodeDraining(h.store, "n9", true, { by: "alice", at: h.clock.now() })).rejects.toThrow(
      /node "n9" is not known to the hub \(known: n1, n2\)/,
    );
  });
});
