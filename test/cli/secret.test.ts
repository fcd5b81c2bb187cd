/**
 * `steward secret encrypt|edit|update` as an operator uses them, and their files with Debian's `age`
 * CLI both ways: what steward encrypts `age -d -i` decrypts (and its manifest is a recipients file
 * `age -R` reads); what `age` encrypts for a node, that node's agent applies.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { Agent } from "../../src/agent/agent.js";
import { ensureHostIdentity, identityFiles } from "../../src/agent/identity.js";
import { directorySource, loadRepo } from "../../src/model/load.js";
import { bundleFor } from "../../src/model/render.js";
import { attemptId } from "../agent/helpers.js";
import { type CliRun, runCli } from "../helpers/cli.js";
import { ageCli, newIdentity } from "../helpers/secrets.js";
import { assignmentYaml, fleetYaml, nodeYaml } from "../hub/helpers/fleet.js";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let work: string;
let repo: string;
/** Each host's agent state directory, with its identity made there (`steward agent identity`). */
const hosts = new Map<string, { state: string; recipient: string }>();
let operatorKey: string;

function steward(argv: string[], env: NodeJS.ProcessEnv = {}, stdin?: string): Promise<CliRun> {
  return runCli(argv, work, { PATH: process.env.PATH, ...env }, false, stdin);
}

/** What an operator runs first: the key encrypted for the nodes `db` is placed on. */
function encryptTheKey(): Promise<CliRun> {
  return steward([
    "secret",
    "encrypt",
    "--repo",
    "fleet",
    "--assignment",
    "db",
    "server.key",
    "--out",
    "fleet/secrets/server.key.age",
  ]);
}

function write(path: string, content: string | Buffer): void {
  mkdirSync(dirname(join(repo, path)), { recursive: true });
  writeFileSync(join(repo, path), content);
}

const KEY =
  "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AwEHBG0wawIBAQQgOperatorTypedThisKeyInByHand\n-----END PRIVATE KEY-----\n";

/** The `db` assignment, on `nodes`, with the key as a secret file. */
function dbAssignment(nodes: string[], source = "secrets/server.key.age"): string {
  return assignmentYaml("db", {
    nodes,
    resources: [
      { kind: "file", name: "tls-key", path: "/srv/server.key", mode: "0600", source, secret: true },
    ],
  });
}

beforeEach(async () => {
  work = mkdtempSync(join(tmpdir(), "steward-secret-cli-"));
  dirs.push(work);
  repo = join(work, "fleet");
  hosts.clear();
  for (const node of ["db-1", "db-2"]) {
    const state = join(work, "hosts", node);
    hosts.set(node, { state, recipient: (await ensureHostIdentity(state)).identity.age });
    write(`nodes/${node}.yaml`, nodeYaml(node, { identity: { age: hosts.get(node)!.recipient } }));
  }
  write("nodes/db-3.yaml", nodeYaml("db-3"));
  const operator = await newIdentity();
  operatorKey = join(work, "alice.key");
  writeFileSync(operatorKey, `# alice's own identity\n${operator.identity}\n`, { mode: 0o600 });
  write(
    "steward.yaml",
    fleetYaml({ secrets: { operators: [{ name: "alice", recipient: operator.recipient }] } }),
  );
  write("assignments/db.yaml", dbAssignment(["db-1"]));
  writeFileSync(join(work, "server.key"), KEY);
});

/** What `age -d -i IDENTITY FILE` prints. */
function ageDecrypt(identityFile: string, file: string): string {
  return ageCli(["-d", "-i", identityFile, file]).toString("utf8");
}

