import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import type { Resource } from "../../src/model/generated.js";
import { assignmentYaml, nodes } from "./helpers/fleet.js";
import { eventually, startSteward } from "./helpers/process.js";

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The guarded migration: it runs for a second, counts its runs, and says it is done with `creates`. */
const GUARDED: Resource = {
  kind: "command",
  name: "migrate",
  run: [
    "sh",
    "-c",
    'touch "$STEWARD_ROOT/srv/started"; sleep 1; echo ran >> "$STEWARD_ROOT/srv/runs"; touch "$STEWARD_ROOT/srv/done"',
  ],
  creates: "/srv/done",
};

/** A fleet repo (real git) whose one-shot `migration` counts its runs, on `nodeNames`. */
function fleetRepo(dir: string, migration = GUARDED, nodeNames = ["n1", "n2", "n3"]): string {
  const repo = join(dir, "fleet");
  mkdirSync(repo, { recursive: true });
  const files: Record<string, string> = {
    ...nodes(...nodeNames),
    "assignments/migrate.yaml": assignmentYaml("migrate", {
      nodes: nodeNames,
      rollout: { maxInFlight: 1 },
      resources: [{ kind: "directory", name: "srv", path: "/srv" }, migration],
    }),
  };
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(repo, path, ".."), { recursive: true });
    writeFileSync(join(repo, path), content);
  }
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
      cwd: repo,
      stdio: "pipe",
    });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "migrate");
  return repo;
}

describe("hub - restart", () => {
  it("hub - a hub killed with SIGKILL mid-rollout recovers its intents and attempts, and never runs a one-shot twice", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-restart-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const repo = fleetRepo(dir);
    const state = join(dir, "state");
    const root = join(dir, "root");
    const args = ["--state", state, "hub", "--repo", repo, "--root", root, "--listen", "127.0.0.1:0"];
    args.push("--lease", "3s", "--sync-interval", "1h", "--status", "none");
    const log = join(dir, "hub.log");

    const first = await startSteward(args, { cwd: dir, log });
    cleanups.push(() => void first.kill("SIGKILL"));
    // The first node's migration is running: kill the hub now, mid-rollout.
    const started = await eventually(
      () => ["n1", "n2", "n3"].find((n) => existsSync(join(root, n, "srv", "started"))),
      30_000,
      "a migration to start",
    );
    first.kill("SIGKILL");
    await new Promise((resolve) => first.once("exit", resolve));

    const store = new SqliteStore(join(state, "hub.db"));
    cleanups.push(() => store.close());
    const inFlight = await store.attempts.ofInstance(`migrate@${started}`);
    expect(inFlight).toHaveLength(1);
    expect(inFlight[0]!.status).toBe("dispatched");
    const others = ["n1", "n2", "n3"].filter((n) => n !== started);
    for (const node of others) expect(await store.attempts.ofInstance(`migrate@${node}`)).toEqual([]);

    const second = await startSteward(args, { cwd: dir, log });
    cleanups.push(() => void second.kill("SIGKILL"));
    await eventually(
      async () => {
        for (const n of ["n1", "n2", "n3"])
          if ((await store.intents.get(`migrate@${n}`, 1))?.status !== "converged") return undefined;
        return true;
      },
      60_000,
      "every instance to converge after the restart",
    );
    second.kill("SIGTERM");
    expect(await new Promise((resolve) => second.once("exit", (code) => resolve(code)))).toBe(0);

    // Each one-shot ran exactly once, including the one the kill interrupted.
    for (const node of ["n1", "n2", "n3"])
      expect([node, readFileSync(join(root, node, "srv", "runs"), "utf8")]).toEqual([node, "ran\n"]);
    // The interrupted attempt was treated as ambiguous and settled by a fresh report, not replayed:
    // any later attempt came after that report.
    const [interrupted, ...later] = await store.attempts.ofInstance(`migrate@${started}`);
    expect(interrupted).toMatchObject({ id: inFlight[0]!.id, reason: "LeaseExpired", settledBy: "report" });
    for (const attempt of later) expect(attempt.createdAt >= interrupted!.finishedAt!).toBe(true);
    const lines = readFileSync(log, "utf8")
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l));
    expect(lines.some((l) => l.attemptId === interrupted!.id && /^attempt ambiguous/.test(l.msg))).toBe(true);
  });

  it("hub - a hub killed while a plain one-shot runs (its agent in the hub's process) never runs it again at the same generation", async () => {
    // The seed's own scenario: no creates, no unless; the command outlives the hub that started it.
    const dir = mkdtempSync(join(tmpdir(), "steward-restart-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const repo = fleetRepo(
      dir,
      {
        kind: "command",
        name: "migrate",
        run: ["/bin/sh", "-c", 'echo ran >> "$STEWARD_ROOT/srv/counter.log"; sleep 3'],
      },
      ["n1"],
    );
    const state = join(dir, "state");
    const root = join(dir, "root");
    const counter = join(root, "n1", "srv", "counter.log");
    const args = ["--state", state, "hub", "--repo", repo, "--root", root, "--listen", "127.0.0.1:0"];
    args.push("--lease", "5s", "--sync-interval", "1h", "--status", "none");
    const log = join(dir, "hub.log");
    const first = await startSteward(args, { cwd: dir, log });
    cleanups.push(() => void first.kill("SIGKILL"));
    await eventually(
      () => existsSync(counter) && readFileSync(counter, "utf8").length > 0,
      30_000,
      "the one-shot to start",
    );
    first.kill("SIGKILL");
    await new Promise((resolve) => first.once("exit", resolve));

    const second = await startSteward(args, { cwd: dir, log });
    cleanups.push(() => void second.kill("SIGKILL"));
    const store = new SqliteStore(join(state, "hub.db"));
    cleanups.push(() => store.close());
    await eventually(
      async () => ((await store.intents.get("migrate@n1", 1))?.status === "converged" ? true : undefined),
      60_000,
      "the instance to converge after the restart",
    );
    expect(readFileSync(counter, "utf8")).toBe("ran\n");
    const [lost, ...later] = await store.attempts.ofInstance("migrate@n1");
    expect(lost).toMatchObject({ generation: 1, settledBy: "report" });
    // The attempt after the restart found the run's outcome instead of starting it again.
    expect(later.at(-1)).toMatchObject({ generation: 1, status: "succeeded" });
    second.kill("SIGTERM");
    await new Promise((resolve) => second.once("exit", resolve));
    expect(readFileSync(counter, "utf8")).toBe("ran\n");
  });
});
