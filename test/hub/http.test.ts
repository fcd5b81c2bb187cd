import { afterEach, describe, expect, it } from "vitest";
import { type HubHttp, startHubHttp } from "../../src/hub/http.js";
import { setNodeDraining } from "../../src/hub/operator.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

let http: HubHttp | undefined;
afterEach(async () => {
  await http?.close();
  http = undefined;
});

const app = (content: string, extra: object = {}) =>
  assignmentYaml("app", { nodes: ["n1", "n2"], resources: [file("conf", content)], ...extra });

describe("hub - http", () => {
  it("hub - serves health, Prometheus metrics and a revision's progress", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    const synced = await h.commit();
    await h.settle();
    http = await startHubHttp({ hub: h.hub });

    const health = await fetch(`${http.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({
      status: "ok",
      transports: ["local"],
      revision: { sha: synced.sha },
    });

    const metrics = await (await fetch(`${http.url}/metrics`)).text();
    expect(metrics).toContain('steward_intents{state="converged"} 2');
    expect(metrics).toContain('steward_attempts{outcome="succeeded"} 2');
    expect(metrics).toMatch(
      /steward_reconcile_duration_seconds_bucket\{le="[0-9.]+",outcome="converged"\} [1-9]/,
    );
    expect(metrics).toContain("# TYPE steward_conditions_open gauge");

    const progress = await (await fetch(`${http.url}/revisions/${synced.sha}`)).json();
    expect(progress).toMatchObject({
      revision: synced.sha,
      state: "success",
      assignments: [{ assignment: "app", state: "success", description: "2/2 nodes at generation 1" }],
    });
    const short = await fetch(`${http.url}/revisions/${synced.sha.slice(0, 8)}`);
    expect(((await short.json()) as { revision: string }).revision).toBe(synced.sha);
    expect((await fetch(`${http.url}/revisions/0000000`)).status).toBe(404);

    // The stories steward describe tells, as the same JSON.
    const attemptId = (await h.intent("app@n1")).lastAttemptId!;
    expect(await (await fetch(`${http.url}/instances/app@n1`)).json()).toMatchObject({
      kind: "instance",
      name: "app@n1",
      now: { state: "converged" },
      attempts: [{ id: attemptId, status: "succeeded" }],
    });
    expect(await (await fetch(`${http.url}/nodes/n2`)).json()).toMatchObject({ kind: "node", name: "n2" });
    expect(await (await fetch(`${http.url}/attempts/${attemptId}`)).json()).toMatchObject({
      kind: "attempt",
      attempt: { id: attemptId, instance: "app@n1" },
    });
    expect((await fetch(`${http.url}/instances/app@n9`)).status).toBe(404);
  });

  it("hub - a nudge makes a running hub take in an operator's drain at once", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") } });
    await h.commit();
    await h.settle();
    http = await startHubHttp({ hub: h.hub });
    await setNodeDraining(h.store, "n2", true, { by: "cli", at: h.clock.now() });
    const response = await fetch(`${http.url}/nudge`, {
      method: "POST",
      body: JSON.stringify({ node: "n2" }),
    });
    expect(response.status).toBe(204);
    h.write({ "assignments/app.yaml": app("v2") });
    await h.commit();
    await h.settle();
    expect((await h.intent("app@n1")).status).toBe("converged");
    expect(await h.intent("app@n2")).toMatchObject({ status: "held", holdReason: "draining" });
  });

  it("hub - mounts the webhook handler at POST /webhook, and answers 404 without one", async () => {
    const h = await startHarness({ files: { ...nodes("n1") } });
    const seen: string[] = [];
    http = await startHubHttp({
      hub: h.hub,
      webhook: (request, response) => {
        seen.push(`${request.method} ${request.headers["x-github-event"]}`);
        response.writeHead(202);
        response.end();
      },
    });
    const response = await fetch(`${http.url}/webhook`, {
      method: "POST",
      headers: { "x-github-event": "push" },
      body: "{}",
    });
    expect(response.status).toBe(202);
    expect(seen).toEqual(["POST push"]);
    await http.close();
    http = await startHubHttp({ hub: h.hub });
    expect((await fetch(`${http.url}/webhook`, { method: "POST", body: "{}" })).status).toBe(404);
  });
});
