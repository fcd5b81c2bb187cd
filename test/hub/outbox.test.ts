import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FaultyTransport } from "./helpers/faults.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

describe("hub - outbox", () => {
  it("hub - an attempt written but not handed over before the hub stopped is handed over by the next hub, with the same id", async () => {
    let faults: FaultyTransport | undefined;
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v1")] }),
      },
      wrap: (local) => {
        // Only the first hub's transport stalls.
        const stalling = !faults;
        faults = new FaultyTransport(local);
        faults.hangDispatches = stalling;
        return faults;
      },
    });
    await h.commit();
    // The hand-over never completes, so the hub is never idle: wait for the attempt to be written.
    while (h.store.attemptsOf("app@n1").length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const [attempt] = h.store.attemptsOf("app@n1");
    expect(attempt).toMatchObject({ status: "queued" });
    expect(h.store.outbox().map((row) => row.attemptId)).toEqual([attempt!.id]);

    // The hub goes away while the hand-over hangs; the next one finds the row and hands it over.
    await h.stopHub();
    await h.startHub();
    expect(h.store.outbox()).toEqual([]);
    expect(h.store.attemptsOf("app@n1")).toMatchObject([{ id: attempt!.id, status: "succeeded" }]);
    expect(h.intent("app@n1").status).toBe("converged");
    expect(readdirSync(join(h.dir, "state", "agents", "n1", "attempts"))).toEqual([`${attempt!.id}.json`]);
  });
});
