import { afterEach, describe, expect, it } from "vitest";
import { type FakeForge, startGithubForge } from "../helpers/forge-openapi.js";

const TOKEN = "ghs_test_token";
const auth = { authorization: `token ${TOKEN}`, "content-type": "application/json" };

let forge: FakeForge | undefined;
afterEach(async () => {
  await forge?.close();
  forge = undefined;
});

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = auth) {
  const response = await fetch(`${forge!.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return {
    status: response.status,
    link: response.headers.get("link"),
    body: (await response.json()) as unknown,
  };
}

// The comment routes of the fake GitHub must refuse what GitHub refuses, or the Action's test proves nothing.
describe("fake github comments", () => {
  it("fake github comments - create, list by page with a Link header, update; off-contract requests are refused", async () => {
    forge = await startGithubForge({ token: TOKEN });
    for (let i = 0; i < 3; i++) {
      const created = await call("POST", "/repos/acme/fleet/issues/7/comments", { body: `note ${i}` });
      expect(created).toMatchObject({ status: 201, body: { id: i + 1, body: `note ${i}` } });
    }
    const first = await call("GET", "/repos/acme/fleet/issues/7/comments?per_page=2");
    expect((first.body as { body: string }[]).map((c) => c.body)).toEqual(["note 0", "note 1"]);
    expect(first.link).toBe(
      `<${forge.url}/repos/acme/fleet/issues/7/comments?per_page=2&page=2>; rel="next", <${forge.url}/repos/acme/fleet/issues/7/comments?per_page=2&page=2>; rel="last"`,
    );
    const second = await call("GET", "/repos/acme/fleet/issues/7/comments?per_page=2&page=2");
    expect((second.body as { body: string }[]).map((c) => c.body)).toEqual(["note 2"]);
    expect(await call("PATCH", "/repos/acme/fleet/issues/comments/2", { body: "edited" })).toMatchObject({
      status: 200,
      body: { id: 2, body: "edited" },
    });
    expect(forge.comments.map((c) => c.body)).toEqual(["note 0", "edited", "note 2"]);
    expect(forge.problems).toEqual([]);

    expect((await call("PATCH", "/repos/acme/fleet/issues/comments/99", { body: "x" })).status).toBe(404);
    expect((await call("GET", "/repos/acme/fleet/issues/7/comments?per_page=many")).status).toBe(422);
    expect(
      (await call("POST", "/repos/acme/fleet/issues/7/comments", { text: "no body field" })).status,
    ).toBe(422);
    expect((await call("POST", "/repos/acme/fleet/issues/7/comments", { body: "x" }, {})).status).toBe(401);
    expect(forge.problems).toEqual([
      expect.stringMatching(/^issues\/list-comments: query parameter per_page=many: /),
      expect.stringMatching(/^issues\/create-comment: invalid body: .*body/),
    ]);
    expect(forge.comments).toHaveLength(3);
  });
});
