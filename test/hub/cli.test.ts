import { afterEach, describe, expect, it } from "vitest";
import { statePathsIn, writeHubFile } from "../../src/cli/hub-state.js";
import { EXIT } from "../../src/cli/io.js";
import { type HubHttp, startHubHttp } from "../../src/hub/http.js";
import { runCli } from "../helpers/cli.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { type Harness, startHarness } from "./helpers/harness.js";

let http: HubHttp | undefined;
afterEach(async () => {
  await http?.close();
  http = undefined;
});

const steward = (dir: string, ...argv: string[]) => runCli(["--state", dir, ...argv], dir, { USER: "alice" });

/** Serves the harness's hub over HTTP and records it in the state directory, as `steward hub` does. */
async function serve(h: Harness): Promise<void> {
  http = await startHubHttp({ hub: h.hub });
  writeHubFile(statePathsIn(h.dir), {
    pid: process.pid,
    url: http.url,
    startedAt: new Date().toISOString(),
    transports: ["local"],
  });
}

const broken = assignmentYaml("app", {
  nodes: ["n1", "n2"],
  resources: [file("conf", "v1"), { kind: "command", name: "reload", run: ["/nonexistent/reload"] }],
});

describe("hub - cli", () => {
  it("hub - status lists open conditions and exits 1 while there are any, 0 when the fleet is right", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": broken } });
    await h.commit();
    await h.settle();
    const failing = await steward(h.dir, "status");
    expect(failing.code).toBe(EXIT.problems);
    expect(failing.stdout).toMatch(/^not right: 2 open conditions; 0\/2 instances converged\n/);
    expect(failing.stdout).toMatch(/Blocked\s+instance app@n1\s+\d+s ago\s+CommandNotFound\s+[0-9A-Z]{26}/);
    // History names each generation's outcome, failure class and correlation id.
    const attemptId = (await h.intent("app@n1")).lastAttemptId!;
    const history = await steward(h.dir, "history", "app", "--node", "n1");
    expect(history.stdout).toMatch(new RegExp(`app@n1\\s+1\\s.*blocked/permanent ${attemptId}`));
    const json = JSON.parse((await steward(h.dir, "status", "--json")).stdout);
    expect(json).toMatchObject({
      answer: "not-right",
      ok: false,
      conditions: [{ type: "Blocked" }, { type: "Blocked" }],
    });

    h.write({
      "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1", "n2"], resources: [file("conf", "v2")] }),
    });
    await h.commit();
    await h.settle();
    const right = await steward(h.dir, "status");
    expect(right).toMatchObject({
      code: EXIT.ok,
      stdout: "right: no open conditions; 2/2 instances converged\n",
    });
  });

  it("hub - get shows nodes, assignments, instances and intents as tables or JSON", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": broken } });
    await h.commit();
    await h.settle();
    const instances = await steward(h.dir, "get", "instances");
    expect(instances.code).toBe(EXIT.ok);
    expect(instances.stdout.split("\n")[0]).toMatch(
      /^INSTANCE\s+GEN\s+OBSERVED\s+STATE\s+CONDITIONS\s+MESSAGE$/,
    );
    expect(instances.stdout).toMatch(/app@n1\s+1\s+0\s+blocked\s+Blocked\s+1 of 2 resources failed/);
    const nodesOut = await steward(h.dir, "get", "nodes");
    expect(nodesOut.stdout).toMatch(/n1\s+local\s+0\/1\s+no\s+\d+s ago\s+\d+s ago\s+-/);
    const assignments = JSON.parse((await steward(h.dir, "get", "assignments", "--json")).stdout);
    expect(assignments).toEqual([
      { name: "app", stage: "apply", instances: 2, converged: 0, failing: 2, held: 0 },
    ]);
    const intents = JSON.parse((await steward(h.dir, "get", "intents", "--json")).stdout);
    expect(intents[0]).toMatchObject({ instanceKey: "app@n1", status: "blocked", failureClass: "permanent" });
    const wrong = await steward(h.dir, "get", "widgets");
    expect(wrong).toMatchObject({ code: EXIT.usage });
    expect(wrong.stderr).toBe(
      'steward: cannot get "widgets": choose one of nodes, assignments, instances, intents, attempts, conditions, tasks, revisions, replicas\n',
    );
  });

  it("hub - drain and undrain write the node's state and nudge a running hub", async () => {
    const h = await startHarness({ files: { ...nodes("n1", "n2"), "assignments/app.yaml": broken } });
    await h.commit();
    await h.settle();
    const offline = await steward(h.dir, "drain", "n1", "--reason", "kernel update");
    expect(offline).toMatchObject({
      code: EXIT.ok,
      stdout:
        "node n1 is draining: no new dispatches, desired state kept (no hub is running; it takes this in when it starts)\n",
    });
    expect(await h.store.nodes.get("n1")).toMatchObject({
      draining: true,
      drainedBy: "alice",
      drainReason: "kernel update",
    });

    await serve(h);
    const back = await steward(h.dir, "undrain", "n1");
    expect(back).toMatchObject({ code: EXIT.ok, stdout: "node n1 is back in service\n" });
    expect((await h.store.nodes.get("n1"))!.draining).toBe(false);
    const unknown = await steward(h.dir, "drain", "n9");
    expect(unknown.code).toBe(EXIT.usage);
    expect(unknown.stderr).toBe(
      'steward: node "n9" is not known to the hub (known: n1, n2): check the name, or sync the fleet repo first\n',
    );
  });

  it("hub - rollout pause and resume record who and why, and nudge a running hub, which moves the rollout", async () => {
    const app = assignmentYaml("app", {
      nodes: ["n1", "n2", "n3"],
      resources: [file("conf", "v1")],
      rollout: { canary: { nodes: ["n1"], soak: "30s" } },
    });
    const h = await startHarness({ files: { ...nodes("n1", "n2", "n3"), "assignments/app.yaml": app } });
    const { sha } = await h.commit();
    await h.settle();
    await serve(h);
    const paused = await steward(h.dir, "rollout", "pause", "HEAD", "--reason", "a slow canary");
    expect(paused.stdout).toMatch(
      new RegExp(
        `^rollout of app at ${sha.slice(0, 12)} paused by alice: 2 instances held\n  condition RolloutPaused \\S+ is open; it resolves when the rollout is seen moving\n$`,
      ),
    );
    await h.settle();
    expect(await h.intent("app@n2")).toMatchObject({ status: "held", holdReason: "paused-by-operator" });
    const status = await steward(h.dir, "status", "-o", "wide");
    expect(status.code).toBe(EXIT.problems);
    expect(status.stdout).toContain(`rollout of app at ${sha.slice(0, 12)} paused by alice: a slow canary`);
    const story = await steward(h.dir, "describe", "revision", "HEAD");
    expect(story.stdout).toContain(
      "    app: pending: 1/3 nodes at generation 1; paused by alice: a slow canary\n        paused by alice: a slow canary (since ",
    );

    await h.advance(30_000);
    expect(await h.intent("app@n2")).toMatchObject({ status: "held", holdReason: "paused-by-operator" });
    const resumed = await steward(
      h.dir,
      "rollout",
      "resume",
      sha.slice(0, 8),
      "--reason",
      "it is fine",
      "--as",
      "bob",
    );
    expect(resumed).toMatchObject({ code: EXIT.ok });
    await h.settle();
    expect(
      await Promise.all(["n1", "n2", "n3"].map(async (n) => (await h.intent(`app@${n}`)).status)),
    ).toEqual(["converged", "converged", "converged"]);
    expect(await h.store.conditions.list({ type: "RolloutPaused" })).toMatchObject([{ status: "resolved" }]);
    expect(await h.store.rollouts.decision("app", sha)).toMatchObject({
      decision: "resume",
      by: "bob",
      reason: "it is fine",
    });
  });

  it("hub - tasks lists work needing judgement; claim and resolve record who did what", async () => {
    const one = assignmentYaml("app", {
      nodes: ["n1"],
      resources: [{ kind: "command", name: "reload", run: ["/nonexistent/reload"] }],
    });
    const h = await startHarness({ files: { ...nodes("n1"), "assignments/app.yaml": one } });
    await h.commit();
    await h.settle();
    const list = await steward(h.dir, "tasks");
    expect(list.stdout).toMatch(/Blocked\s+instance app@n1\s+open/);
    const [{ task }] = JSON.parse((await steward(h.dir, "tasks", "--json")).stdout);
    const claimed = await steward(h.dir, "tasks", "claim", task.id.slice(-6));
    expect(claimed.stdout).toBe(`task ${task.id} (Blocked on instance app@n1) claimed by alice\n`);
    const resolved = await steward(
      h.dir,
      "tasks",
      "resolve",
      task.id,
      "--action",
      "installed the reload tool",
    );
    expect(resolved).toMatchObject({ code: EXIT.ok });
    expect(resolved.stdout).toContain("stays open until observation shows it resolved");
    expect(await h.store.tasks.get(task.id)).toMatchObject({
      status: "resolved",
      resolvedBy: "alice",
      action: "installed the reload tool",
    });
    expect((await steward(h.dir, "tasks")).stdout).toBe("no open tasks\n");
    const missing = await steward(h.dir, "tasks", "resolve", task.id);
    expect(missing.code).toBe(EXIT.usage);
  });

  it("hub - commands refuse a state directory without a hub database", async () => {
    const result = await steward("/nonexistent-state-dir", "status");
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toBe(
      "steward: no hub state in /nonexistent-state-dir: run `steward up` (or `steward hub`) first, or pass --state DIR\n",
    );
  });
});
