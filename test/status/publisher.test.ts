import { afterEach, describe, expect, it } from "vitest";
import {
  type CommitStatus,
  FLEET_CONTEXT,
  type InstanceProgress,
  type RevisionRecord,
  revisionStatuses,
} from "../../src/hub/status.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import { GiteaStatusWriter } from "../../src/status/gitea.js";
import { GithubStatusWriter } from "../../src/status/github.js";
import { type FakeForge, startGiteaForge } from "../helpers/forge-openapi.js";
import { ManualClock } from "./clock.js";
import { databasePath, elapse, NEXT_SHA, SHA, startGithub, startPublisher } from "./fixtures.js";

const forges: FakeForge[] = [];
afterEach(async () => {
  for (const forge of forges.splice(0)) {
    await forge.close();
    expect(forge.problems).toEqual([]);
  }
});

async function github(clock: ManualClock) {
  const started = await startGithub(() => clock.now());
  forges.push(started.forge);
  return started;
}

function posted(forge: FakeForge): [string, string, string | null][] {
  return forge.statuses.map((s) => [s.context, s.state, s.description]);
}

const applied: RevisionRecord = { sha: SHA, outcome: "applied", changedAssignments: ["web"] };

function nodes(count: number, converged: number, generation = 2): InstanceProgress[] {
  return Array.from({ length: count }, (_, i) => ({
    assignment: "web",
    node: `edge-${String(i + 1).padStart(4, "0")}`,
    generation,
    converged: i < converged,
  }));
}

