/**
 * Rollout pause and resume from the web view: the same decisions `steward rollout pause|resume`
 * records, taken by a named operator, with the button on the revision page.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type HubHttp, startHubHttp } from "../../src/hub/http.js";
import { parseOperatorTokens } from "../../src/hub/web/operators.js";
import { rolloutControlOf } from "../../src/hub/web/rollout.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const TOKEN = "alice-token-0123456789abcdef";
let http: HubHttp | undefined;
afterEach(async () => {
  await http?.close();
  http = undefined;
});

describe("web - rollout pause and resume", () => {
  it("web - an operator pauses a rollout under way and resumes it, recorded with their name and reason", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1", "n2", "n3"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1", "n2", "n3"],
          // The canary soaks for an hour: n2 and n3 wait, so there is a rollout to pause.
          rollout: { canary: { nodes: ["n1"], soak: "1h" } },
          resources: [file("conf", "v1")],
        }),
      },
    });
    const { sha } = await h.commit("app v1");
    await h.settle();
    http = await startHubHttp({
      hub: h.hub,
      web: { operators: parseOperatorTokens(`alice ${TOKEN}\n`, "ops"), rollout: rolloutControlOf(h.hub) },
    });
    const act = (verb: string, reason: string) =>
      fetch(`${http!.url}/revisions/${sha.slice(0, 12)}/rollout/app/${verb}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ reason }).toString(),
      });
    // Without a token, nothing.
    expect((await fetch(`${http.url}/revisions/${sha}/rollout/app/pause`, { method: "POST" })).status).toBe(
      403,
    );

    expect((await act("pause", "the canary's latency looks off")).status).toBe(200);
    await h.settle();
    expect(await h.store.rollouts.decision("app", sha)).toMatchObject({
      decision: "pause",
      by: "alice",
      reason: "the canary's latency looks off",
    });
    const paused = (await h.store.conditions.findOpen("RolloutPaused", "rollout", `app@${sha}`))!;
    expect(paused).toMatchObject({ reason: "PausedByOperator" });
    expect(paused.message).toContain("paused by alice: the canary's latency looks off");
    expect(await h.intent("app@n2")).toMatchObject({ status: "held" });

    expect((await act("resume", "latency is fine")).status).toBe(200);
    await h.settle();
    expect(await h.store.rollouts.decision("app", sha)).toMatchObject({ decision: "resume", by: "alice" });
    expect((await h.store.conditions.history(paused.id)).map((e) => e.message).join("\n")).toMatch(
      /resumed by alice/,
    );
  });
});
