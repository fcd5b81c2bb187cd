import { mkdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { resolveTask } from "../../src/hub/tasks.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

describe("hub - destructive repairs", () => {
  it("hub - a repair that would destroy something is DestructiveRepairNeeded for a person; their action earns one more attempt", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v1")] }),
      },
    });
    // Someone's directory is where the file is declared.
    const conf = join(h.root, "n1", "srv", "conf");
    mkdirSync(join(conf, "precious"), { recursive: true });
    await h.commit();
    await h.settle();
    expect(await h.intent("app@n1")).toMatchObject({ status: "blocked", reason: "TypeConflict" });
    const [condition] = await h.store.conditions.list({ type: "DestructiveRepairNeeded", status: "open" });
    expect(condition).toMatchObject({ subject: "app@n1", resolver: "operator", reason: "TypeConflict" });
    expect(await h.store.conditions.list({ type: "Blocked" })).toEqual([]);
    expect(statSync(join(conf, "precious")).isDirectory()).toBe(true);

    // Nothing more happens on its own.
    await h.advance(3_600_000);
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(1);

    // A person moves the directory away and says so: the ordinary path runs once more, and converges.
    renameSync(conf, `${conf}.moved`);
    const task = (await h.store.tasks.ofCondition(condition!.id))!;
    await resolveTask(
      h.store,
      task.id,
      "alice",
      "moved /srv/conf aside to /srv/conf.moved",
      h.clock.now().toISOString(),
    );
    await h.hub.nudge({ node: "n1" });
    await h.settle();
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(2);
    expect((await h.intent("app@n1")).status).toBe("converged");
    expect(h.read("n1", "srv/conf")).toBe("v1");
    expect(await h.store.conditions.get(condition!.id)).toMatchObject({ status: "resolved" });
    expect(await h.store.tasks.get(task.id)).toMatchObject({
      status: "resolved",
      action: "moved /srv/conf aside to /srv/conf.moved",
    });
  });
});
