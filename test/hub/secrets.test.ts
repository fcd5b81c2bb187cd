/**
 * Secrets end to end over the local transport (`steward up` as a process): the host's file has the
 * plaintext, and nothing else does — the hub's SQLite file, its log, git notes, commit statuses,
 * the plan, the Action's summary, `describe`, `status`, `get` and the agent's results and reports
 * are searched byte for byte for the plaintext and its base64. The local transport runs the agents
 * inside the hub's process (the README says so); what crosses from agent to hub is what this
 * searches. Then: a node the secret is not encrypted for gets an invalid revision and no bundle,
 * `steward secret update` re-encrypts and nothing restarts, a rotation rolls out, and a re-installed
 * host is a permanent failure with a condition naming the secret and the fix.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ensureHostIdentity } from "../../src/agent/identity.js";
import { pullRequest, runStep, workflowCommands } from "../action/harness.js";
import {
  dbAssignment,
  type SecretFleet,
  secretFleet,
  secretTraces,
  TLS_KEY,
} from "../helpers/secret-fleet.js";
import { filesBelow, leaks, newIdentity } from "../helpers/secrets.js";
import { stopServicesOf } from "../helpers/steward-up.js";
import { nodeYaml } from "./helpers/fleet.js";
import { runSteward } from "./helpers/process.js";

const dir = mkdtempSync(join(tmpdir(), "steward-secrets-e2e-"));
const state = join(dir, "state");
const root = join(state, "root");
afterAll(() => {
  stopServicesOf(state);
  rmSync(dir, { recursive: true, force: true });
});

let fleet: SecretFleet;

async function up(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runSteward(["--state", state, "up", "--repo", fleet.repo.dir, "--once", "--timeout", "60s"], {
    cwd: dir,
    timeoutMs: 90_000,
  });
}

async function cli(...argv: string[]): Promise<string> {
  const run = await runSteward(["--state", state, ...argv], { cwd: dir });
  return `${run.stdout}${run.stderr}`;
}

function servicePid(node: string): number {
  return (
    JSON.parse(readFileSync(join(state, "agents", node, "services", "db", "db.json"), "utf8")) as {
      pid: number;
    }
  ).pid;
}

/** Every place outside the hosts' files that the hub, its statuses and its views leave or print. */
async function everywhere(): Promise<{ name: string; bytes: Buffer | string }[]> {
  const places: { name: string; bytes: Buffer | string }[] = [];
  for (const file of readdirSync(state))
    if (file.startsWith("hub.")) places.push({ name: file, bytes: readFileSync(join(state, file)) });
  places.push({
    name: "git notes",
    bytes: fleet.repo.git("log", "--all", "--notes=steward", "--format=%H %N"),
  });
  for (const argv of [
    ["status", "-o", "json"],
    ["status", "--revision", "HEAD", "-o", "json"],
    ["get", "instances", "--all", "-o", "json"],
    ["get", "attempts", "--all", "-o", "wide"],
    ["get", "conditions", "--all", "-o", "json"],
    ["describe", "instance", "db@db-1"],
    ["describe", "instance", "db@db-1", "-o", "json"],
    ["describe", "node", "db-1", "-o", "json"],
    ["describe", "revision", "HEAD", "-o", "json"],
  ])
    places.push({ name: `steward ${argv.join(" ")}`, bytes: await cli(...argv) });
  for (const format of ["text", "markdown", "json"])
    places.push({
      name: `steward plan --format ${format}`,
      bytes: (
        await runSteward(["plan", fleet.repo.dir, "--from", "HEAD~1", "--to", "HEAD", "--format", format], {
          cwd: dir,
        })
      ).stdout,
    });
  // What the agents sent back: each attempt's result and report as the agent recorded them.
  for (const node of readdirSync(join(state, "agents")))
    for (const file of filesBelow(join(state, "agents", node)))
      if (!file.name.includes("/identity/") && !file.name.includes("/runs/")) places.push(file);
  return places;
}