describe("steward secret - encrypt, edit and update as an operator does", () => {
  it("steward secret encrypt - for the nodes an assignment is placed on and the fleet's operators; age -d -i decrypts it with either identity, age -R reads its manifest, validate passes", async () => {
    const run = await encryptTheKey();
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      "encrypted secrets/server.key.age for node db-1, operator alice; recipients in secrets/server.key.age.recipients\n" +
        "use it with secret: true (or env: {NAME: {secret: secrets/server.key.age, key: KEY}}), and keep the plaintext out of Git\n",
    );
    const file = join(repo, "secrets/server.key.age");
    expect(readFileSync(file, "utf8")).toMatch(/^-----BEGIN AGE ENCRYPTED FILE-----\n/);
    expect(ageDecrypt(identityFiles(hosts.get("db-1")!.state).age, file)).toBe(KEY);
    expect(ageDecrypt(operatorKey, file)).toBe(KEY);
    expect(() => ageDecrypt(identityFiles(hosts.get("db-2")!.state).age, file)).toThrow();
    const manifest = readFileSync(`${file}.recipients`, "utf8");
    expect(manifest).toContain(`# node db-1\n${hosts.get("db-1")!.recipient}\n`);
    expect(manifest).toContain("# operator alice\n");
    // The manifest is an age recipients file: age encrypts for exactly those recipients from it.
    const again = ageCli(["-R", `${file}.recipients`, "-a"], "via the manifest\n");
    writeFileSync(join(work, "via.age"), again);
    expect(ageDecrypt(identityFiles(hosts.get("db-1")!.state).age, join(work, "via.age"))).toBe(
      "via the manifest\n",
    );
    const validate = await steward(["validate", "fleet"]);
    expect(validate.stdout).toContain("valid: 3 nodes, 1 assignment, 1 instance");
    expect(validate.code).toBe(0);
  });

  it("steward secret encrypt - from standard input, for named nodes or labels, with an extra operator; binary on request", async () => {
    const extra = await newIdentity();
    const run = await steward(
      [
        "secret",
        "encrypt",
        "--repo",
        "fleet",
        "--node",
        "db-1",
        "--node",
        "db-2",
        "--operator-recipient",
        extra.recipient,
        "--binary",
        "-",
        "--out",
        "fleet/secrets/db.yaml.age",
      ],
      {},
      "password: from-stdin\n",
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("for node db-1, node db-2, operator alice, operator (--operator-recipient)");
    const file = join(repo, "secrets/db.yaml.age");
    expect(readFileSync(file).subarray(0, 21).toString()).toBe("age-encryption.org/v1");
    expect(ageDecrypt(identityFiles(hosts.get("db-2")!.state).age, file)).toBe("password: from-stdin\n");
    const labels = await steward([
      "secret",
      "encrypt",
      "--repo",
      "fleet",
      "--selector",
      "env=test",
      "server.key",
      "--out",
      "fleet/secrets/all.age",
    ]);
    expect(labels.code).toBe(1);
    expect(labels.stderr).toBe(
      "steward: secrets/all.age is for node db-3, which has no spec.identity.age: run steward agent identity on that host and add the age recipient it prints to spec.identity of nodes/db-3.yaml, then run this again\n",
    );
    expect(existsSync(join(repo, "secrets/all.age"))).toBe(false);
  });

  interface Refusal {
    name: string;
    argv: string[];
    code: number;
    /** The whole of it, or (for a path of the test's own directory) its shape. */
    stderr: string | RegExp;
  }
  const refusals: Refusal[] = [
    {
      name: "no placement",
      argv: ["secret", "encrypt", "--repo", "fleet", "server.key", "--out", "fleet/k.age"],
      code: 2,
      stderr:
        "steward: say which nodes the secret is for with exactly one of --assignment NAME, --node NAME (repeatable) or --selector KEY=VALUE (repeatable)\n",
    },
    {
      name: "an assignment that is not declared",
      argv: [
        "secret",
        "encrypt",
        "--repo",
        "fleet",
        "--assignment",
        "dbb",
        "server.key",
        "--out",
        "fleet/k.age",
      ],
      code: 2,
      stderr:
        'steward: assignment "dbb" is not declared (did you mean "db"?): name one of the repository\'s assignments\n',
    },
    {
      name: "an output outside the repository",
      argv: ["secret", "encrypt", "--repo", "fleet", "--assignment", "db", "server.key", "--out", "k.age"],
      code: 2,
      stderr:
        /^steward: --out \/\S+\/k\.age is outside the repository \/\S+\/fleet: write the secret inside it\n$/,
    },
    {
      name: "a plaintext that is not there",
      argv: [
        "secret",
        "encrypt",
        "--repo",
        "fleet",
        "--assignment",
        "db",
        "missing.key",
        "--out",
        "fleet/k.age",
      ],
      code: 2,
      stderr: "steward: cannot read missing.key: ENOENT\n",
    },
  ];
  for (const refusal of refusals)
    it(`steward secret encrypt - refuses ${refusal.name}, in one line with the fix`, async () => {
      const run = await steward(refusal.argv);
      expect(run.code).toBe(refusal.code);
      if (typeof refusal.stderr === "string") expect(run.stderr).toBe(refusal.stderr);
      else expect(run.stderr).toMatch(refusal.stderr);
      expect(run.stderr).not.toContain("    at ");
    });

  it("steward secret edit - decrypts with the operator's identity, runs $EDITOR on a private copy, encrypts again for the same recipients, and leaves no plaintext behind", async () => {
    await encryptTheKey();
    const file = join(repo, "secrets/server.key.age");
    const manifest = readFileSync(`${file}.recipients`, "utf8");
    const seen = join(work, "editor-saw");
    // An editor that notes where it was run, then changes the key.
    const editor = join(work, "editor.sh");
    writeFileSync(editor, `#!/bin/sh\necho "$1" > ${seen}\nsed -i s/OperatorTyped/Rotated/ "$1"\n`, {
      mode: 0o755,
    });
    const before = readFileSync(file, "utf8");
    const run = await steward(["secret", "edit", "fleet/secrets/server.key.age", "--identity", operatorKey], {
      EDITOR: editor,
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      "encrypted fleet/secrets/server.key.age again for node db-1, operator alice: commit it to roll it out\n",
    );
    expect(readFileSync(file, "utf8")).not.toBe(before);
    expect(ageDecrypt(identityFiles(hosts.get("db-1")!.state).age, file)).toBe(
      KEY.replace("OperatorTyped", "Rotated"),
    );
    expect(readFileSync(`${file}.recipients`, "utf8")).toBe(manifest);
    const copy = readFileSync(seen, "utf8").trim();
    expect(copy.startsWith(tmpdir())).toBe(true);
    expect(existsSync(dirname(copy))).toBe(false);
    // An editor that changes nothing: nothing is written.
    const unchanged = await steward(["secret", "edit", "fleet/secrets/server.key.age"], {
      EDITOR: "true",
      STEWARD_AGE_IDENTITY: operatorKey,
    });
    expect(unchanged.stdout).toBe("fleet/secrets/server.key.age unchanged: nothing encrypted again\n");
  });

  it("steward secret edit - an identity the secret is not encrypted for, or none, is refused with the fix", async () => {
    await encryptTheKey();
    const stranger = await newIdentity();
    const run = await steward(["secret", "edit", "fleet/secrets/server.key.age"], {
      EDITOR: "true",
      STEWARD_AGE_IDENTITY: stranger.identity,
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `steward: fleet/secrets/server.key.age is not encrypted for your identity (${stranger.recipient}): ask an operator who can read it to add your recipient to spec.secrets.operators in steward.yaml and run steward secret update fleet/secrets/server.key.age\n`,
    );
    const none = await steward(["secret", "edit", "fleet/secrets/server.key.age"], { EDITOR: "true" });
    expect(none.code).toBe(2);
    expect(none.stderr).toBe(
      "steward: this needs your age identity to decrypt the secret: pass --identity FILE (an age-keygen file) or set STEWARD_AGE_IDENTITY to its path\n",
    );
  });

  it("steward secret update - after the assignment is placed on another node, validate names the fix, update re-encrypts, the new node can read it, and a second update changes nothing", async () => {
    await encryptTheKey();
    write("assignments/db.yaml", dbAssignment(["db-1", "db-2"]));
    const invalid = await steward(["validate", "fleet"]);
    expect(invalid.code).toBe(1);
    expect(invalid.stdout).toContain(
      "error: secrets/server.key.age is placed on db-2 but not encrypted for it [secret/not-for-node]",
    );
    expect(invalid.stdout).toContain("fix: run steward secret update secrets/server.key.age");
    const updated = await steward(["secret", "update", "--repo", "fleet", "--identity", operatorKey]);
    expect(updated.stderr).toBe("");
    expect(updated.code).toBe(0);
    expect(updated.stdout).toBe(
      "re-encrypted secrets/server.key.age for node db-1, node db-2, operator alice (was node db-1, operator alice)\n" +
        "commit it: a new generation for the instances that use it, and nothing restarts on the hosts (the plaintext is the same)\n",
    );
    expect(
      ageDecrypt(identityFiles(hosts.get("db-2")!.state).age, join(repo, "secrets/server.key.age")),
    ).toBe(KEY);
    expect((await steward(["validate", "fleet"])).code).toBe(0);
    const again = await steward(["secret", "update", "--repo", "fleet", "secrets/server.key.age"]);
    expect(again.stdout).toBe("secrets/server.key.age: up to date (node db-1, node db-2, operator alice)\n");
  });
});

describe("steward secret - interoperability with the age CLI", () => {
  for (const armored of [true, false])
    it(`age interop - a file age encrypts (${armored ? "armored" : "binary"}) for a node, with a manifest written by hand, validates and is applied by that node's agent`, async () => {
      const db1 = hosts.get("db-1")!;
      const recipients = join(repo, "secrets/server.key.age.recipients");
      mkdirSync(dirname(recipients), { recursive: true });
      writeFileSync(recipients, `# node db-1\n${db1.recipient}\n`);
      const ciphertext = ageCli(["-R", recipients, ...(armored ? ["-a"] : [])], KEY);
      write("secrets/server.key.age", ciphertext);
      const loaded = await loadRepo(directorySource(repo));
      expect(loaded.diagnostics).toEqual([]);
      const instance = loaded.desired!.instances.get("db@db-1")!;
      const root = join(work, "root");
      const agent = new Agent({ node: "db-1", stateDir: db1.state, root });
      const reply = await agent.apply(bundleFor(instance, 1, attemptId(), new Date()));
      expect(reply.result.outcome).toBe("succeeded");
      expect(readFileSync(join(root, "srv/server.key"), "utf8")).toBe(KEY);
      expect(readdirSync(join(root, "srv"))).toEqual(["server.key"]);
    });
});
