/**
 * A host from nothing to converged, as the README's "Adding a host" says, against a real
 * nats-server in operator mode (`steward nats config`), a real `steward hub --nats-issuer` process
 * and a real fleet repository: the agent fetched from the hub and checked, `install` (its unit
 * passes systemd-analyze verify), its ExecStart run as systemd would, waiting and saying so until
 * a person approves, the approval a commit on a branch that is merged, then the agent's own JWT and
 * convergence — without a server reload. The enrolment credential may do nothing else; a second
 * host asking for the name with another key is refused and raised; a node removed from Git is cut
 * off and cannot connect again. Every log line, report, request and answer of the run is checked
 * for the hosts' private keys.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AuthorizationError,
  connect,
  credsAuthenticator,
  jwtAuthenticator,
  type NatsConnection,
} from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readHubFile, statePathsIn } from "../../../src/cli/hub-state.js";
import { main } from "../../../src/cli/main.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { runCli } from "../../helpers/cli.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { expectModes } from "../../helpers/modes.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { assignmentYaml, fleetYaml } from "../../hub/helpers/fleet.js";
import { eventually, packagedAgent, runSteward, startSteward } from "../../hub/helpers/process.js";

describe("nats enrolment - a host from nothing to converged: enrol, one approval, install", () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-enrol-"));
  const bus = join(dir, "bus");
  const credential = (path: string) => join(bus, "credentials", path);
  const hubState = join(dir, "hub-state");
  const host = join(dir, "host");
  const prefix = join(host, "root");
  const state = join(prefix, "var/lib/steward");
  const managed = join(dir, "managed");
  const children: ChildProcess[] = [];
  /** Everything said on the bus during the run (every subject), and everything printed. */
  const onTheBus: string[] = [];
  const printed: string[] = [];
  const repo = makeRepo({
    files: {
      "steward.yaml": fleetYaml({ heartbeat: { interval: "1s" } }),
      "assignments/web.yaml": assignmentYaml("web", {
        selector: { matchLabels: { role: "web" } },
        resources: [{ kind: "file", path: `${managed}/index.html`, content: "served by web-3\n" }],
      }),
    },
  });
  let server: TestNatsServer;
  let serverPid: number | undefined;
  let capture: NatsConnection;
  let hubUrl = "";
  let agent: ChildProcess | undefined;
  let agentExit: Promise<number | null> | undefined;
  const agentLog = join(dir, "agent.log");
  const text = (path: string) => (existsSync(path) ? readFileSync(path, "utf8") : "");
  const steward = async (...args: string[]) => {
    const run = await runCli(["--state", hubState, ...args], repo.dir, {
      STEWARD_GIT_AUTHOR_NAME: "Ana",
      STEWARD_GIT_AUTHOR_EMAIL: "ana@example.net",
      USER: "ana",
    });
    printed.push(run.stdout, run.stderr);
    return run;
  };
  /** The host's own agent file, as a new host runs it: `node steward-agent.mjs ...`. */
  const onHost = (args: string[], env: NodeJS.ProcessEnv = {}) => {
    const run = spawnSync(process.execPath, [join(host, "steward-agent.mjs"), ...args], {
      cwd: host,
      env: { PATH: process.env.PATH, HOME: host, STEWARD_ENROL_INTERVAL: "300ms", ...env },
      encoding: "utf8",
      timeout: 60_000,
    });
    printed.push(run.stdout, run.stderr);
    return { code: run.status, stdout: run.stdout, stderr: run.stderr };
  };

  beforeAll(async () => {
    await packagedAgent();
    const io = {
      stdout: (t: string) => printed.push(t),
      stderr: (t: string) => printed.push(t),
      env: {},
      cwd: dir,
      isTty: false,
    };
    expect(await main(["nats", "config", "--out", bus], io)).toBe(0);
    server = await startNatsServer({ configFile: join(bus, "nats-server.conf") });
    serverPid = server.process.pid;
    capture = await connect({
      servers: server.url,
      authenticator: credsAuthenticator(readFileSync(credential("hub.creds"))),
      inboxPrefix: "_INBOX_capture",
    });
    capture.subscribe(">", {
      callback: (_, msg) => {
        onTheBus.push(`${msg.subject} ${msg.string()}`);
      },
    });
    await capture.flush();
    children.push(
      await startSteward(
        [
          "--state",
          hubState,
          "hub",
          "--repo",
          repo.dir,
          "--listen",
          "127.0.0.1:0",
          "--sync-interval",
          "1s",
          "--nats",
          server.url,
          "--nats-creds",
          credential("hub.creds"),
          "--nats-issuer",
          credential("hub-issuer.json"),
        ],
        { cwd: dir, log: join(dir, "hub.log") },
      ),
    );
    hubUrl = await eventually(
      () => readHubFile(statePathsIn(hubState))?.url,
      60_000,
      `the hub (${text(join(dir, "hub.log"))})`,
    );
    mkdirSync(host, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    for (const child of [...children, ...(agent ? [agent] : [])]) await stopChild(child);
    await capture?.close();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
    removeTempDirs();
  });

  it("nats enrolment - the host fetches the agent from the hub and checks it against the operator's `steward agent checksum`", async () => {
    const response = await fetch(`${hubUrl}/agent/steward-agent.mjs`);
    expect(response.status).toBe(200);
    const bytes = Buffer.from(await response.arrayBuffer());
    writeFileSync(join(host, "steward-agent.mjs"), bytes);
    const checksum = await runSteward(["agent", "checksum"], { cwd: dir });
    expect(checksum.code).toBe(0);
    expect(checksum.stdout).toMatch(/^[0-9a-f]{64} {2}steward-agent\.mjs\n$/);
    // As the README has the host check it: sha256sum -c.
    writeFileSync(join(host, "SHA256SUMS"), checksum.stdout);
    const check = spawnSync("sha256sum", ["-c", "SHA256SUMS"], { cwd: host, encoding: "utf8" });
    expect(check.stdout).toBe("steward-agent.mjs: OK\n");
    expect(createHash("sha256").update(bytes).digest("hex")).toBe(checksum.stdout.split(" ")[0]);
  });

  it("nats enrolment - install writes a unit systemd-analyze verifies, and its ExecStart waits, saying so, for a person", async () => {
    writeFileSync(join(host, "enrol.creds"), readFileSync(credential("enrol.creds")), { mode: 0o600 });
    const dry = onHost([
      "agent",
      "install",
      "--dry-run",
      "--prefix",
      prefix,
      "--nats",
      server.url,
      "--node",
      "web-3",
      "--token-file",
      "enrol.creds",
      "--labels",
      "role=web",
    ]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain("(the shared enrolment credential: not shown)");
    expect(existsSync(prefix)).toBe(false);
    const installed = onHost([
      "agent",
      "install",
      "--prefix",
      prefix,
      "--nats",
      server.url,
      "--node",
      "web-3",
      "--token-file",
      "enrol.creds",
      "--labels",
      "role=web",
    ]);
    expect(installed.stderr).toBe("");
    expect(installed.code).toBe(0);
    expect(installed.stdout).toMatch(/systemd does not run here: start the agent with /);
    const unitFile = join(prefix, "etc/systemd/system/steward-agent.service");
    const verify = spawnSync("systemd-analyze", ["verify", unitFile], { encoding: "utf8" });
    expect(verify.stderr).toBe("");
    expect(verify.status).toBe(0);
    expectModes([
      [state, 0o700],
      [join(state, "identity"), 0o700],
      [join(state, "identity/nkey.seed"), 0o600],
      [join(state, "identity/age.key"), 0o600],
      [join(prefix, "etc/steward/enrol.creds"), 0o600],
      [join(prefix, "usr/local/lib/steward/steward-agent.mjs"), 0o755],
    ]);

    // The unit's command line, run as systemd runs it: nothing but the files install wrote.
    const execStart = /^ExecStart=(.+)$/m.exec(readFileSync(unitFile, "utf8"))![1]!.split(" ");
    agent = spawn(execStart[0]!, execStart.slice(1), {
      cwd: "/",
      env: { PATH: process.env.PATH, STEWARD_ENROL_INTERVAL: "300ms" },
      stdio: ["ignore", openSync(agentLog, "a"), openSync(agentLog, "a")],
    });
    const started = agent;
    agentExit = new Promise((resolve) => started.once("exit", (code) => resolve(code)));
    await eventually(
      () => /waiting for approval to join as \\"web-3\\"/.test(text(agentLog)),
      30_000,
      `the agent waiting (${text(agentLog)})`,
    );
    const listed = await steward("enrolments");
    expect(listed.stdout).toMatch(/web-3\s+U\S+\s+queued\s+.*role=web/);
    expect((await steward("tasks")).stdout).toMatch(/EnrolmentRequested\s+node web-3\s+open/);
  }, 90_000);

  it("nats enrolment - approved on a branch and merged: the agent gets its JWT, connects as itself and converges, no reload", async () => {
    const approved = await steward("enrolments", "approve", "web-3", "--roots", managed);
    expect(approved.code).toBe(0);
    // A person merges the pull request.
    repo.git("merge", "-q", "--ff-only", "steward/enrol-web-3");
    const page = join(managed, "index.html");
    await eventually(() => existsSync(page), 60_000, `the page on web-3 (agent: ${text(agentLog)})`);
    expect(readFileSync(page, "utf8")).toBe("served by web-3\n");
    expect(text(agentLog)).toContain('"msg":"agent running over NATS"');
    let status = await steward("status");
    for (let tries = 0; status.code !== 0 && tries < 60; tries++) {
      await new Promise((r) => setTimeout(r, 500));
      status = await steward("status");
    }
    expect(status.stdout).toMatch(/^right: no open conditions; 1\/1 instances converged/);
    // The same server process all along, never told to reload.
    expect(server.process.pid).toBe(serverPid);
    expect(server.process.log).not.toMatch(/[Rr]eload/);
    expect(statSync(join(state, "identity/nats.jwt")).mode & 0o777).toBe(0o600);
  }, 120_000);

  it("nats enrolment - the enrolment credential can do nothing but ask: the server refuses every other subject", async () => {
    const enrol = await connect({
      servers: server.url,
      authenticator: credsAuthenticator(readFileSync(credential("enrol.creds"))),
      inboxPrefix: "_INBOX_enrol",
    });
    const errors: string[] = [];
    const watch = (async () => {
      for await (const status of enrol.status())
        if (status.type === "error") errors.push(status.error.message);
    })();
    for (const subject of [
      "steward.attempt.web-3.>",
      "_INBOX_node_web-3.>",
      "steward.>",
      ">",
      "$KV.steward-observed.>",
    ])
      enrol.subscribe(subject);
    for (const subject of [
      "steward.agent.44.report.web-3",
      "steward.heartbeat.web-3",
      "$JS.API.INFO",
      "steward.tasks",
    ])
      enrol.publish(subject, "{}");
    await eventually(() => errors.length >= 9, 10_000, `nine refusals (${errors.join("; ")})`);
    for (const subject of [
      "steward.attempt.web-3.>",
      "_INBOX_node_web-3.>",
      "steward.>",
      ">",
      "$KV.steward-observed.>",
    ])
      expect(errors.join("\n")).toContain(`Permissions Violation for Subscription to "${subject}"`);
    for (const subject of [
      "steward.agent.44.report.web-3",
      "steward.heartbeat.web-3",
      "$JS.API.INFO",
      "steward.tasks",
    ])
      expect(errors.join("\n")).toContain(`Permissions Violation for Publish to "${subject}"`);
    await enrol.close();
    await watch;
  });

  it("nats enrolment - a second host asking to be web-3 with another key is refused and raised as a condition", async () => {
    const other = onHost([
      "--state",
      join(host, "impostor"),
      "agent",
      "enrol",
      "--nats",
      server.url,
      "--token-file",
      "enrol.creds",
      "--node",
      "web-3",
    ]);
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(
      /^steward: the hub refused this host joining as "web-3": the fleet declares node "web-3" with another key \(U\S+…\): refused — a person decides \(task \w+\)/m,
    );
    const status = await steward("status");
    expect(status.code).toBe(1);
    expect(status.stdout).toMatch(/IdentityConflict\s+node web-3\s+.*NameDeclaredWithAnotherKey/);
    expect((await steward("tasks")).stdout).toMatch(/IdentityConflict\s+node web-3\s+open/);
  });

  it("nats enrolment - a node removed from Git is cut off at once, and its credentials no longer connect", async () => {
    repo.commit("web-3 leaves the fleet", { "nodes/web-3.yaml": null });
    expect(
      await Promise.race([agentExit, new Promise((r) => setTimeout(() => r("still running"), 30_000))]),
    ).toBe(2);
    expect(text(agentLog)).toMatch(
      /the NATS server closed node \\"web-3\\"'s connection \([^)]*\): the hub issued them, and the server no longer takes them/,
    );
    const jwt = readFileSync(join(state, "identity/nats.jwt"), "utf8").trim();
    const seed = readFileSync(join(state, "identity/nkey.seed"), "utf8").trim();
    const refused = await connect({
      servers: server.url,
      authenticator: jwtAuthenticator(jwt, new TextEncoder().encode(seed)),
      reconnect: false,
    }).then(
      (nc) => nc.close().then(() => "connected"),
      (error) => error,
    );
    expect(refused).toBeInstanceOf(AuthorizationError);
    // Nothing steward owns is left wrong: the conflict about the name went with it.
    let status = await steward("status");
    for (let tries = 0; status.code !== 0 && tries < 40; tries++) {
      await new Promise((r) => setTimeout(r, 500));
      status = await steward("status");
    }
    expect(status.stdout).toMatch(/^right: no open conditions/);
    expect(server.process.pid).toBe(serverPid);
  }, 60_000);

  it("nats enrolment - no private key was ever printed, logged, reported or sent", async () => {
    await capture.flush();
    const secrets = [host, join(host, "impostor")].flatMap((root) => {
      const identity = join(root === host ? state : root, "identity");
      return [
        readFileSync(join(identity, "nkey.seed"), "utf8").trim(),
        readFileSync(join(identity, "age.key"), "utf8").trim(),
      ];
    });
    expect(secrets).toHaveLength(4);
    for (const secret of secrets) expect(secret).toMatch(/^(SU|AGE-SECRET-KEY-1)/);
    const said = {
      bus: onTheBus.join("\n"),
      "hub log": text(join(dir, "hub.log")),
      "agent log": text(agentLog),
      printed: printed.join("\n"),
    };
    // The run did say things: requests, reports and answers went by.
    expect(said.bus).toMatch(/^steward\.enrol\.request \{"kind":"EnrolmentRequest"/m);
    expect(said.bus).toMatch(/^steward\.agent\.44\.report\.web-3 /m);
    expect(said.bus).toMatch(/"status":"admitted"/);
    for (const [where, words] of Object.entries(said))
      for (const secret of secrets) {
        expect(words.includes(secret), `a private key in the ${where}`).toBe(false);
        expect(words.toLowerCase().includes(secret.toLowerCase()), `a private key in the ${where}`).toBe(
          false,
        );
      }
  });
});