describe("status publisher", () => {
  it("publisher - identical statuses are never posted twice, also after reopening the database", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const path = databasePath();
    const status: CommitStatus = {
      sha: SHA,
      context: FLEET_CONTEXT,
      state: "success",
      description: "3/3 nodes",
    };
    const first = startPublisher({ store: new SqliteStore(path), writers: [writer], clock });
    first.publisher.publish([status]);
    await elapse(clock, first.publisher, 1_000);
    first.publisher.publish([status]);
    await elapse(clock, first.publisher, 1_000);
    expect(forge.requests).toHaveLength(1);
    first.publisher.close();
    await first.store.close();

    const second = startPublisher({ store: new SqliteStore(path), writers: [writer], clock });
    second.publisher.publish([status]);
    await elapse(clock, second.publisher, 5_000);
    expect(forge.requests).toHaveLength(1);
    second.publisher.publish([{ ...status, description: "3/3 nodes, probes passing" }]);
    await elapse(clock, second.publisher, 1_000);
    expect(posted(forge)).toEqual([
      [FLEET_CONTEXT, "success", "3/3 nodes"],
      [FLEET_CONTEXT, "success", "3/3 nodes, probes passing"],
    ]);
    second.publisher.close();
  });

  it("publisher - a 500-node rollout publishing after every node becomes a handful of posts ending in success", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const { publisher } = startPublisher({ writers: [writer], clock });
    // One node converges every 10 ms for 5 s; the hub publishes after each report.
    for (let converged = 0; converged <= 500; converged++) {
      publisher.publish(revisionStatuses(applied, { instances: nodes(500, converged) }));
      await elapse(clock, publisher, 10);
    }
    await elapse(clock, publisher, 1_000);
    const fleet = posted(forge).filter(([context]) => context === FLEET_CONTEXT);
    const web = posted(forge).filter(([context]) => context === "steward/web");
    // 5 s of updates with a 1 s debounce: about one post per second per context, not 501.
    expect(fleet.length).toBeGreaterThanOrEqual(2);
    expect(fleet.length).toBeLessThanOrEqual(7);
    expect(web.length).toBe(fleet.length);
    expect(fleet[0]).toEqual([
      FLEET_CONTEXT,
      "pending",
      expect.stringMatching(/^\d+\/500 nodes at generation 2$/),
    ]);
    expect(fleet.at(-1)).toEqual([FLEET_CONTEXT, "success", "500/500 nodes at generation 2, probes passing"]);
    publisher.close();
  });

  it("publisher - a rollout goes pending, then success, and says so on every context", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const { publisher } = startPublisher({ writers: [writer], clock });
    const revision: RevisionRecord = { sha: SHA, outcome: "applied", changedAssignments: ["web", "db"] };
    const instances = (webDone: number, dbDone: boolean): InstanceProgress[] => [
      ...nodes(3, webDone, 7),
      { assignment: "db", node: "edge-0001", generation: 3, converged: dbDone },
    ];
    for (const [webDone, dbDone] of [
      [0, false],
      [2, true],
      [3, true],
    ] as const) {
      publisher.publish(
        revisionStatuses(revision, {
          instances: instances(webDone, dbDone),
          publicUrl: "https://hub.example/",
        }),
      );
      await elapse(clock, publisher, 1_000);
    }
    expect(posted(forge)).toEqual([
      [FLEET_CONTEXT, "pending", "0/4 instances converged"],
      ["steward/db", "pending", "0/1 node at generation 3"],
      ["steward/web", "pending", "0/3 nodes at generation 7"],
      [FLEET_CONTEXT, "pending", "3/4 instances converged"],
      ["steward/db", "success", "1/1 node at generation 3, probes passing"],
      ["steward/web", "pending", "2/3 nodes at generation 7"],
      [FLEET_CONTEXT, "success", "4/4 instances converged, probes passing"],
      ["steward/web", "success", "3/3 nodes at generation 7, probes passing"],
    ]);
    expect(new Set(forge.statuses.map((s) => s.targetUrl))).toEqual(
      new Set([`https://hub.example/revisions/${SHA}`]),
    );
    publisher.close();
  });

  it("publisher - a failed rollout names the condition, the node and the attempt", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const { publisher } = startPublisher({ writers: [writer], clock });
    publisher.publish(
      revisionStatuses(applied, {
        instances: nodes(3, 1),
        failures: [
          {
            assignment: "web",
            node: "edge-0003",
            condition: "Stuck",
            attemptId: "01J9ZQ4T7V8W9X0Y1Z2A3B4C5E",
            message: "registry unreachable",
          },
          {
            assignment: "web",
            node: "edge-0002",
            condition: "Blocked",
            attemptId: "01J9ZQ4T7V8W9X0Y1Z2A3B4C5D",
            message: "image digest sha256:ab12 does not exist",
          },
        ],
      }),
    );
    await elapse(clock, publisher, 1_000);
    const expected =
      "Blocked on edge-0002 (+1 more), attempt 01J9ZQ4T7V8W9X0Y1Z2A3B4C5D: image digest sha256:ab12 does not exist";
    expect(posted(forge)).toEqual([
      [FLEET_CONTEXT, "failure", expected],
      ["steward/web", "failure", expected],
    ]);
    publisher.close();
  });

  it("publisher - an invalid revision gets error with file:line of the first diagnostic", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const { publisher } = startPublisher({ writers: [writer], clock });
    const invalid: RevisionRecord = {
      sha: SHA,
      outcome: "invalid",
      changedAssignments: [],
      diagnostics: [
        {
          severity: "error",
          code: "schema/pattern",
          file: "assignments/web.yaml",
          line: 14,
          column: 7,
          message: 'spec.resources[2].mode must match ^0[0-7]{3}$ (got "755")',
        },
        {
          severity: "error",
          code: "node/undeclared",
          file: "assignments/api.yaml",
          line: 3,
          column: 5,
          message: 'node "edge-3" is not declared',
        },
      ],
    };
    publisher.publish(revisionStatuses(invalid, { instances: [] }));
    await elapse(clock, publisher, 1_000);
    expect(posted(forge)).toEqual([
      [FLEET_CONTEXT, "error", 'invalid (+1 more): assignments/api.yaml:3: node "edge-3" is not declared'],
    ]);
    publisher.close();
  });

  it("publisher - a superseded commit ends with a final status naming its successor", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const { publisher } = startPublisher({ writers: [writer], clock });
    const pending = revisionStatuses(applied, { instances: nodes(3, 1) });
    publisher.publish(pending);
    await elapse(clock, publisher, 1_000);
    publisher.publish(
      revisionStatuses({ ...applied, supersededBy: NEXT_SHA }, { instances: [], previous: pending }),
    );
    await elapse(clock, publisher, 1_000);
    expect(posted(forge).slice(2)).toEqual([
      [FLEET_CONTEXT, "error", "superseded by 89e6c98d9288 before it converged"],
      ["steward/web", "error", "superseded by 89e6c98d9288 before it converged"],
    ]);
    publisher.close();
  });

  it("publisher - statuses desired but not acknowledged before a restart are posted after it", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const path = databasePath();
    await forge.down();
    const before = startPublisher({ store: new SqliteStore(path), writers: [writer], clock });
    before.publisher.publish([
      { sha: SHA, context: FLEET_CONTEXT, state: "success", description: "3/3 nodes" },
    ]);
    await elapse(clock, before.publisher, 1_000);
    expect(before.health).toMatchObject([{ failing: true, reason: "ForgeUnavailable" }]);
    before.publisher.close();
    await before.store.close();

    await forge.up();
    const after = startPublisher({ store: new SqliteStore(path), writers: [writer], clock });
    await elapse(clock, after.publisher, 1_000);
    expect(posted(forge)).toEqual([[FLEET_CONTEXT, "success", "3/3 nodes"]]);
    expect(await after.store.statuses.forRevision(SHA)).toMatchObject([
      { provider: writer.name, desired: { state: "success" }, posted: { state: "success" }, failures: 0 },
    ]);
    after.publisher.close();
  });

  it("publisher - a refused status is held for the slow cadence without blocking the others", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const { publisher, health } = startPublisher({ writers: [writer], clock });
    const refused: CommitStatus = { sha: SHA, context: FLEET_CONTEXT, state: "pending", description: "0/1" };
    const other: CommitStatus = {
      sha: NEXT_SHA,
      context: FLEET_CONTEXT,
      state: "pending",
      description: "0/1",
    };
    forge.failNext({ kind: "refuse" });
    publisher.publish([refused, other]);
    await elapse(clock, publisher, 1_000);
    expect(forge.requests.map((r) => [r.params.sha, r.answered])).toEqual([
      [SHA, 422],
      [NEXT_SHA, 201],
    ]);
    expect(health).toMatchObject([{ failing: true, reason: "Rejected" }]);
    // The hub keeps publishing the same status; it is not hammered at the forge.
    for (let i = 0; i < 10; i++) {
      publisher.publish([refused]);
      await elapse(clock, publisher, 10_000);
    }
    expect(forge.requests).toHaveLength(2);
    await elapse(clock, publisher, 5 * 60_000);
    expect(forge.requests.map((r) => r.answered)).toEqual([422, 201, 201]);
    expect(health).toMatchObject([{ failing: true }, { failing: false }]);
    publisher.close();
  });

  it("publisher - a refused token pauses the destination instead of trying every status", async () => {
    const clock = new ManualClock();
    const { forge } = await github(clock);
    const writer = new GithubStatusWriter({
      owner: "acme",
      repo: "fleet",
      baseUrl: forge.url,
      auth: { token: "ghp_revoked000000000000000000000000000000" },
      now: () => clock.now(),
    });
    const { publisher, health } = startPublisher({ writers: [writer], clock });
    publisher.publish(
      ["web", "db", "api"].map((name) => ({
        sha: SHA,
        context: `steward/${name}`,
        state: "pending" as const,
        description: "0/1",
      })),
    );
    await elapse(clock, publisher, 1_000);
    expect(forge.requests.map((r) => r.answered)).toEqual([401]);
    expect(health).toMatchObject([
      { failing: true, reason: "Unauthorized", message: expect.stringMatching(/tokenEnv/) },
    ]);
    await elapse(clock, publisher, 4 * 60_000);
    expect(forge.requests).toHaveLength(1);
    await elapse(clock, publisher, 60_000);
    expect(forge.requests.length).toBeGreaterThan(1);
    publisher.close();
  });

  it("publisher - one destination being down never delays another", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await github(clock);
    const gitea = await startGiteaForge({ token: "gitea-token-0000", now: () => clock.now() });
    forges.push(gitea);
    const giteaWriter = new GiteaStatusWriter({
      owner: "acme",
      repo: "fleet",
      url: gitea.url,
      token: "gitea-token-0000",
    });
    const { publisher, health } = startPublisher({ writers: [writer, giteaWriter], clock });
    await forge.down();
    publisher.publish([{ sha: SHA, context: FLEET_CONTEXT, state: "pending", description: "1/2" }]);
    await elapse(clock, publisher, 1_000);
    publisher.publish([{ sha: SHA, context: FLEET_CONTEXT, state: "success", description: "2/2" }]);
    await elapse(clock, publisher, 1_000);
    expect(posted(gitea)).toEqual([
      [FLEET_CONTEXT, "pending", "1/2"],
      [FLEET_CONTEXT, "success", "2/2"],
    ]);
    expect(health.map((h) => [h.provider, h.failing])).toEqual([[writer.name, true]]);
    publisher.close();
  });
});
