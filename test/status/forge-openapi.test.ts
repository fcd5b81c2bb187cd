import { afterEach, describe, expect, it } from "vitest";
import {
  type FakeForge,
  startGiteaForge,
  startGithubForge,
  startGitlabForge,
} from "../helpers/forge-openapi.js";

const SHA = "3f786850e387550fdab836ed7e6dc881de23001b";

let forge: FakeForge | undefined;
afterEach(async () => {
  await forge?.close();
  forge = undefined;
});

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

// The fake is only worth its tests if it refuses what the real forge refuses.
describe("forge-openapi", () => {
  it("forge-openapi - GitHub: an unknown route is 404, a body off the schema 422, a missing token 401", async () => {
    forge = await startGithubForge({ token: "t0k3n-for-tests" });
    const unknown = await post(`${forge.url}/repos/acme/fleet/status/${SHA}`, { state: "success" });
    expect(unknown).toMatchObject({ status: 404, body: { message: "Not Found" } });
    const invalid = await post(
      `${forge.url}/repos/acme/fleet/statuses/${SHA}`,
      { state: "done", context: 7 },
      { authorization: "token t0k3n-for-tests" },
    );
    expect(invalid.status).toBe(422);
    expect(invalid.body.errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "state" }),
        expect.objectContaining({ field: "context" }),
      ]),
    );
    const wrongMethod = await fetch(`${forge.url}/repos/acme/fleet/statuses/${SHA}`, { method: "DELETE" });
    expect(wrongMethod.status).toBe(404);
    const anonymous = await post(`${forge.url}/repos/acme/fleet/statuses/${SHA}`, { state: "success" });
    expect(anonymous).toMatchObject({ status: 401, body: { message: "Bad credentials" } });
    const tooLong = await post(
      `${forge.url}/repos/acme/fleet/statuses/${SHA}`,
      { state: "success", description: "x".repeat(141) },
      { authorization: "token t0k3n-for-tests" },
    );
    expect(tooLong.status).toBe(422);
    expect(forge.problems).toEqual([
      `no operation for POST /repos/acme/fleet/status/${SHA}`,
      expect.stringMatching(/^repos\/create-commit-status: invalid body: .*state.*context/),
      `no operation for DELETE /repos/acme/fleet/statuses/${SHA}`,
    ]);
    expect(forge.statuses).toEqual([]);
  });

  it("forge-openapi - GitHub: path parameters are checked against their schemas", async () => {
    forge = await startGithubForge({});
    const response = await post(`${forge.url}/app/installations/not-a-number/access_tokens`, {});
    expect(response.status).toBe(404);
    expect(forge.problems).toEqual([expect.stringMatching(/installation_id=not-a-number/)]);
  });

  it("forge-openapi - GitLab and Gitea refuse bodies off their documented contracts", async () => {
    forge = await startGitlabForge({ token: "t0k3n-for-tests" });
    const gitlab = await post(`${forge.url}/api/v4/projects/7/statuses/${SHA}`, {
      state: "error",
      context: "x",
    });
    expect(gitlab).toMatchObject({ status: 400, body: { error: expect.stringMatching(/state/) } });
    await forge.close();
    forge = await startGiteaForge({ token: "t0k3n-for-tests" });
    const gitea = await post(`${forge.url}/api/v1/repos/o/r/statuses/${SHA}`, {
      state: "running",
      name: "x",
    });
    expect(gitea.status).toBe(422);
    const route = await post(`${forge.url}/api/v1/repos/o/r/statuses`, { state: "success" });
    expect(route.status).toBe(404);
    expect(forge.problems).toEqual([
      expect.stringMatching(/^gitea\/repoCreateStatus: invalid body: .*(state|name)/),
      "no route for POST /api/v1/repos/o/r/statuses",
    ]);
  });
});
