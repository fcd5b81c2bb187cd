import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { armor, Decrypter } from "age-encryption";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/io.js";
import { main } from "../../src/cli/main.js";
import type { AgentReply, Bundle, Report } from "../../src/model/generated.js";
import { directorySource, loadRepo } from "../../src/model/load.js";
import { bundleFor } from "../../src/model/render.js";
import { AGENT_SCHEMA_ID, schemaFindings, validatorFor } from "../../src/model/schema.js";
import { repoRoot } from "../helpers/cli.js";
import { exampleRepoOnFreePorts } from "../helpers/example-repo.js";
import { attemptId, killServices } from "./helpers.js";

let repo: string;
let bundles: Map<string, Bundle>;
let work: string;

/** The example repo, copied so web nodes listen on free ports (other tests may use the declared ones). */
beforeAll(async () => {
  repo = mkdtempSync(join(tmpdir(), "steward-example-repo-"));
  await exampleRepoOnFreePorts(repo);
  const loaded = await loadRepo(directorySource(repo));
  if (!loaded.ok || !loaded.desired)
    throw new Error(`example repo does not load: ${JSON.stringify(loaded.diagnostics)}`);
  bundles = new Map(
    [...loaded.desired.instances.values()].map((instance) => [
      instance.key,
      bundleFor(instance, 1, attemptId(), new Date()),
    ]),
  );
});
afterAll(() => rmSync(repo, { recursive: true, force: true }));

