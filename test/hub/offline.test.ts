import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const app = (version: string) =>
  assignmentYaml("app", { nodes: ["n1"], version, resources: [file("conf", `version ${version}`)] });

describe("hub - offline node", () => {
  it("hub - desired writes made while a node is offline stay durable, and its return converges only the current generation", async () => {
    const h = await startHarness({
      files: { ...nodes("n1"), "assignments/app.yaml": app("1") },
      timing: { backoff: { initialMs: 10_000, maxMs: 600_000, jitter: 0 } },
    });
    await h.commit("1");
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ generation: 1, status: "converged" });

    // The node goes down; two changes land; dispatches cannot be handed over and back off.
    await h.local.stopNode("n1");
    for (const version of ["2", "3"]) {
      h.write({ "assignments/app.yaml": app(version) });
      await h.commit(version);
      await h.settle();
    }
    expect(await h.intent("app@n1")).toMatchObject({
      generation: 3,
      status: "backoff",
      reason: "NodeStopped",
    });

    // The hub goes down too, and a fourth change is written while nothing runs.
    await h.stopHub();
    h.write({ "assignments/app.yaml": app("4") });
    await h.commit("4");
    expect(await h.store.desired.instance("app@n1")).toMatchObject({ generation: 4 });

    // A new hub starts while the node is still down: generation 4 is the intent now.
    await h.startHub((local) => local.stopNode("n1"));
    expect(await h.intent("app@n1")).toMatchObject({ generation: 4, status: "backoff" });
    expect(await h.store.intents.get("app@n1", 3)).toMatchObject({ status: "superseded", supersededBy: 4 });

    // The node comes back: its registration report resumes reconciliation at once (no waiting out
    // the backoff), and only generation 4 reaches it.
    await h.local.startNode((await h.store.nodes.get("n1"))!.spec);
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ generation: 4, status: "converged", version: "4" });
    expect(h.read("n1", "srv/conf")).toBe("version 4");
    const delivered = (await h.store.attempts.ofInstance("app@n1"))
      .filter((a) => a.settledBy !== "dispatch")
      .map((a) => a.generation)
      // The fake clock stands still: both hubs' attempts have one time, and ids order them only within a hub.
      .sort();
    expect(delivered).toEqual([1, 4]);
    // What the agent itself saw: attempts for generations 1 and 4 only.
    const seen = readdirSync(join(h.dir, "state", "agents", "n1", "attempts")).map((f) =>
      f.replace(/\.json$/, ""),
    );
    const byId = new Map((await h.store.attempts.ofInstance("app@n1")).map((a) => [a.id, a.generation]));
    expect(seen.map((id) => byId.get(id)).sort()).toEqual([1, 4]);
  });
});
