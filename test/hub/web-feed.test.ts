import { describe, expect, it } from "vitest";
import { type FleetChange, HubFleetFeed } from "../../src/hub/fleet-feed.js";
import { setNodeDraining } from "../../src/hub/operator.js";
import { instanceViews } from "../../src/hub/views.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const app = (content: string) =>
  assignmentYaml("app", { nodes: ["n1", "n2"], resources: [file("conf", content)] });

/** Waits for the feed's coalescing timer, so what happened has gone out. */
const flushed = () => new Promise((resolve) => setTimeout(resolve, 60));

describe("hub - the fleet feed", () => {
  it("web - the feed's snapshot is the views' fleet, and a commit comes out as each instance's changes, ending converged", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    await h.commit();
    await h.settle();
    const feed = new HubFleetFeed({ hub: h.hub });
    try {
      expect(await feed.instances()).toEqual(await instanceViews(h.store));
      const seen: FleetChange[] = [];
      feed.subscribe((change) => seen.push(change));
      h.write({ "assignments/app.yaml": app("v2") });
      const { sha } = await h.commit();
      await h.settle();
      await flushed();
      const states = seen
        .filter(
          (c): c is Extract<FleetChange, { kind: "instance" }> =>
            c.kind === "instance" && c.instance === "app@n1",
        )
        .map((c) => `${c.view?.state}@${c.view?.generation}`);
      // Changes close together go out as one, the latest.
      expect(states.at(-1)).toBe("converged@2");
      expect(states.every((s) => s.endsWith("@2"))).toBe(true);
      expect(seen).toContainEqual(expect.objectContaining({ kind: "revision", sha }));
      // The feed coalesces changes on a timer: under load its last one may still be on the way.
      const views = await instanceViews(h.store);
      for (let waited = 0; waited < 5_000; waited += 60) {
        if (JSON.stringify(await feed.instances()) === JSON.stringify(views)) break;
        await flushed();
      }
      expect(await feed.instances()).toEqual(views);
    } finally {
      feed.close();
    }
  });

  it("web - a condition opened or resolved is an event, and the instance it is about is looked at again", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [{ kind: "command", name: "migrate", run: ["/nonexistent/migrate-tool"] }],
        }),
      },
    });
    const feed = new HubFleetFeed({ hub: h.hub });
    try {
      const seen: FleetChange[] = [];
      feed.subscribe((change) => seen.push(change));
      await h.commit();
      await h.settle();
      await flushed();
      expect(seen).toContainEqual(
        expect.objectContaining({
          kind: "condition",
          condition: expect.objectContaining({ type: "Blocked", status: "open", subject: "app@n1" }),
        }),
      );
      const last = seen.filter((c) => c.kind === "instance").at(-1) as Extract<
        FleetChange,
        { kind: "instance" }
      >;
      expect(last.view).toMatchObject({ state: "blocked", openConditions: ["Blocked"] });
    } finally {
      feed.close();
    }
  });

  it("web - another writer's change (a drain from the CLI) comes out when the feed is told to look again", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    await h.commit();
    await h.settle();
    const feed = new HubFleetFeed({ hub: h.hub });
    try {
      await feed.instances();
      const seen: FleetChange[] = [];
      feed.subscribe((change) => seen.push(change));
      await setNodeDraining(h.store, "n2", true, { by: "cli", at: h.clock.now() });
      feed.lookAgain({ node: "n2" });
      await flushed();
      expect(seen.map((c) => c.kind)).toEqual(["node"]);
      feed.lookAgain();
      await flushed();
      expect(seen.at(-1)?.kind).toBe("resync");
    } finally {
      feed.close();
    }
  });

  it("web - nobody looking, the feed lets its snapshot go and takes the fleet anew when next asked", async () => {
    let now = 0;
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    await h.commit();
    await h.settle();
    const feed = new HubFleetFeed({ hub: h.hub, idleMs: 1_000, now: () => now });
    try {
      expect((await feed.instances()).map((v) => v.generation)).toEqual([1, 1]);
      now = 5_000;
      h.write({ "assignments/app.yaml": app("v2") });
      await h.commit();
      await h.settle();
      await flushed();
      expect((await feed.instances()).map((v) => `${v.state}@${v.generation}`)).toEqual([
        "converged@2",
        "converged@2",
      ]);
    } finally {
      feed.close();
    }
  });
});
