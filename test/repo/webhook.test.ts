import { createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { startSyncLoop } from "../../src/repo/loop.js";
import type { SyncOutcome } from "../../src/repo/syncer.js";
import { createWebhookHandler, type PushNotice } from "../../src/repo/webhook.js";
import { removeTempDirs } from "../helpers/git.js";
import { assignmentYaml, smallFleet } from "./fleet.js";
import { type Harness, harness } from "./harness.js";

const SECRET = "webhook-shared-secret";
const hmac = (body: string, secret = SECRET) => createHmac("sha256", secret).update(body).digest("hex");

async function serve(
  handler: ReturnType<typeof createWebhookHandler>,
): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhook`, server };
}

const push = JSON.stringify({ ref: "refs/heads/main", after: "a".repeat(40) });

interface Case {
  name: string;
  headers: Record<string, string>;
  body?: string;
  method?: string;
  status: number;
  synced: boolean;
  forge?: string;
}

const CASES: Case[] = [
  {
    name: "GitHub push with a valid X-Hub-Signature-256",
    headers: { "X-Hub-Signature-256": `sha256=${hmac(push)}`, "X-GitHub-Event": "push" },
    status: 202,
    synced: true,
    forge: "github",
  },
  {
    name: "GitHub push signed with another secret",
    headers: { "X-Hub-Signature-256": `sha256=${hmac(push, "other")}`, "X-GitHub-Event": "push" },
    status: 401,
    synced: false,
  },
  {
    name: "GitHub signature of a different body",
    headers: { "X-Hub-Signature-256": `sha256=${hmac(`${push} `)}`, "X-GitHub-Event": "push" },
    status: 401,
    synced: false,
  },
  {
    name: "GitHub ping",
    headers: { "X-Hub-Signature-256": `sha256=${hmac(push)}`, "X-GitHub-Event": "ping" },
    status: 200,
    synced: false,
  },
  {
    name: "GitLab push with the right X-Gitlab-Token",
    headers: { "X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook" },
    status: 202,
    synced: true,
    forge: "gitlab",
  },
  {
    name: "GitLab push with a wrong token",
    headers: { "X-Gitlab-Token": "guess", "X-Gitlab-Event": "Push Hook" },
    status: 401,
    synced: false,
  },
  {
    name: "Gitea push with a valid X-Gitea-Signature",
    headers: { "X-Gitea-Signature": hmac(push), "X-Gitea-Event": "push" },
    status: 202,
    synced: true,
    forge: "gitea",
  },
  {
    name: "Gitea push with a bad signature",
    headers: { "X-Gitea-Signature": hmac("tampered"), "X-Gitea-Event": "push" },
    status: 401,
    synced: false,
  },
  { name: "no signature at all", headers: { "X-GitHub-Event": "push" }, status: 401, synced: false },
  {
    name: "a push to another branch",
    headers: { "X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook" },
    body: JSON.stringify({ ref: "refs/heads/feature" }),
    status: 200,
    synced: false,
  },
  { name: "a GET", headers: {}, method: "GET", status: 405, synced: false },
];

describe("webhook", () => {
  let server: Server | undefined;
  let h: Harness | undefined;
  afterEach(async () => {
    server?.close();
    await h?.close();
    h = undefined;
  });
  afterAll(removeTempDirs);

  it.each(CASES)("webhook - $name → $status", async (c) => {
    const notices: PushNotice[] = [];
    const served = await serve(
      createWebhookHandler({ secret: SECRET, branch: "main", onPush: (n) => notices.push(n) }),
    );
    server = served.server;
    const init: RequestInit = {
      method: c.method ?? "POST",
      headers: { "Content-Type": "application/json", ...c.headers },
    };
    if ((c.method ?? "POST") === "POST") init.body = c.body ?? push;
    const response = await fetch(served.url, init);
    expect(response.status).toBe(c.status);
    const text = await response.text();
    expect(text).not.toContain(SECRET);
    expect(notices.length).toBe(c.synced ? 1 : 0);
    if (c.synced)
      expect(notices[0]).toEqual({ forge: c.forge, ref: "refs/heads/main", after: "a".repeat(40) });
  });

  it("webhook - a body over the limit is refused with 413 and triggers nothing", async () => {
    const notices: PushNotice[] = [];
    const served = await serve(
      createWebhookHandler({ secret: SECRET, maxBytes: 64, onPush: (n) => notices.push(n) }),
    );
    server = served.server;
    const body = JSON.stringify({ ref: "refs/heads/main", padding: "x".repeat(500) });
    const response = await fetch(served.url, {
      method: "POST",
      headers: { "X-Hub-Signature-256": `sha256=${hmac(body)}`, "X-GitHub-Event": "push" },
      body,
    });
    expect(response.status).toBe(413);
    expect(notices).toEqual([]);
  });

  it("webhook - a verified push makes the sync loop fetch the new commit at once", async () => {
    h = await harness("http", smallFleet());
    const outcomes: SyncOutcome[] = [];
    const loop = startSyncLoop({
      syncer: h.syncer,
      intervalMs: 3_600_000,
      onOutcome: (o) => outcomes.push(o),
    });
    const served = await serve(
      createWebhookHandler({ secret: SECRET, branch: "main", onPush: () => loop.trigger() }),
    );
    server = served.server;
    try {
      const wait = async (count: number) => {
        const deadline = Date.now() + 20_000;
        while (outcomes.length < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      };
      await wait(1);
      expect(outcomes[0]).toMatchObject({ kind: "applied" });
      const head = h.commit("db v2", {
        "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
      });
      const body = JSON.stringify({ ref: "refs/heads/main", after: head });
      const response = await fetch(served.url, {
        method: "POST",
        headers: { "X-Gitea-Signature": hmac(body), "X-Gitea-Event": "push" },
        body,
      });
      expect(response.status).toBe(202);
      await wait(2);
      expect(outcomes[1]).toMatchObject({
        kind: "applied",
        head,
        generations: [{ instanceKey: "db@db-1", generation: 2 }],
      });
    } finally {
      await loop.stop();
    }
  });
});
