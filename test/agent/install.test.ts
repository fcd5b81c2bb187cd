/**
 * `steward agent install` and `uninstall`, run as a host runs them (`node steward-agent.mjs agent
 * install ...`): `--dry-run` prints every file and writes nothing (the enrolment credential never
 * shown); the unit passes `systemd-analyze verify` without a warning, and every directive in it is
 * in the README's table with its reason; install writes the files with safe modes and makes the
 * host's identity; uninstall removes the unit and the agent and keeps the state. (That the unit's
 * ExecStart converges is test/transport/nats/enrolment.test.ts.)
 */
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/cli.js";
import { expectModes } from "../helpers/modes.js";
import { packagedAgent } from "../hub/helpers/process.js";

const dir = mkdtempSync(join(tmpdir(), "steward-install-"));
// Readable by anyone: the last test runs the agent as nobody.
chmodSync(dir, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TOKEN =
  "# steward enrol enrol: test\n-----BEGIN NATS USER JWT-----\neyJ0eXAi.e30.sig\n------END NATS USER JWT------\n-----BEGIN USER NKEY SEED-----\nSUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4\n------END USER NKEY SEED------\n";

async function hostAgent(): Promise<string> {
  const file = join(dir, "steward-agent.mjs");
  if (!existsSync(file)) copyFileSync(await packagedAgent(), file);
  return file;
}

function run(args: string[], options: { as?: "nobody" } = {}) {
  const argv = [process.execPath, join(dir, "steward-agent.mjs"), ...args];
  const command = options.as
    ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", ...argv]
    : argv;
  const result = spawnSync(command[0]!, command.slice(1), {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir },
    encoding: "utf8",
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The unit as `--dry-run` prints it (its lines after `file .../steward-agent.service`, unquoted). */
function printedUnit(stdout: string): string {
  const lines = stdout.split("\n");
  const start = lines.findIndex((line) => /^file \S+\/steward-agent\.service /.test(line));
  const unit: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith("  |")) break;
    unit.push(line.replace(/^ {2}\| ?/, ""));
  }
  return `${unit.join("\n")}\n`;
}

describe("agent install", () => {
  it("agent install - --dry-run prints every directory and file it would write, and writes nothing", async () => {
    await hostAgent();
    writeFileSync(join(dir, "enrol.creds"), TOKEN, { mode: 0o600 });
    const dry = run([
      "agent",
      "install",
      "--dry-run",
      "--nats",
      "nats://bus.example.net:4222",
      "--node",
      "web-3",
      "--token-file",
      "enrol.creds",
      "--labels",
      "role=web",
    ]);
    expect(dry.stderr).toBe("");
    expect(dry.code).toBe(0);
    for (const line of [
      "directory /usr/local/lib/steward (mode 0755)",
      "directory /etc/steward (mode 0755)",
      "directory /var/lib/steward (mode 0700)",
      "file /usr/local/lib/steward/steward-agent.mjs (mode 0755)",
      "file /usr/local/lib/steward/steward-agent.mjs.sha256 (mode 0644)",
      "file /etc/steward/agent.json (mode 0644)",
      "file /etc/steward/enrol.creds (mode 0600)",
      "file /etc/systemd/system/steward-agent.service (mode 0644)",
    ])
      expect(dry.stdout).toContain(line);
    expect(dry.stdout).toContain(
      `a copy of ${join(dir, "enrol.creds")} (the shared enrolment credential: not shown)`,
    );
    expect(dry.stdout).not.toContain("SUAIBDPBAUTWCWBKIO6XHQ");
    expect(dry.stdout).toContain('  |   "tokenFile": "/etc/steward/enrol.creds",');
    expect(dry.stdout).toMatch(/\(dry run: nothing written\)\n$/);
    const json = JSON.parse(
      run(["agent", "install", "--dry-run", "--nats", "nats://bus:4222", "--node", "web-3", "-o", "json"])
        .stdout,
    );
    expect(json.execStart).toEqual([
      process.execPath,
      "/usr/local/lib/steward/steward-agent.mjs",
      "agent",
      "--config",
      "/etc/steward/agent.json",
    ]);
  });

  it("agent install - the unit passes systemd-analyze verify, and every directive in it is justified in the README", () => {
    const unit = printedUnit(
      run(["agent", "install", "--dry-run", "--nats", "nats://bus:4222", "--node", "web-3"]).stdout,
    );
    for (const directive of [
      "KillMode=process",
      "Restart=on-failure",
      "After=network-online.target",
      "Wants=network-online.target",
      "StateDirectory=steward",
      "ExecStart=",
    ])
      expect(unit).toContain(directive);
    const file = join(dir, "steward-agent.service");
    writeFileSync(file, unit);
    const verify = spawnSync("systemd-analyze", ["verify", file], { encoding: "utf8" });
    expect(verify.stderr).toBe("");
    expect(verify.status).toBe(0);
    const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
    const section = readme.slice(
      readme.indexOf("## Adding a host"),
      readme.indexOf("\n## ", readme.indexOf("## Adding a host") + 1),
    );
    for (const line of unit.split("\n")) {
      const directive = /^([A-Za-z]+)=/.exec(line)?.[1];
      if (!directive) continue;
      // A row of the table: | `Directive=...` | why |
      expect(section, `${directive} in the README's table`).toMatch(
        new RegExp(`^\\| \`${directive}=[^\`]*\` +\\| \\S.{20,}`, "m"),
      );
    }
  });

  it("agent install - writes the files with safe modes and the host's identity; uninstall removes the unit, keeps the state", () => {
    const prefix = join(dir, "root");
    const installed = run([
      "agent",
      "install",
      "--prefix",
      prefix,
      "--nats",
      "nats://bus:4222",
      "--node",
      "web-3",
      "--token-file",
      "enrol.creds",
    ]);
    expect(installed.stderr).toBe("");
    expect(installed.code).toBe(0);
    const state = join(prefix, "var/lib/steward");
    expect(installed.stdout).toMatch(/^this host's identity: nkey U[A-Z2-7]{55}, age age1\w{58}$/m);
    expectModes([
      [state, 0o700],
      [join(state, "identity/nkey.seed"), 0o600],
      [join(state, "identity/age.key"), 0o600],
      [join(prefix, "etc/steward"), 0o755],
      [join(prefix, "etc/steward/enrol.creds"), 0o600],
      [join(prefix, "etc/steward/agent.json"), 0o644],
      [join(prefix, "usr/local/lib/steward/steward-agent.mjs"), 0o755],
    ]);
    expect(readFileSync(join(prefix, "usr/local/lib/steward/steward-agent.mjs"))).toEqual(
      readFileSync(join(dir, "steward-agent.mjs")),
    );
    expect(JSON.parse(readFileSync(join(prefix, "etc/steward/agent.json"), "utf8"))).toEqual({
      nats: "nats://bus:4222",
      node: "web-3",
      state,
      tokenFile: join(prefix, "etc/steward/enrol.creds"),
    });
    const seed = readFileSync(join(state, "identity/nkey.seed"), "utf8").trim();
    expect(installed.stdout).not.toContain(seed);

    const uninstalled = run(["agent", "uninstall", "--prefix", prefix]);
    expect(uninstalled.code).toBe(0);
    expect(uninstalled.stdout).toContain(
      `removed ${join(prefix, "etc/systemd/system/steward-agent.service")}`,
    );
    expect(uninstalled.stdout).toContain(`kept ${state} (this host's identity and run-once records`);
    for (const gone of [
      "etc/systemd/system/steward-agent.service",
      "usr/local/lib/steward",
      "etc/steward/enrol.creds",
    ])
      expect(existsSync(join(prefix, gone)), gone).toBe(false);
    expect(readFileSync(join(state, "identity/nkey.seed"), "utf8").trim()).toBe(seed);
  });

  it("agent install - on the real system it wants root: anyone else is told so, and nothing is written", () => {
    const refused = run(["agent", "install", "--nats", "nats://bus:4222", "--node", "web-3"], {
      as: "nobody",
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /^steward: steward agent install writes \/etc\/systemd\/system, .*: run it as root \(sudo\), or with --dry-run/,
    );
    const missing = run(["agent", "install", "--dry-run", "--node", "web-3"]);
    expect([missing.code, missing.stderr.trim()]).toEqual([
      2,
      "steward: --nats URL is required: the NATS server the agent pulls its attempts from",
    ]);
  });
});
