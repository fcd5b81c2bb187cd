/**
 * `steward agent --nats` with credentials that cannot work — another node's, another identity's,
 * a key the server does not know, none at all — ends at once with one line saying whose they
 * are, which node was asked for and what to do (exit 2): no stack trace, no waiting. With its own
 * (`--creds`, or `--nkey` as the nats CLI takes it) it runs, and logs one JSON line per attempt.
 * A real nats-server with `steward nats config`'s configuration; the agent as a real process.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../../src/cli/io.js";
import { main } from "../../../src/cli/main.js";
import { newUserSeed } from "../../../src/transport/nats/config.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { stopChild } from "../../../src/transport/nats/server.js";
import { makeRepo, removeTempDirs } from "../../helpers/git.js";
import { natsNode, testBundle } from "../../helpers/marker-agent.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";
import { nodeYaml } from "../../hub/helpers/fleet.js";
import { eventually, runSteward, startSteward } from "../../hub/helpers/process.js";

describe("nats agent credentials - the wrong ones are one line and exit 2, the right ones run", () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-creds-"));
  const creds = (path: string) => join(dir, "bus", "credentials", path);
  const children: ChildProcess[] = [];
  let server: TestNatsServer;
  let hub: NatsTransport | undefined;

  beforeAll(async () => {
    const io = { stdout: () => {}, stderr: () => {}, env: {}, cwd: dir, isTty: false };
    expect(
      await main(["nats", "config", "--static", "--out", "bus", "--node", "node-a", "--node", "node-b"], io),
    ).toBe(0);
    server = await startNatsServer({ configFile: join(dir, "bus", "nats-server.conf") });
  });

  afterAll(async () => {
    for (const child of children) await stopChild(child);
    await hub?.stop();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
    removeTempDirs();
  });

  /** `steward agent --nats URL --node node-a ...args`, bounded so that a hang fails the test. */
  const agent = (...args: string[]) =>
    runSteward(
      [
        "--state",
        join(dir, "state-a"),
        "agent",
        "--nats",
        server.url,
        "--node",
        "node-a",
        "--root",
        join(dir, "a"),
        ...args,
      ],
      { cwd: dir, timeoutMs: 20_000 },
    );

  it("nats agent credentials - the files say whose they are on their first line", () => {
    expect(readFileSync(creds("nodes/node-b.nk"), "utf8")).toMatch(
      /^# steward node node-b: NATS credentials from `steward nats config`; keep this file 0600\nSU[A-Z2-7]{56}\n$/,
    );
  });

  it("nats agent credentials - each wrong set is one line naming whose they are, the node asked for and the fix", async () => {
    const stranger = join(dir, "stranger.nk");
    writeFileSync(stranger, `${newUserSeed()}\n`, { mode: 0o600 });
    const own =
      'node "node-a"\'s own credentials (`steward nats config` writes them as credentials/nodes/node-a.nk)';
    const cases: [string, string[], string][] = [
      [
        "another node's",
        ["--creds", creds("nodes/node-b.nk")],
        `steward: the credentials ${creds("nodes/node-b.nk")} are node "node-b"'s, not node "node-a"'s: the NATS server refuses node "node-a"'s subjects to them (Permissions Violation for Subscription to "_INBOX_node_node-a.steward-check") — pass ${own}, or run this agent as --node node-b\n`,
      ],
      [
        "the viewer's, as --nkey",
        ["--nkey", creds("viewer.nk")],
        `steward: the credentials ${creds("viewer.nk")} are the viewer's, not node "node-a"'s: the NATS server refuses node "node-a"'s subjects to them (Permissions Violation for Subscription to "_INBOX_node_node-a.steward-check") — pass ${own}\n`,
      ],
      [
        "none",
        [],
        `steward: the NATS server at ${server.url} refused node "node-a" without credentials (Authorization Violation): pass --creds FILE or --nkey FILE with ${own}; on an operator-mode server, pass --token-file FILE (the enrolment credential) for the hub to issue them\n`,
      ],
    ];
    for (const [what, args, stderr] of cases) {
      const run = await agent(...args);
      expect({ what, code: run.code, stderr: run.stderr }).toEqual({ what, code: EXIT.usage, stderr });
    }
    const unknown = await agent("--nkey", stranger);
    expect(unknown.code).toBe(EXIT.usage);
    expect(unknown.stderr).toMatch(
      new RegExp(
        `^steward: the NATS server at \\S+ refused the credentials ${stranger} \\(public key U[A-Z2-7]{11}…\\) for node "node-a" \\(Authorization Violation\\): it does not know this key — pass node "node-a"'s own credentials \\(.*\\); after \`steward nats config\` added a key, reload the server \\(nats-server --signal reload\\)\\n$`,
      ),
    );
  }, 90_000);

  it("nats agent credentials - --nkey takes a seed only, and not together with --creds", async () => {
    const jwtCreds = join(dir, "user.creds");
    writeFileSync(
      jwtCreds,
      "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.eyJuYW1lIjoieCJ9.c2ln\n------END NATS USER JWT------\n",
      { mode: 0o600 },
    );
    const asNkey = await agent("--nkey", jwtCreds);
    expect(asNkey).toMatchObject({
      code: EXIT.usage,
      stderr: `steward: --nkey ${jwtCreds} is a .creds file (a user JWT and its seed), not an nkey seed: pass it with --creds\n`,
    });
    const both = await agent("--creds", creds("nodes/node-a.nk"), "--nkey", creds("nodes/node-a.nk"));
    expect(both).toMatchObject({
      code: EXIT.usage,
      stderr: "steward: --creds and --nkey both give this node's credentials: pass one of them\n",
    });
  }, 60_000);

  it("nats agent credentials - with its own --nkey the agent applies, and logs one JSON line per attempt", async () => {
    const recorded = recordEvents();
    hub = createNatsTransport({ servers: server.url, creds: creds("hub.nk"), nodes: ["node-a"] });
    await hub.start(recorded.events);
    const log = join(dir, "agent-a.log");
    children.push(
      await startSteward(
        [
          "--state",
          join(dir, "state-own"),
          "agent",
          "--nats",
          server.url,
          "--nkey",
          creds("nodes/node-a.nk"),
          "--node",
          "node-a",
          "--root",
          join(dir, "own"),
        ],
        { cwd: dir, log },
      ),
    );
    const bundle = testBundle("node-a", "web", 1);
    await hub.dispatch(bundle, natsNode("node-a"));
    await recorded.until(
      () => recorded.results.some((r) => r.attemptId === bundle.attemptId),
      "node-a's result",
    );
    const line = await eventually(
      () =>
        readFileSync(log, "utf8")
          .split("\n")
          .filter((text) => text.startsWith("{"))
          .map((text) => JSON.parse(text) as Record<string, unknown>)
          .find((entry) => entry.attemptId === bundle.attemptId),
      20_000,
      "the attempt's log line",
    );
    expect(line).toMatchObject({
      name: "steward-agent",
      node: "node-a",
      attemptId: bundle.attemptId,
      assignment: "web",
      generation: 1,
      outcome: "succeeded",
      durationMs: expect.any(Number),
      msg: "attempt succeeded",
    });
    expect(readFileSync(log, "utf8")).not.toMatch(/TypeError|\n\s+at /);
  }, 90_000);

  it("nats agent credentials - the hub given the viewer's credentials says so in one line too", async () => {
    const repo = makeRepo({ files: { "nodes/node-a.yaml": nodeYaml("node-a", { transport: "nats" }) } });
    const run = await runSteward(
      [
        "--state",
        join(dir, "hub-state"),
        "hub",
        "--repo",
        repo.dir,
        "--listen",
        "127.0.0.1:0",
        "--nats",
        server.url,
        "--nats-creds",
        creds("viewer.nk"),
      ],
      { cwd: dir, timeoutMs: 30_000 },
    );
    expect(run.code).toBe(EXIT.usage);
    expect(run.stderr).toBe(
      `steward: the credentials ${creds("viewer.nk")} are the viewer's, not the hub's: the NATS server refuses the hub's subjects to them (Permissions Violation for Subscription to "_INBOX_hub.steward-check") — pass the hub's own credentials (\`steward nats config\` writes them as credentials/hub.nk)\n`,
    );
  }, 60_000);
});