describe("secrets end to end - local transport", () => {
  it("secrets e2e - the host's file has the plaintext; the hub's database, log, notes, statuses, plan, describe and the agent's records have neither it nor its base64", async () => {
    fleet = await secretFleet({
      dir,
      nodes: ["db-1", "db-2"],
      transport: "local",
      agentState: (node) => join(state, "agents", node),
    });
    const run = await up();
    expect(run.stderr).toBe("");
    expect(run.stdout).toMatch(/right: no open conditions; 1\/1 instances converged/);
    expect(readFileSync(join(root, "db-1/srv/db/server.key"), "utf8")).toBe(TLS_KEY);
    expect(statSync(join(root, "db-1/srv/db/server.key")).mode & 0o777).toBe(0o600);
    expect(existsSync(join(root, "db-1/srv/db/migrated"))).toBe(true);
    const places = await everywhere();
    expect(places.length).toBeGreaterThan(15);
    expect(places.some((p) => p.name === "hub.db")).toBe(true);
    expect(leaks(secretTraces(), places)).toEqual([]);
    // The database does hold the secret: as ciphertext.
    expect(readFileSync(join(state, "hub.db")).includes("BEGIN AGE ENCRYPTED FILE")).toBe(true);
  }, 120_000);

  it("secrets e2e - a node the secret is not encrypted for makes the revision invalid at file:line; no bundle reaches it", async () => {
    fleet.repo.commit("db on db-2 too", { "assignments/db.yaml": dbAssignment(["db-1", "db-2"]) });
    const run = await up();
    expect(run.code).toBe(1);
    const notes = fleet.repo.git("notes", "--ref", "steward", "show", "HEAD");
    expect(notes).toMatch(/steward\/fleet: error/);
    expect(notes).toContain("assignments/db.yaml:");
    expect(notes).toContain("secrets/server.key.age is placed on db-2 but not encrypted for it");
    const status = JSON.parse(await cli("status", "-o", "json")) as {
      conditions: { type: string; message: string }[];
    };
    expect(status.conditions.map((c) => c.type)).toContain("InvalidRevision");
    expect(existsSync(join(state, "agents", "db-2", "bundles"))).toBe(false);
  }, 120_000);

  it("secrets e2e - steward secret update re-encrypts for db-2: a new generation that db-2 applies and that changes nothing on db-1 (no restart)", async () => {
    const key = statSync(join(root, "db-1/srv/db/server.key"));
    const pid = servicePid("db-1");
    const updated = await fleet.steward(["secret", "update"]);
    expect(updated.stderr).toBe("");
    expect(updated.stdout).toContain(
      "re-encrypted secrets/server.key.age for node db-1, node db-2, operator alice",
    );
    fleet.repo.commit("secrets for db-2");
    const run = await up();
    expect(run.stdout).toMatch(/right: no open conditions; 2\/2 instances converged/);
    expect(readFileSync(join(root, "db-2/srv/db/server.key"), "utf8")).toBe(TLS_KEY);
    const after = statSync(join(root, "db-1/srv/db/server.key"));
    expect([after.ino, after.mtimeMs]).toEqual([key.ino, key.mtimeMs]);
    expect(servicePid("db-1")).toBe(pid);
    // Re-encrypting is a new generation (the ciphertext is part of the spec), with nothing to do on db-1.
    const history = await cli("history", "db", "--node", "db-1", "-o", "json");
    expect((JSON.parse(history) as { generation: number }[]).map((entry) => entry.generation)).toEqual([
      2, 1,
    ]);
    const plan = (
      await runSteward(["plan", fleet.repo.dir, "--from", "HEAD~2", "--to", "HEAD"], { cwd: dir })
    ).stdout;
    expect(plan).toMatch(
      /secret changed: secrets\/server\.key\.age, ciphertext sha256:[0-9a-f]{12}… → sha256:[0-9a-f]{12}… \(the content is not shown: only the hosts can read it\)/,
    );
    expect(leaks(secretTraces(), await everywhere())).toEqual([]);
  }, 150_000);

  it("secrets e2e - a rotated secret (steward secret edit, commit) rolls out: the new key on both hosts, the service restarted", async () => {
    const pid = servicePid("db-1");
    const rotated = TLS_KEY.replace("EndToEndTlsKeyMaterial", "RotatedTlsKeyMaterialNow");
    const edit = await fleet.steward(["secret", "edit", "secrets/server.key.age"], {
      EDITOR: "sed -i s/EndToEndTlsKeyMaterial/RotatedTlsKeyMaterialNow/",
    });
    expect(edit.code).toBe(0);
    fleet.repo.commit("rotate the TLS key");
    const run = await up();
    expect(run.stdout).toMatch(/right: no open conditions; 2\/2 instances converged/);
    expect(readFileSync(join(root, "db-1/srv/db/server.key"), "utf8")).toBe(rotated);
    expect(readFileSync(join(root, "db-2/srv/db/server.key"), "utf8")).toBe(rotated);
    expect(servicePid("db-1")).not.toBe(pid);
    expect(leaks(secretTraces(rotated), await everywhere())).toEqual([]);
  }, 150_000);

  it("secrets e2e - a re-installed host (a new identity) cannot open the secret: a permanent failure, a condition naming the secret and steward secret update", async () => {
    stopServicesOf(state);
    rmSync(join(state, "agents", "db-2"), { recursive: true, force: true });
    await ensureHostIdentity(join(state, "agents", "db-2"));
    const run = await up();
    expect(run.code).toBe(1);
    const status = JSON.parse(await cli("status", "-o", "json")) as {
      conditions: { type: string; subject: string; reason: string; message: string }[];
    };
    const blocked = status.conditions.find((c) => c.type === "Blocked" && c.subject === "db@db-2");
    expect(blocked?.reason).toBe("SecretNotForThisHost");
    expect(blocked?.message).toContain(
      "secret secrets/server.key.age is not encrypted for this host's identity",
    );
    expect(blocked?.message).toContain("steward secret update secrets/server.key.age");
    expect(existsSync(join(root, "db-2/srv/db/server.key"))).toBe(true);
  }, 150_000);
});

