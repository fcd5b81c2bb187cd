import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

describe("hub - dependsOn", () => {
  it("hub - an instance waits for the assignments it depends on without spending budget, then converges", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/base.yaml": assignmentYaml("base", {
          nodes: ["n1"],
          resources: [
            { kind: "directory", name: "srv", path: "/srv" },
            shell("ready", 'test -f "$STEWARD_ROOT/srv/ready"'),
          ],
          budget: { attempts: 2 },
        }),
        "assignments/web.yaml": assignmentYaml("web", {
          nodes: ["n1"],
          dependsOn: ["base"],
          resources: [file("web", "served")],
          budget: { attempts: 2 },
        }),
      },
      timing: { backoff: { initialMs: 1_000, maxMs: 10_000, jitter: 0 } },
    });
    await h.commit();
    await h.settle();
    await h.advance(1_000);
    await h.advance(10_000);
    expect(await h.intent("base@n1")).toMatchObject({ status: "stuck", failures: 3 });
    // web waited the whole time: no attempt, no failure counted, no condition of its own.
    expect(await h.intent("web@n1")).toMatchObject({ status: "waiting", failures: 0 });
    expect((await h.intent("web@n1")).message).toBe("waiting for base on n1 to converge");
    expect(await h.store.attempts.ofInstance("web@n1")).toEqual([]);
    expect(await h.store.conditions.openOf("instance", "web@n1")).toEqual([]);

    writeFileSync(join(h.root, "n1", "srv", "ready"), "");
    await h.advance(10_000);
    expect((await h.intent("base@n1")).status).toBe("converged");
    expect(await h.intent("web@n1")).toMatchObject({ status: "converged", failures: 0 });
    expect(await h.store.attempts.ofInstance("web@n1")).toHaveLength(1);
  });
});
