/**
 * The rollout NATS fault tests run: an assignment of a directory, a file naming the version and a
 * one-shot that appends "VERSION ATTEMPT" to `srv/runs` under the node's root; and the checks that
 * hold once it converged, however servers died on the way.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import type { StoreReads } from "../../src/hub/store/store.js";
import { assignmentYaml, file, shell } from "../hub/helpers/fleet.js";
import { eventually } from "../hub/helpers/process.js";

/** Assignment `app` at `version` on `nodes`; its one-shot takes `sleepS` seconds. */
export function versionedRollout(nodes: string[], version: number, sleepS = 0.3): string {
  return assignmentYaml("app", {
    nodes,
    resources: [
      { kind: "directory", name: "srv", path: "/srv" },
      file("conf", `version ${version}\n`),
      shell("migrate", `echo "${version} $STEWARD_ATTEMPT" >> "$STEWARD_ROOT/srv/runs"; sleep ${sleepS}`),
    ],
  });
}

/**
 * On every node (roots under `dir`): each version's one-shot ran at most once, the file is at
 * `version`, and every attempt the hub made was settled by its own result, or replaced (never failed,
 * never settled without its result; one still in flight gets 15 s for its result to be taken in).
 */
export async function expectRolloutSettled(options: {
  dir: string;
  nodes: string[];
  store: StoreReads;
  version: number;
}): Promise<void> {
  for (const node of options.nodes) {
    const runs = readFileSync(join(options.dir, node, "srv", "runs"), "utf8")
      .trim()
      .split("\n");
    const versionsRun = runs.map((line) => line.split(" ")[0]);
    // Each generation that ran its one-shot ran it once.
    expect(new Set(versionsRun).size, `${node}: ${runs.join(", ")}`).toBe(versionsRun.length);
    expect(readFileSync(join(options.dir, node, "srv", "conf"), "utf8")).toBe(`version ${options.version}\n`);
    // A report may show the instance converged before the attempt's result is taken in (they travel
    // apart, and again after a server died): the result is waited for, never done without.
    const settled = (status: string, by: string | undefined) =>
      (status === "succeeded" && by === "result") || status === "cancelled" || status === "superseded";
    const ofInstance = () => options.store.attempts.ofInstance(`app@${node}`);
    const attempts = await eventually(
      async () => {
        const all = await ofInstance();
        return all.some((a) => a.status === "dispatched") ? undefined : all;
      },
      15_000,
      `${node}'s attempts in flight to end`,
    ).catch(ofInstance);
    for (const attempt of attempts)
      expect([attempt.status, attempt.settledBy], `${attempt.id} of ${node}`).toSatisfy(([status, by]) =>
        settled(status, by),
      );
  }
}