beforeEach(() => {
  work = mkdtempSync(join(tmpdir(), "steward-agent-cli-"));
  // The example's local nodes hold its demo identities, as `steward up` installs them.
  for (const node of ["db-1", "web-1"]) {
    mkdirSync(join(work, "state", node, "identity"), { recursive: true, mode: 0o700 });
    copyFileSync(
      join(repoRoot, "examples/identities", `${node}.key`),
      join(work, "state", node, "identity/age.key"),
    );
  }
});
afterEach(() => {
  for (const node of ["web-1", "db-1", "edge-1"]) killServices(join(work, "state", node));
  rmSync(work, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function steward(argv: string[], stdin?: string): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const io: CliIo & { stdin?: () => Promise<string> } = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    env: {},
    cwd: work,
    isTty: false,
  };
  if (stdin !== undefined) io.stdin = async () => stdin;
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

function bundleFile(key: string): string {
  const file = join(work, `${key}.json`);
  writeFileSync(file, JSON.stringify(bundles.get(key)));
  return file;
}

/** apply for one node: its own --root and --state, as the local transport lays them out. */
function applyArgs(key: string, node: string, json = true): string[] {
  const args = [
    "agent",
    "apply",
    "--bundle",
    bundleFile(key),
    "--root",
    join("root", node),
    "--state",
    join("state", node),
  ];
  return json ? [...args, "--json"] : args;
}

function expectValidReply(reply: AgentReply): void {
  expect(schemaFindings(validatorFor(AGENT_SCHEMA_ID, "AgentReply"), reply)).toEqual([]);
}

describe("agent cli - example repo bundles under --root", () => {
  it("agent cli - base and db on db-1: gating migration, atomic TLS pair, probe; converged, exit 0", async () => {
    for (const key of ["base@db-1", "db@db-1"]) {
      const run = await steward(applyArgs(key, "db-1"));
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      const reply = JSON.parse(run.stdout) as AgentReply;
      expectValidReply(reply);
      expect(reply.result.outcome).toBe("succeeded");
    }
    const root = join(work, "root", "db-1");
    expect(readFileSync(join(root, "var/lib/db/schema-version"), "utf8")).toBe("migrated to 7\n");
    // The key came encrypted and was decrypted on db-1 with its identity.
    const decrypter = new Decrypter();
    decrypter.addIdentity(
      readFileSync(join(repoRoot, "examples/identities/db-1.key"), "utf8").match(/AGE-SECRET-KEY-1\S+/)![0],
    );
    const key = await decrypter.decrypt(
      armor.decode(readFileSync(join(repo, "files/db/server.key.age"), "utf8")),
      "text",
    );
    expect(key).toContain("PRIVATE KEY");
    expect(readFileSync(join(root, "etc/db/tls/server.key"), "utf8")).toBe(key);
    expect(JSON.stringify(bundles.get("db@db-1"))).not.toContain(key.split("\n")[1]);
    expect(readFileSync(join(root, "etc/steward-demo/motd"), "utf8")).toContain("db-1 is managed by steward");
    const observed = await steward([
      "agent",
      "observe",
      "--root",
      join("root", "db-1"),
      "--state",
      join("state", "db-1"),
      "--json",
    ]);
    expect(observed.code).toBe(0);
    const report = JSON.parse(observed.stdout) as Report;
    expect(report.node).toBe("db-1");
    expect(report.instances.map((i) => [i.assignment, i.generation, i.converged])).toEqual([
      ["base", 1, true],
      ["db", 1, true],
    ]);
    expect(report.instances[1]!.probes).toEqual([
      expect.objectContaining({ name: "schema-migrated", ok: true }),
    ]);
    expect(report.instances[1]!.version).toBe("14.2-7");
  });

  it("agent cli - web on web-1: the service runs node server.mjs in /srv/web under the root and serves the declared version", async () => {
    const run = await steward(applyArgs("web@web-1", "web-1"));
    expect(run.code).toBe(0);
    const reply = JSON.parse(run.stdout) as AgentReply;
    expectValidReply(reply);
    expect(reply.result.resources.map((r) => [r.name, r.action])).toEqual([
      ["web-dir", "created"],
      ["web-config", "created"],
      ["web-program", "created"],
      ["web", "started"],
    ]);
    const instance = reply.report.instances[0]!;
    expect(instance.probes.map((p) => [p.name, p.ok])).toEqual([
      ["serves-declared-version", true],
      ["port-open", true],
    ]);
    expect(instance).toMatchObject({ converged: true, state: "running", version: "1.4.2" });
  });

  it("agent cli - a readable summary without --json; exit 1 when the attempt failed", async () => {
    const ok = await steward(applyArgs("base@web-1", "web-1", false));
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^attempt \S+ base@web-1 generation 1: succeeded\n/);
    expect(ok.stdout).toContain("created   file /etc/steward-demo/motd");
    expect(ok.stdout).toContain("base: generation 1, running, converged");
    // edge-proxy needs a container engine; here none answers (or the image cannot be pulled).
    const failed = await steward(applyArgs("edge-proxy@edge-1", "edge-1", false));
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/edge-proxy@edge-1 generation 1: failed \((transient|permanent), \w+\)/);
    expect(failed.stdout).toMatch(/failed\s+container edge-proxy/);
  });

  it("agent cli - a bundle on standard input, redelivered: the earlier result, nothing run twice", async () => {
    const text = JSON.stringify(bundles.get("db@db-1"));
    const args = [
      "agent",
      "apply",
      "--bundle",
      "-",
      "--root",
      "root/db-1",
      "--state",
      "state/db-1",
      "--json",
    ];
    const first = JSON.parse((await steward(args, text)).stdout) as AgentReply;
    const second = JSON.parse((await steward(args, text)).stdout) as AgentReply;
    expect(second.result).toEqual({ ...first.result, duplicate: true });
  });

  it("agent cli - an invalid bundle or one for another node is refused in one line, exit 2, nothing applied", async () => {
    const bad = join(work, "bad.json");
    const broken = structuredClone(bundles.get("base@db-1")!) as unknown as {
      spec: { resources: { mode?: string }[] };
    };
    broken.spec.resources[1]!.mode = "644";
    writeFileSync(bad, JSON.stringify(broken));
    const invalid = await steward(["agent", "apply", "--bundle", bad, "--root", "root", "--json"]);
    expect(invalid.code).toBe(2);
    expect(invalid.stdout).toBe("");
    expect(invalid.stderr).toMatch(
      /^steward: .*bad\.json is not a valid bundle: spec\.resources\[1\]\.mode must match/,
    );
    expect(invalid.stderr.trim().split("\n")).toHaveLength(1);

    const notJson = join(work, "not.json");
    writeFileSync(notJson, "{ nope");
    expect((await steward(["agent", "apply", "--bundle", notJson])).stderr).toMatch(/is not JSON/);

    const other = await steward([...applyArgs("base@db-1", "db-1"), "--node", "web-1"]);
    expect(other.code).toBe(2);
    expect(other.stderr).toContain('bundle is for node "db-1" but this agent is node "web-1"');
    expect(existsSync(join(work, "root", "db-1"))).toBe(false);
  });
});
