import { readdirSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { DEFAULT_TIMING } from "../../src/hub/decide.js";
import { idFactory } from "../../src/hub/ids.js";
import { reconcileInstance } from "../../src/hub/reconcile.js";
import { FaultyTransport } from "./helpers/faults.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const app = assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v1")] });
const attemptsSeenByAgent = (dir: string) => readdirSync(join(dir, "state", "agents", "n1", "attempts"));

describe("hub - outbox", () => {
  it("hub - an attempt written but never handed over (the hub died right after deciding) is handed over by the next hub, same id", async () => {
    const h = await startHarness({ files: { ...nodes("n1"), "assignments/app.yaml": app } });
    await h.stopHub();
    await h.commit();
    // What a hub does in one transaction before it relays: decide, write the attempt and its outbox row.
    const outcome = await h.store.transaction((tx) =>
      reconcileInstance(
        {
          clock: h.clock,
          newId: idFactory(h.clock),
          timing: DEFAULT_TIMING,
          random: () => 0.5,
          transportEnabled: () => true,
          log: pino({ level: "silent" }),
        },
        tx,
        "app@n1",
      ),
    );
    const [id] = outcome.dispatched;
    expect((await h.store.attempts.outbox()).map((row) => row.attemptId)).toEqual([id]);
    expect(await h.store.attempts.get(id!)).toMatchObject({ status: "queued" });

    await h.startHub();
    expect(await h.store.attempts.outbox()).toEqual([]);
    expect(await h.store.attempts.ofInstance("app@n1")).toMatchObject([{ id, status: "succeeded" }]);
    expect((await h.intent("app@n1")).status).toBe("converged");
    expect(attemptsSeenByAgent(h.dir)).toEqual([`${id}.json`]);
  });

  it("hub - an attempt whose hand-over had begun is never sent again after a restart: its lease runs out and a report settles it", async () => {
    let faults: FaultyTransport | undefined;
    const h = await startHarness({
      files: { ...nodes("n1"), "assignments/app.yaml": app },
      wrap: (local) => {
        // Only the first hub's hand-overs stall (the connection hangs as the hub dies).
        const stalling = !faults;
        faults = new FaultyTransport(local);
        faults.hangDispatches = stalling;
        return faults;
      },
    });
    await h.commit();
    while ((await h.store.attempts.ofInstance("app@n1"))[0]?.status !== "dispatched")
      await new Promise((r) => setTimeout(r, 10));
    const [stalled] = await h.store.attempts.ofInstance("app@n1");

    await h.stopHub();
    await h.startHub();
    expect(await h.store.attempts.outbox()).toEqual([]);
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(1);
    expect((await h.intent("app@n1")).status).toBe("dispatched");

    await h.advance(DEFAULT_TIMING.leaseMs);
    expect(await h.store.attempts.get(stalled!.id)).toMatchObject({
      status: "ambiguous",
      reason: "LeaseExpired",
    });
    // A report taken after the lease ended settles it: not applied, so a new attempt goes.
    h.clock.advance(1_000);
    await h.report("n1");
    const [settled, fresh] = await h.store.attempts.ofInstance("app@n1");
    expect(settled).toMatchObject({
      id: stalled!.id,
      reason: "LeaseExpired",
      status: "lost",
      settledBy: "report",
    });
    expect(fresh).toMatchObject({ status: "succeeded" });
    expect((await h.intent("app@n1")).status).toBe("converged");
    expect(attemptsSeenByAgent(h.dir)).toEqual([`${fresh!.id}.json`]);
  });
});
