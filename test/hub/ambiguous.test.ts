import { describe, expect, it } from "vitest";
import { FaultyTransport } from "./helpers/faults.js";
import { assignmentYaml, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

let faults: FaultyTransport;

// A one-shot action: appends a line each time it runs.
const oneShot = assignmentYaml("app", {
  nodes: ["n1"],
  resources: [
    { kind: "directory", name: "srv", path: "/srv" },
    shell("restart-service", 'echo restarted >> "$STEWARD_ROOT/srv/restarts"'),
  ],
});
const AMBIGUOUS_TIMEOUT = 120_000;

async function start() {
  const h = await startHarness({
    files: { ...nodes("n1"), "assignments/app.yaml": oneShot },
    timing: { ambiguousTimeoutMs: AMBIGUOUS_TIMEOUT },
    wrap: (local) => {
      faults = new FaultyTransport(local);
      return faults;
    },
  });
  return h;
}

describe("hub - ambiguous attempts", () => {
  it("hub - a lost result is never replayed blindly; Ambiguous is raised when no fresh report comes, and a later report settles it", async () => {
    const h = await start();
    faults.partitioned = true;
    await h.commit();
    await h.settle();
    const [attempt] = await h.store.attempts.ofInstance("app@n1");
    expect(attempt).toMatchObject({ status: "ambiguous", reason: "ResultLost" });
    expect((await h.intent("app@n1")).status).toBe("ambiguous");
    // The agent did run it; the hub does not know, and does not try again.
    expect(h.read("n1", "srv/restarts")).toBe("restarted\n");

    await h.advance(AMBIGUOUS_TIMEOUT);
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(1);
    const [ambiguous] = await h.store.conditions.list({ type: "Ambiguous", status: "open" });
    expect(ambiguous).toMatchObject({ subject: "app@n1", attemptId: attempt!.id, tried: [attempt!.id] });
    expect((await h.store.tasks.list({ status: "open" })).map((t) => t.type)).toContain("Ambiguous");

    // The partition heals; the hub asks again at its next deadline and the report settles it: the
    // node already applied the attempt, so there is nothing to redo.
    faults.partitioned = false;
    await h.advance(AMBIGUOUS_TIMEOUT);
    expect(await h.store.attempts.get(attempt!.id)).toMatchObject({
      status: "succeeded",
      settledBy: "report",
    });
    expect((await h.intent("app@n1")).status).toBe("converged");
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(1);
    expect(h.read("n1", "srv/restarts")).toBe("restarted\n");
    expect(await h.store.conditions.get(ambiguous!.id)).toMatchObject({ status: "resolved" });
  });

  it("hub - an attempt lost before it reached the node is settled by a report taken after it, then attempted again", async () => {
    const h = await start();
    faults.dropDispatches = true;
    await h.commit();
    await h.settle();
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(1);
    expect((await h.intent("app@n1")).status).toBe("ambiguous");
    // A report taken in the same instant as the dispatch does not prove anything: still waiting.
    await h.report("n1");
    expect(await h.store.attempts.ofInstance("app@n1")).toHaveLength(1);

    faults.dropDispatches = false;
    h.clock.advance(1_000);
    await h.report("n1");
    const [lost, retry] = await h.store.attempts.ofInstance("app@n1");
    expect(lost).toMatchObject({ status: "lost", settledBy: "report" });
    expect(retry).toMatchObject({ status: "succeeded" });
    expect(await h.intent("app@n1")).toMatchObject({ status: "converged" });
    expect(h.read("n1", "srv/restarts")).toBe("restarted\n");
  });
});
