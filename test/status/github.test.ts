import { generateKeyPairSync } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { CommitStatus } from "../../src/hub/status.js";
import { GithubStatusWriter } from "../../src/status/github.js";
import { type FakeForge, startGithubForge } from "../helpers/forge-openapi.js";
import { ManualClock } from "./clock.js";
import { failureOf, SHA, startGithub, startPublisher, TOKEN } from "./fixtures.js";

let forge: FakeForge | undefined;
afterEach(async () => {
  await forge?.close();
  expect(forge?.problems ?? []).toEqual([]);
  forge = undefined;
});

function status(state: CommitStatus["state"], description: string): CommitStatus {
  return { sha: SHA, context: "steward/fleet", state, description };
}

async function setup(now: () => number = Date.now) {
  const started = await startGithub(now);
  forge = started.forge;
  return started;
}

describe("github status", () => {
  it("github status - posts to the documented route with the token and a description cut to 140", async () => {
    const { forge, writer } = await setup();
    const long = `Blocked on edge-3, attempt 01J9ZQ4T7V8W9X0Y1Z2A3B4C5D: ${"the package repository answered with an unexpected checksum ".repeat(4)}`;
    await writer.write({ ...status("failure", long), targetUrl: "https://hub.example/revisions/x" });
    const [request] = forge.requests;
    expect(request?.operationId).toBe("repos/create-commit-status");
    expect(request?.method).toBe("POST");
    expect(request?.path).toBe(`/repos/acme/fleet/statuses/${SHA}`);
    expect(request?.headers.authorization).toBe(`token ${TOKEN}`);
    const body = request?.body as Record<string, string>;
    expect(body.state).toBe("failure");
    expect(body.context).toBe("steward/fleet");
    expect(body.target_url).toBe("https://hub.example/revisions/x");
    expect(Array.from(body.description!).length).toBeLessThanOrEqual(140);
    // Cut cleanly: a prefix of the original ending at a word boundary, then the ellipsis.
    const kept = body.description!.slice(0, -1);
    expect(body.description!.endsWith("…")).toBe(true);
    expect(long.startsWith(kept)).toBe(true);
    expect(long[kept.length]).toBe(" ");
    expect(forge.statuses).toEqual([
      {
        sha: SHA,
        context: "steward/fleet",
        state: "failure",
        description: body.description,
        targetUrl: "https://hub.example/revisions/x",
      },
    ]);
  });

  it("github status - never sends a secret found in a description", async () => {
    const { forge, writer } = await setup();
    await writer.write(
      status("failure", `fetch https://deploy:hunter2@git.example/x failed; token=${TOKEN}`),
    );
    const body = JSON.stringify(forge.requests[0]?.body);
    expect(body).not.toContain("hunter2");
    expect(body).not.toContain(TOKEN);
    expect(body).toContain("https://***@git.example/x");
  });

  it("github status - 401 is permanent, names the fix and does not leak the token", async () => {
    forge = await startGithubForge({ token: "ghp_the_right_one_000000000000000000000" });
    const writer = new GithubStatusWriter({
      owner: "acme",
      repo: "fleet",
      baseUrl: forge.url,
      auth: { token: TOKEN },
    });
    const failure = await failureOf(writer.write(status("success", "ok")));
    expect(failure.failureClass).toBe("permanent");
    expect(failure.reason).toBe("Unauthorized");
    expect(failure.message).toMatch(/HTTP 401.*Bad credentials.*tokenEnv/);
    expect(`${failure.message} ${JSON.stringify(failure.data)}`).not.toContain(TOKEN);
  });

  it("github status - a 5xx is transient and a 403 rate limit carries the wait until X-RateLimit-Reset", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await setup(() => clock.now());
    forge.failNext({ kind: "server-error", status: 502 }, { kind: "rate-limit-403", resetInSeconds: 90 });
    const outage = await failureOf(writer.write(status("pending", "1/3")));
    expect([outage.failureClass, outage.reason, outage.httpStatus]).toEqual([
      "transient",
      "ForgeUnavailable",
      502,
    ]);
    const limited = await failureOf(writer.write(status("pending", "1/3")));
    expect([limited.failureClass, limited.reason, limited.retryAfterMs]).toEqual([
      "rate-limited",
      "RateLimited",
      90_000,
    ]);
  });

  it("github status - a 429 with Retry-After delays the next post by exactly that long on the injected clock", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await setup(() => clock.now());
    const { publisher, health } = startPublisher({ writers: [writer], clock });
    forge.failNext({ kind: "rate-limit-429", retryAfterSeconds: 30 });
    publisher.publish([status("pending", "1/3 nodes at generation 2")]);
    clock.advance(1_000);
    await publisher.whenIdle();
    expect(forge.requests.map((r) => r.answered)).toEqual([429]);
    clock.advance(30_000 - 1);
    await publisher.whenIdle();
    expect(forge.requests).toHaveLength(1);
    clock.advance(1);
    await publisher.whenIdle();
    expect(forge.requests.map((r) => r.answered)).toEqual([429, 201]);
    expect(forge.statuses.map((s) => s.description)).toEqual(["1/3 nodes at generation 2"]);
    // A 30 s wait is routine: no StatusWriteFailing for it.
    expect(health).toEqual([]);
    publisher.close();
  });

  it("github status - an outage is reported, the latest state is posted once when the forge returns, then recovery", async () => {
    const clock = new ManualClock();
    const { forge, writer } = await setup(() => clock.now());
    const { publisher, health } = startPublisher({ writers: [writer], clock });
    await forge.down();
    publisher.publish([status("pending", "1/3 nodes at generation 2")]);
    clock.advance(1_000);
    await publisher.whenIdle();
    expect(health).toMatchObject([{ provider: writer.name, failing: true, reason: "ForgeUnavailable" }]);
    expect((health[0] as { message: string }).message).toMatch(/unreachable/);
    const since = health[0]!.since;
    // The rollout goes on while the forge is away; only the latest state matters.
    publisher.publish([status("pending", "2/3 nodes at generation 2")]);
    clock.advance(5_000);
    await publisher.whenIdle();
    publisher.publish([status("success", "3/3 nodes at generation 2, probes passing")]);
    clock.advance(60_000);
    await publisher.whenIdle();
    expect(forge.requests).toHaveLength(0);
    await forge.up();
    clock.advance(5 * 60_000);
    await publisher.whenIdle();
    expect(forge.statuses.map((s) => [s.state, s.description])).toEqual([
      ["success", "3/3 nodes at generation 2, probes passing"],
    ]);
    expect(health).toHaveLength(2);
    expect(health[1]).toMatchObject({ provider: writer.name, failing: false, since });
    // Nothing more to say: the same state published again is not posted again.
    publisher.publish([status("success", "3/3 nodes at generation 2, probes passing")]);
    clock.advance(10_000);
    await publisher.whenIdle();
    expect(forge.requests).toHaveLength(1);
    publisher.close();
  });

  it("github status - a GitHub App's JWT is exchanged for an installation token that is reused", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const app = { appId: 4242, installationId: 77 };
    forge = await startGithubForge({
      app: { ...app, publicKey: publicKey.export({ type: "spki", format: "pem" }).toString() },
    });
    const writer = new GithubStatusWriter({
      owner: "acme",
      repo: "fleet",
      baseUrl: forge.url,
      auth: { app: { ...app, privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString() } },
    });
    await writer.write(status("pending", "0/1 nodes at generation 1"));
    await writer.write(status("success", "1/1 nodes at generation 1, probes passing"));
    expect(forge.requests.map((r) => [r.operationId, r.answered])).toEqual([
      ["apps/create-installation-access-token", 201],
      ["repos/create-commit-status", 201],
      ["repos/create-commit-status", 201],
    ]);
    expect(forge.requests[0]?.params).toEqual({ installation_id: 77 });
    expect(forge.requests[0]?.headers.authorization).toMatch(/^Bearer eyJ/);
    expect(forge.requests[1]?.headers.authorization).toMatch(/^token ghs_/);
    expect(forge.statuses.map((s) => s.state)).toEqual(["pending", "success"]);
  });
});
