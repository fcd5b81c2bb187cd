import { describe, expect, it } from "vitest";
import { type FleetChange, HubFleetFeed } from "../../src/hub/fleet-feed.js";
import { setNodeDraining } from "../../src/hub/operator.js";
import type { ReconcileOutcome } from "../../src/hub/reconcile.js";
import { instanceViews } from "../../src/hub/views.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";
import { eventually } from "./helpers/process.js";

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

  it("web - a change a watcher does not see (the intent's status alone) still reaches the snapshot, without an event", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    await h.commit();
    await h.settle();
    let reconciled: (outcome: ReconcileOutcome) => void = () => {};
    const feed = new HubFleetFeed({
      hub: {
        store: h.store,
        onReconcile: (listener) => {
          reconciled = listener;
          return () => {};
        },
      },
    });
    try {
      await feed.instances();
      const seen: FleetChange[] = [];
      feed.subscribe((change) => seen.push(change));
      // The intent's status moves while what the instance shows (converged at 1) stays.
      const intent = await h.store.intents.get("app@n1", 1);
      await h.store.transaction((tx) => tx.intents.save({ ...intent!, status: "dispatched" }));
      reconciled({
        key: "app@n1",
        revisions: [],
        outcome: "test",
        dispatched: [],
        follow: [],
        opened: [],
        resolved: [],
      });
      await flushed();
      const views = await instanceViews(h.store);
      expect(views.find((v) => v.instance === "app@n1")).toMatchObject({
        state: "converged",
        status: "dispatched",
      });
      expect(await feed.instances()).toEqual(views);
      expect(seen).toEqual([]);
    } finally {
      feed.close();
    }
  });

  it("web - a look at an instance that takes long does not put back an older view over a newer one", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    await h.commit();
    await h.settle();
    // The first read of app@n1's desired state once armed is held until released: a slow store.
    let armed = false;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let heldRead: Promise<unknown> | undefined;
    const real = h.store.desired;
    const desired = new Proxy(real, {
      get(target, property) {
        if (property === "instance")
          return (key: string) => {
            const read = target.instance(key);
            if (!armed || key !== "app@n1" || heldRead) return read;
            heldRead = read.then(async (value) => {
              await held;
              return value;
            });
            return heldRead;
          };
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const store = new Proxy(h.store, {
      get(target, property) {
        if (property === "desired") return desired;
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const feed = new HubFleetFeed({ hub: { store, onReconcile: (listener) => h.hub.onReconcile(listener) } });
    try {
      await feed.instances();
      feed.subscribe(() => {});
      armed = true;
      // A look at n1 reads app@n1 at generation 1, and is held there...
      feed.lookAgain({ node: "n1" });
      await eventually(() => heldRead !== undefined, 5_000, "the held read");
      // ...while generation 2 rolls out and converges, and is looked at meanwhile.
      h.write({ "assignments/app.yaml": app("v2") });
      await h.commit();
      await h.settle();
      await flushed();
      release();
      await heldRead;
      await flushed();
      const views = await instanceViews(h.store);
      expect(views.map((v) => `${v.state}@${v.generation}`)).toEqual(["converged@2", "converged@2"]);
      expect(await feed.instances()).toEqual(views);
    } finally {
      release();
      feed.close();
    }
  });
});
