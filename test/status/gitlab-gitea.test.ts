import { afterEach, describe, expect, it } from "vitest";
import type { CommitStatus, StatusWriter } from "../../src/hub/status.js";
import { GiteaStatusWriter } from "../../src/status/gitea.js";
import { GitlabStatusWriter } from "../../src/status/gitlab.js";
import { type FakeForge, startGiteaForge, startGitlabForge } from "../helpers/forge-openapi.js";
import { failureOf, SHA } from "./fixtures.js";

const TOKEN = "s3cr3t-forge-token-123456";

let forge: FakeForge | undefined;
afterEach(async () => {
  await forge?.close();
  expect(forge?.problems ?? []).toEqual([]);
  forge = undefined;
});

interface Case {
  forge: string;
  start(options?: { rejectSameState?: boolean }): Promise<FakeForge>;
  writer(url: string, token?: string): StatusWriter;
  path: string;
  auth(headers: Record<string, unknown>): unknown;
  expectedAuth: string;
  /** Our state → the forge's word for it. */
  states: Record<CommitStatus["state"], string>;
  contextField: string;
  limit: number;
}

const cases: Case[] = [
  {
    forge: "gitlab",
    start: (options) => startGitlabForge({ token: TOKEN, ...options }),
    writer: (url, token = TOKEN) => new GitlabStatusWriter({ project: "infra/fleet", url, token }),
    path: `/api/v4/projects/infra%2Ffleet/statuses/${SHA}`,
    auth: (headers) => headers["private-token"],
    expectedAuth: TOKEN,
    states: { pending: "running", success: "success", failure: "failed", error: "failed" },
    contextField: "name",
    limit: 255,
  },
  {
    forge: "gitea",
    start: () => startGiteaForge({ token: TOKEN }),
    writer: (url, token = TOKEN) => new GiteaStatusWriter({ owner: "infra", repo: "fleet", url, token }),
    path: `/api/v1/repos/infra/fleet/statuses/${SHA}`,
    auth: (headers) => headers.authorization,
    expectedAuth: `token ${TOKEN}`,
    states: { pending: "pending", success: "success", failure: "failure", error: "error" },
    contextField: "context",
    limit: 255,
  },
];

describe.each(cases)("$forge status", (c) => {
  it(`${c.forge} status - posts each state to the documented route with the forge's field names`, async () => {
    forge = await c.start();
    const writer = c.writer(forge.url);
    const states = ["pending", "success", "failure", "error"] as const;
    for (const state of states)
      await writer.write({
        sha: SHA,
        context: `steward/${state}`,
        state,
        description: `now ${state}`,
        targetUrl: "https://hub.example/revisions/abc",
      });
    expect(forge.requests.map((r) => [r.method, r.path, r.answered])).toEqual(
      states.map(() => ["POST", c.path, 201]),
    );
    expect(c.auth(forge.requests[0]!.headers)).toBe(c.expectedAuth);
    expect(forge.requests[0]?.body).toEqual({
      state: c.states.pending,
      [c.contextField]: "steward/pending",
      description: "now pending",
      target_url: "https://hub.example/revisions/abc",
    });
    expect(forge.statuses.map((s) => [s.context, s.state])).toEqual(
      states.map((state) => [`steward/${state}`, c.states[state]]),
    );
  });

  it(`${c.forge} status - descriptions are cut to ${c.limit} characters`, async () => {
    forge = await c.start();
    await c.writer(forge.url).write({
      sha: SHA,
      context: "steward/fleet",
      state: "failure",
      description: "word ".repeat(100),
    });
    const description = (forge.requests[0]!.body as { description: string }).description;
    expect(Array.from(description).length).toBeLessThanOrEqual(c.limit);
    expect(description).toMatch(/word…$/);
  });

  it(`${c.forge} status - failures are classified: 429 waits Retry-After, 500 and refusal are transient, 401 permanent`, async () => {
    forge = await c.start();
    const writer = c.writer(forge.url);
    const pending: CommitStatus = {
      sha: SHA,
      context: "steward/fleet",
      state: "pending",
      description: "1/2",
    };
    const write = () => failureOf(writer.write(pending));
    forge.failNext({ kind: "rate-limit-429", retryAfterSeconds: 12 }, { kind: "server-error" });
    const limited = await write();
    expect([limited.failureClass, limited.retryAfterMs]).toEqual(["rate-limited", 12_000]);
    const broken = await write();
    expect([broken.failureClass, broken.reason, broken.httpStatus]).toEqual([
      "transient",
      "ForgeUnavailable",
      500,
    ]);
    const denied = await failureOf(c.writer(forge.url, "wrong-token-000000").write(pending));
    expect([denied.failureClass, denied.reason]).toEqual(["permanent", "Unauthorized"]);
    await forge.down();
    const refused = await write();
    expect([refused.failureClass, refused.reason]).toEqual(["transient", "ForgeUnavailable"]);
    expect(refused.message).toMatch(/unreachable/);
    expect(JSON.stringify([limited, broken, denied, refused].map((e) => e.message))).not.toContain(TOKEN);
  });
});

describe("gitlab status", () => {
  it("gitlab status - a progress update in the state the status is already in counts as written", async () => {
    forge = await startGitlabForge({ token: TOKEN, rejectSameState: true });
    const writer = new GitlabStatusWriter({ project: "42", url: `${forge.url}/api/v4`, token: TOKEN });
    await writer.write({ sha: SHA, context: "steward/fleet", state: "pending", description: "1/3" });
    await writer.write({ sha: SHA, context: "steward/fleet", state: "pending", description: "2/3" });
    await writer.write({ sha: SHA, context: "steward/fleet", state: "success", description: "3/3" });
    expect(forge.requests.map((r) => [r.path, r.answered])).toEqual([
      [`/api/v4/projects/42/statuses/${SHA}`, 201],
      [`/api/v4/projects/42/statuses/${SHA}`, 400],
      [`/api/v4/projects/42/statuses/${SHA}`, 201],
    ]);
    expect(forge.statuses.map((s) => s.state)).toEqual(["running", "success"]);
  });
});