describe("secrets end to end - the GitHub Action", () => {
  it("secrets action - a pull request rotating a secret shows it as 'secret changed' with the ciphertext's hash; one placing it on a node it is not encrypted for fails at file:line", async () => {
    const files = (rev: string) =>
      Object.fromEntries(
        fleet.repo
          .git("ls-tree", "-r", "--name-only", rev)
          .split("\n")
          .map((path) => [path, execFileSync("git", ["show", `${rev}:${path}`], { cwd: fleet.repo.dir })]),
      );
    const rotation = pullRequest(files("HEAD~1"), files("HEAD"));
    const step = await runStep({
      workspace: rotation.repo.dir,
      event: { number: 7, base: rotation.base, head: rotation.head },
    });
    expect(step.code).toBe(0);
    expect(step.summary).toContain("secret changed: `secrets/server.key.age`, ciphertext `sha256:");
    expect(
      leaks(secretTraces(TLS_KEY.replace("EndToEndTlsKeyMaterial", "RotatedTlsKeyMaterialNow")), [
        { name: "summary", bytes: step.summary },
        { name: "stdout", bytes: step.stdout },
        {
          name: "plan-json",
          bytes: existsSync(step.outputs["plan-json"] ?? "") ? readFileSync(step.outputs["plan-json"]!) : "",
        },
      ]),
    ).toEqual([]);
    const placed = pullRequest(files("HEAD"), {
      "nodes/db-3.yaml": nodeYaml("db-3", { identity: { age: (await newIdentity()).recipient } }),
      "assignments/db.yaml": dbAssignment(["db-1", "db-2", "db-3"]),
    });
    const failing = await runStep({
      workspace: placed.repo.dir,
      event: { number: 8, base: placed.base, head: placed.head },
    });
    expect(failing.code).toBe(1);
    expect(workflowCommands(failing.stdout)).toContainEqual(
      expect.stringMatching(
        /^::error file=assignments\/db\.yaml,line=\d+,col=\d+,title=steward secret\/not-for-node::secrets\/server\.key\.age is placed on db-3 but not encrypted for it\. Fix: run steward secret update secrets\/server\.key\.age/,
      ),
    );
  }, 120_000);
});
