import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { assignmentYaml, file, fleetYaml, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const app = (stage?: "observe" | "apply") =>
  assignmentYaml("app", {
    nodes: ["n1"],
    resources: [file("conf", "managed")],
    ...(stage ? { rollout: { stage } } : {}),
  });

describe("hub - observe-only", () => {
  it("hub - fleet mode observe persists reports and compares, and dispatches nothing", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "steward.yaml": fleetYaml({ mode: "observe" }),
        "assignments/app.yaml": app(),
      },
    });
    await h.commit();
    await h.settle();
    await h.advance(60_000);
    expect(await h.store.attempts.ofInstance("app@n1")).toEqual([]);
    expect(await h.store.attempts.outbox()).toEqual([]);
    expect(await h.intent("app@n1")).toMatchObject({ status: "held", holdReason: "observe" });
    // The node's report is stored and compared: the mismatch is visible, nothing is done about it.
    expect(await h.store.observations.reportOf("n1")).toBeDefined();
    expect((await h.intent("app@n1")).message).toBe("observe-only: not applied on n1 yet");
    expect(h.read("n1", "srv/conf")).toBeUndefined();
  });

  it("hub - switching an assignment from observe to apply starts dispatching; back to observe, drift is reported and left alone", async () => {
    const h = await startHarness({ files: { ...nodes("n1"), "assignments/app.yaml": app("observe") } });
    await h.commit();
    await h.settle();
    expect(await h.store.attempts.ofInstance("app@n1")).toEqual([]);

    // A policy change is not a new generation, yet it takes effect.
    h.write({ "assignments/app.yaml": app("apply") });
    await h.commit("apply app");
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ generation: 1, status: "converged" });
    expect(h.read("n1", "srv/conf")).toBe("managed");

    h.write({ "assignments/app.yaml": app("observe") });
    await h.commit("observe app");
    writeFileSync(join(h.root, "n1", "srv", "conf"), "edited by hand");
    await h.report("n1");
    const intent = await h.intent("app@n1");
    expect(intent).toMatchObject({ status: "held", holdReason: "observe" });
    expect(intent.message).toMatch(/^observe-only: file conf drifted/);
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(1);
    expect(h.read("n1", "srv/conf")).toBe("edited by hand");
  });
});
