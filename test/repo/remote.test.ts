import { createHash } from "node:crypto";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { credentialsFromEnv, parseLocation } from "../../src/repo/git.js";
import { startSyncLoop } from "../../src/repo/loop.js";
import type { SyncOutcome } from "../../src/repo/syncer.js";
import { removeTempDirs } from "../helpers/git.js";
import { type GitHttpServer, serveGit } from "../helpers/git-http.js";
import { assignmentYaml, smallFleet } from "./fleet.js";
import { type Harness, harness } from "./harness.js";

const AUTH = { username: "fleet-bot", password: "s3cret-token-value" };

async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("remote", () => {
  let h: Harness;
  let revived: GitHttpServer | undefined;
  afterEach(async () => {
    await h?.close();
    await revived?.close();
    revived = undefined;
  });
  afterAll(removeTempDirs);

  it("remote - credentials from the environment are used; refused ones fail clearly, never echoed, last good kept", async () => {
    h = await harness("http", smallFleet(), { auth: AUTH });
    const good = h.repo.rev();
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied" });
    expect(h.server!.requests.some((r) => r.authorized && r.path.endsWith("git-upload-pack"))).toBe(true);

    h.commit("db v2", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
    });
    const wrong = h.restart({ credentials: { username: AUTH.username, password: "wrong-password" } });
    const error = (await wrong.sync().then(
      () => new Error("the sync should have failed"),
      (e: unknown) => e,
    )) as Error & { code: string };
    expect(error).toMatchObject({ code: "E_REMOTE_AUTH" });
    expect(error.message).toContain("refused the credentials");
    expect(error.message).toContain("STEWARD_GIT_TOKEN");
    expect(error.message).not.toContain("wrong-password");

    const none = h.restart({ credentials: undefined });
    await expect(none.sync()).rejects.toMatchObject({
      code: "E_REMOTE_AUTH",
      message: expect.stringContaining("requires authentication"),
    });

    expect(await h.store.syncState("main")).toMatchObject({ lastGood: good });
    expect((await h.store.currentInstances()).get("db@db-1")).toMatchObject({ generation: 1 });
    const [event] = await h.store.openEvents("main");
    expect(event).toMatchObject({ kind: "fetch-failed", lastGood: good });
    expect(event?.message).not.toContain("wrong-password");

    expect(await h.syncer.sync()).toMatchObject({ kind: "applied" });
    expect(await h.store.openEvents("main")).toEqual([]);
  });

  it("remote - credentials come from STEWARD_GIT_TOKEN or STEWARD_GIT_USERNAME/PASSWORD, and never from the URL", () => {
    expect(credentialsFromEnv({ STEWARD_GIT_TOKEN: "t0k" })).toEqual({
      username: "x-access-token",
      password: "t0k",
    });
    expect(credentialsFromEnv({ STEWARD_GIT_TOKEN: "t0k", STEWARD_GIT_USERNAME: "oauth2" })).toEqual({
      username: "oauth2",
      password: "t0k",
    });
    expect(credentialsFromEnv({ STEWARD_GIT_USERNAME: "u", STEWARD_GIT_PASSWORD: "p" })).toEqual({
      username: "u",
      password: "p",
    });
    expect(credentialsFromEnv({})).toBeUndefined();
    let message = "";
    try {
      parseLocation("https://bot:hunter2@git.example.test/fleet.git", "/");
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("must not carry credentials");
    expect(message).toContain("https://git.example.test/fleet.git");
    expect(message).not.toContain("hunter2");
    expect(() => parseLocation("ssh://git@example.test/fleet.git", "/")).toThrow(/not supported/);
  });

  it("remote - an unreachable remote fails each sync, the loop backs off and retries, and recovers when it returns", async () => {
    h = await harness("http", smallFleet());
    const good = h.repo.rev();
    await h.syncer.sync();
    const port = h.server!.port;
    await h.server!.close();
    const next = h.commit("db v2", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
    });

    const errors: { code: string; failures: number; delay: number }[] = [];
    const outcomes: SyncOutcome[] = [];
    const loop = startSyncLoop({
      syncer: h.syncer,
      intervalMs: 60_000,
      backoff: { initialMs: 20, maxMs: 200, jitter: 0 },
      onError: (error, failures, delay) =>
        errors.push({ code: (error as { code: string }).code, failures, delay }),
      onOutcome: (outcome) => outcomes.push(outcome),
    });
    try {
      await until(() => errors.length >= 3, "three failed syncs");
      expect(errors.slice(0, 3)).toEqual([
        { code: "E_REMOTE_UNREACHABLE", failures: 1, delay: 20 },
        { code: "E_REMOTE_UNREACHABLE", failures: 2, delay: 40 },
        { code: "E_REMOTE_UNREACHABLE", failures: 3, delay: 80 },
      ]);
      expect(await h.store.syncState("main")).toMatchObject({ lastGood: good });
      expect((await h.store.currentInstances()).get("db@db-1")).toMatchObject({ generation: 1 });
      expect(await h.store.openEvents("main")).toEqual([
        expect.objectContaining({
          kind: "fetch-failed",
          lastGood: good,
          message: expect.stringContaining("ECONNREFUSED"),
        }),
      ]);

      revived = await serveGit({ root: join(h.remote!.dir, ".."), port });
      await until(() => outcomes.length > 0, "a successful sync");
      expect(outcomes[0]).toMatchObject({ kind: "applied", head: next });
      expect(loop.failures).toBe(0);
      expect((await h.store.currentInstances()).get("db@db-1")).toMatchObject({ generation: 2 });
      expect(await h.store.openEvents("main")).toEqual([]);
    } finally {
      await loop.stop();
    }
  });

  it("remote - a later fetch transfers only what is new", async () => {
    const files: Record<string, string> = smallFleet();
    for (let i = 0; i < 60; i++)
      files[`assignments/app-${i}.yaml`] = assignmentYaml(`app-${i}`, {
        nodes: ["db-1"],
        // Incompressible content, so the first pack is clearly larger than one file's change.
        content: `${createHash("sha512").update(`app ${i}`).digest("hex").repeat(3)}\n`,
      });
    h = await harness("http", files);
    await h.syncer.sync();
    const packBytes = () =>
      h.server!.requests.filter((r) => r.path.endsWith("git-upload-pack")).map((r) => r.responseBytes);
    const [first] = packBytes();
    h.commit("app-7 v2", {
      "assignments/app-7.yaml": assignmentYaml("app-7", { nodes: ["db-1"], content: "v2\n" }),
    });
    expect(await h.syncer.sync()).toMatchObject({
      kind: "applied",
      generations: [{ instanceKey: "app-7@db-1", generation: 2 }],
    });
    const second = packBytes().at(-1)!;
    expect(first).toBeGreaterThan(20_000);
    expect(second).toBeLessThan(first! / 5);
  });

  it("remote - a corrupt cache is dropped and fetched again within the same sync", async () => {
    h = await harness("http", smallFleet());
    await h.syncer.sync();
    const mirror = join(h.state, "git", readdirSync(join(h.state, "git"))[0]!);
    // The indexes still claim the objects; the packs behind them are garbage.
    for (const name of readdirSync(join(mirror, "objects", "pack")))
      if (name.endsWith(".pack")) writeFileSync(join(mirror, "objects", "pack", name), "garbage".repeat(100));
    h.commit("db v2", {
      "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content: "db v2\n" }),
    });
    const warnings: string[] = [];
    const log = { info() {}, error() {}, warn: (_: object, message: string) => warnings.push(message) };
    const fresh = h.restart({ log });
    expect(await fresh.sync()).toMatchObject({
      kind: "applied",
      generations: [{ instanceKey: "db@db-1", generation: 2 }],
    });
    expect(warnings).toContain("the git cache is corrupt; fetching it again");
  });
});
