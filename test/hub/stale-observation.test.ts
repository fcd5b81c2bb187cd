/**
 * A full report is all a node holds. The seed's case: `steward up --transport nats` ran the web
 * servers from agents whose state lived apart from the in-process agent's; with the servers killed,
 * a plain `steward up` printed `converged: 6/6` while nothing listened — the in-process agent
 * reported no instance (it held none), and the hub kept the other agent's old "converged". An
 * instance a report does not mention is not there: it is applied again by the ordinary path.
 */
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { killServices } from "../agent/helpers.js";
import { assignmentYaml, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("hub - an observation no report backs is not kept", () => {
  it("hub - a node whose agent holds nothing of an instance is not converged on it: the service is started again", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/svc.yaml": assignmentYaml("svc", {
          nodes: ["n1"],
          resources: [
            { kind: "directory", name: "srv", path: "/srv" },
            {
              kind: "service",
              name: "sleeper",
              exec: ["sh", "-c", 'echo $$ > "$STEWARD_ROOT/srv/pid"; exec sleep 600'],
            },
          ],
        }),
      },
    });
    const state = join(h.dir, "state", "agents", "n1");
    try {
      await h.commit();
      await h.settle();
      expect((await h.intent("svc@n1")).status).toBe("converged");
      const first = Number(h.read("n1", "srv/pid"));
      expect(alive(first)).toBe(true);

      // Another agent takes over the node: the service is gone, and so is the state that knew it.
      await h.stopHub();
      killServices(state);
      rmSync(state, { recursive: true, force: true });
      h.clock.advance(1_000);
      await h.startHub();
      await h.settle();

      const second = Number(readFileSync(join(h.root, "n1", "srv", "pid"), "utf8"));
      expect(second).not.toBe(first);
      expect(alive(second)).toBe(true);
      expect((await h.intent("svc@n1")).status).toBe("converged");
      expect((await h.store.attempts.ofInstance("svc@n1")).map((a) => [a.generation, a.status])).toEqual([
        [1, "succeeded"],
        [1, "succeeded"],
      ]);
    } finally {
      killServices(state);
    }
  });
});
