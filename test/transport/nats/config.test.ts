import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createUser } from "@nats-io/nkeys";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/main.js";
import { planNatsConfig } from "../../../src/transport/nats/config.js";

const seeds = Array.from({ length: 10 }, () => new TextDecoder().decode(createUser().getSeed()));
const fresh = () => {
  let next = 0;
  return () => seeds[next++] as string;
};

describe("nats config - planning the server configuration and credentials", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("nats config - each node's user may only touch its own subjects", () => {
    const plan = planNatsConfig({ dir: "/etc/steward/nats", nodes: ["web-1"] }, () => undefined, fresh());
    const config = plan.serverConfig;
    expect(config).toContain('store_dir: "/etc/steward/nats/jetstream"');
    expect(config).toContain('listen: "127.0.0.1:4222"');
    const node = config.slice(config.indexOf("# node web-1"), config.indexOf("# task-agent"));
    expect(node).toContain('"$JS.API.DIRECT.GET.STEWARD_MAILBOX.steward.mailbox.web-1"');
    expect(node).toContain('"$JS.API.DIRECT.GET.STEWARD_MAILBOX.steward.attempt.web-1.*"');
    expect(node).toContain(
      '"steward.agent.43.report.web-1", "steward.agent.43.result.web-1", "steward.heartbeat.web-1"',
    );
    expect(node).toContain(
      'subscribe: { allow: ["_INBOX_node_web-1.>", "steward.control.web-1", "steward.attempt.web-1.*", "steward.mailbox.web-1"] }',
    );
    const publish = /publish: \{ allow: \[(.*)\] \}/.exec(node)?.[1]?.split(", ") ?? [];
    expect(publish.length).toBeGreaterThan(5);
    for (const subject of publish)
      expect(subject, "every subject a node may publish names it").toContain("web-1");
    expect(plan.identities.map((i) => `${i.role}:${i.name}:${i.credentials}`)).toEqual([
      "hub:hub:credentials/hub.nk",
      "node:web-1:credentials/nodes/web-1.nk",
      "task-agent:tasks:credentials/task-agents/tasks.nk",
      "viewer:viewer:credentials/viewer.nk",
    ]);
    expect(plan.files.filter((f) => f.path.endsWith(".nk")).every((f) => f.mode === 0o600)).toBe(true);
  });

  it("nats config - server TLS files are written into a tls block", () => {
    const plan = planNatsConfig(
      {
        dir: "/d",
        nodes: ["a"],
        tls: { cert: "/pki/server.crt", key: "/pki/server.key", ca: "/pki/ca.crt" },
      },
      () => undefined,
      fresh(),
    );
    expect(plan.serverConfig).toContain(
      'tls {\n  cert_file: "/pki/server.crt"\n  key_file: "/pki/server.key"\n  ca_file: "/pki/ca.crt"\n  verify: true\n}',
    );
  });

  const refusals: { name: string; input: Parameters<typeof planNatsConfig>[0]; message: RegExp }[] = [
    { name: "no nodes", input: { dir: "/d", nodes: [] }, message: /pass --node NAME or --nodes-from REPO/ },
    {
      name: "a node name that is not a DNS label",
      input: { dir: "/d", nodes: ["Web_1"] },
      message: /node name "Web_1" is not a DNS label/,
    },
    {
      name: "a listen address without a port",
      input: { dir: "/d", nodes: ["a"], listen: "0.0.0.0" },
      message: /host:port/,
    },
    {
      name: "a relative directory",
      input: { dir: "bus", nodes: ["a"] },
      message: /must be an absolute path/,
    },
    {
      name: "a certificate without its key",
      input: { dir: "/d", nodes: ["a"], tls: { cert: "/c" } },
      message: /--tls-cert and --tls-key go together/,
    },
  ];
  for (const refusal of refusals)
    it(`nats config - refuses ${refusal.name}`, () => {
      expect(() => planNatsConfig(refusal.input, () => undefined, fresh())).toThrow(refusal.message);
    });

  it("nats config - --nodes-from takes the nats nodes of a fleet repository", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-nats-cfg-"));
    dirs.push(dir);
    const out: string[] = [];
    const io = { stdout: (t: string) => out.push(t), stderr: () => {}, env: {}, cwd: dir, isTty: false };
    const repo = resolve("examples/repo");
    expect(
      await main(["--json", "nats", "config", "--static", "--out", "bus", "--nodes-from", repo], io),
    ).toBe(0);
    const printed = JSON.parse(out.join(""));
    expect(
      printed.identities
        .filter((i: { role: string }) => i.role === "node")
        .map((i: { name: string }) => i.name),
    ).toEqual(["edge-2"]);
    expect(JSON.stringify(printed)).not.toMatch(/SU[A-Z2-7]{56}/); // seeds never printed
    expect(readFileSync(join(dir, "bus", "nats-server.conf"), "utf8")).toContain("# node edge-2");
  });

  it("nats config - a credentials file that is not a seed stops the run with the fix", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-nats-cfg-"));
    dirs.push(dir);
    const err: string[] = [];
    const io = { stdout: () => {}, stderr: (t: string) => err.push(t), env: {}, cwd: dir, isTty: false };
    expect(await main(["nats", "config", "--static", "--out", "bus", "--node", "a"], io)).toBe(0);
    writeFileSync(join(dir, "bus", "credentials", "hub.nk"), "not a seed\n");
    expect(await main(["nats", "config", "--static", "--out", "bus", "--node", "a"], io)).toBe(2);
    expect(err.join("")).toMatch(/hub\.nk is not an nkey user seed: move it away or fix it, then run again/);
  });

  it("nats config - each credentials file says whose it is first; a bare seed of an earlier run is kept and labelled", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-nats-cfg-"));
    dirs.push(dir);
    const io = { stdout: () => {}, stderr: () => {}, env: {}, cwd: dir, isTty: false };
    const seed = seeds[9] as string;
    const file = (path: string) => join(dir, "bus", "credentials", path);
    expect(await main(["nats", "config", "--static", "--out", "bus", "--node", "edge-2"], io)).toBe(0);
    for (const [path, line] of [
      ["hub.nk", "# steward hub hub: "],
      ["nodes/edge-2.nk", "# steward node edge-2: "],
      ["task-agents/tasks.nk", "# steward task-agent tasks: "],
      ["viewer.nk", "# steward viewer viewer: "],
    ] as const)
      expect(readFileSync(file(path), "utf8").split("\n")[0], path).toMatch(new RegExp(`^${line}`));
    // Written by an earlier steward: the seed alone.
    writeFileSync(file("nodes/edge-2.nk"), `${seed}\n`, { mode: 0o600 });
    expect(await main(["nats", "config", "--static", "--out", "bus", "--node", "edge-2"], io)).toBe(0);
    expect(readFileSync(file("nodes/edge-2.nk"), "utf8")).toBe(
      `# steward node edge-2: NATS credentials from \`steward nats config\`; keep this file 0600\n${seed}\n`,
    );
  });

  it("nats config - operator mode (the default): no user listed, the accounts preloaded, every key and credential 0600 and kept across runs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-nats-cfg-"));
    dirs.push(dir);
    const out: string[] = [];
    const io = { stdout: (t: string) => out.push(t), stderr: () => {}, env: {}, cwd: dir, isTty: false };
    expect(await main(["--json", "nats", "config", "--out", "bus"], io)).toBe(0);
    const printed = JSON.parse(out.join(""));
    expect(printed).toMatchObject({ mode: "operator", issuer: "credentials/hub-issuer.json" });
    expect(
      printed.credentials.map((c: { role: string; credentials: string }) => [c.role, c.credentials]),
    ).toEqual([
      ["hub", "credentials/hub.creds"],
      ["viewer", "credentials/viewer.creds"],
      ["task-agent", "credentials/task-agents/tasks.creds"],
      ["enrol", "credentials/enrol.creds"],
    ]);
    const config = readFileSync(join(dir, "bus", "nats-server.conf"), "utf8");
    expect(config).toMatch(/^operator: eyJ/m);
    expect(config).toMatch(/^resolver: \{\n {2}type: full\n {2}dir: ".*\/bus\/jwt"/m);
    expect(config).toContain(`  ${printed.account}: eyJ`);
    expect(config).not.toMatch(/users:|nkey: U/);
    const secrets = [
      "keys/operator.nk",
      "keys/operator-signing.nk",
      "keys/account.nk",
      "keys/account-signing.nk",
      "keys/system-account.nk",
      "keys/system-user.nk",
      "credentials/hub.creds",
      "credentials/viewer.creds",
      "credentials/enrol.creds",
      "credentials/task-agents/tasks.creds",
      "credentials/hub-issuer.json",
    ];
    const before = secrets.map((path) => readFileSync(join(dir, "bus", path), "utf8"));
    for (const path of secrets) expect(statSync(join(dir, "bus", path)).mode & 0o777, path).toBe(0o600);
    expect(readFileSync(join(dir, "bus", "credentials/enrol.creds"), "utf8").split("\n")[0]).toMatch(
      /^# steward enrol enrol: /,
    );
    // Nothing secret is printed.
    for (const text of before)
      for (const seed of text.match(/S[OAU][A-Z2-7]{56}/g) ?? []) expect(out.join("")).not.toContain(seed);
    expect(await main(["nats", "config", "--out", "bus"], io)).toBe(0);
    const seedsOf = (text: string) => text.match(/S[OAU][A-Z2-7]{56}/g);
    for (const [i, path] of secrets.entries())
      expect(seedsOf(readFileSync(join(dir, "bus", path), "utf8")), path).toEqual(seedsOf(before[i]!));
  });

  it("nats config - per-node credentials without --static are refused with the fix", async () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-nats-cfg-"));
    dirs.push(dir);
    const err: string[] = [];
    const io = { stdout: () => {}, stderr: (t: string) => err.push(t), env: {}, cwd: dir, isTty: false };
    expect(await main(["nats", "config", "--out", "bus", "--node", "edge-2"], io)).toBe(2);
    expect(err.join("")).toMatch(
      /^steward: --node writes per-node credentials, which operator mode does not need: each host makes its own identity .* or add --static for a server not run in operator mode\n/,
    );
  });
});
