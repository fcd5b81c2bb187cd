import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/io.js";
import { runCli } from "../helpers/cli.js";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const steward = (dir: string, ...argv: string[]) => runCli(["--state", dir, ...argv], dir, { USER: "alice" });

let listener: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
  listener = undefined;
});

describe("hub - describe tells an object's whole story", () => {
  it("hub - describe instance shows a failing command's exit code and last lines of output, its attempts and history", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/db.yaml": assignmentYaml("db", {
          nodes: ["n1"],
          resources: [
            file("conf", "v1"),
            shell(
              "migrate",
              "echo 'migrating schema 6 -> 7'; echo 'psql: error: connection refused' >&2; exit 3",
            ),
          ],
          budget: { attempts: 10, within: "1h" },
        }),
      },
    });
    const { sha } = await h.commit("db: migrate to 7");
    await h.settle();
    const intent = await h.intent("db@n1");
    const text = await steward(h.dir, "describe", "instance", "db@n1");
    expect(text.code).toBe(EXIT.ok);
    const out = text.stdout;
    expect(out).toContain("Instance:    db@n1\n");
    expect(out).toMatch(/^State: {7}↻ failing within budget — retry 1\/10, next at /m);
    expect(out).toContain("Error:       migrate: psql: error: connection refused\n");
    expect(out).toContain(
      `Desired:     generation 1, running (revision ${sha.slice(0, 12)} "db: migrate to 7")`,
    );
    expect(out).toContain(`spec hash ${intent.hash}`);
    expect(out).toMatch(
      /waiting {2}command migrate: CommandFailed: command migrate exited with 3 \[1 failure in a row, never applied\]/,
    );
    // The evidence: exit code and the last lines of its output.
    expect(out).toContain(
      [
        "| exit code 3",
        "| stdout:",
        "| migrating schema 6 -> 7",
        "| stderr:",
        "| psql: error: connection refused",
      ]
        .map((line) => `          ${line}`)
        .join("\n"),
    );
    expect(out).toContain(`${intent.lastAttemptId}  db@n1 generation 1  failed (transient, CommandFailed)`);
    expect(out).toMatch(
      /History \(newest generation first\):\n {4}GEN +STATE.*\n {4}1 +failing within budget +failed +transient +1 /,
    );

    const json = JSON.parse((await steward(h.dir, "describe", "instance", "db@n1", "-o", "json")).stdout);
    expect(json).toMatchObject({
      kind: "instance",
      now: { state: "failing", failures: 1 },
      desired: { generation: 1, hash: intent.hash, revision: sha },
      observed: {
        resources: [
          { name: "conf", status: "ok" },
          { name: "migrate", errorLine: "psql: error: connection refused" },
        ],
      },
      attempts: [{ id: intent.lastAttemptId, status: "failed", failureClass: "transient" }],
      history: [{ generation: 1, state: "failing" }],
    });
    const attempt = await steward(h.dir, "describe", "attempt", intent.lastAttemptId!);
    expect(attempt.stdout).toContain("Error:       migrate: psql: error: connection refused\n");
    expect(attempt.stdout).toContain("migrating schema 6 -> 7");

    // A revision is whatever the hub's copy of the fleet repository resolves.
    for (const rev of [sha, sha.slice(0, 7), "main", "HEAD", "HEAD~0", "main^0"]) {
      const revision = await steward(h.dir, "describe", "revision", rev, "--json");
      expect({ rev, code: revision.code }).toEqual({ rev, code: EXIT.ok });
      expect(JSON.parse(revision.stdout)).toMatchObject({
        kind: "revision",
        sha,
        subject: "db: migrate to 7",
      });
    }
    const node = await steward(h.dir, "describe", "node", "n1");
    expect(node.stdout).toMatch(
      /db@n1 +1 +0 +↻ failing within budget +1 of 2 resources failed .*; migrate: psql: error: connection refused/,
    );

    const missing = await steward(h.dir, "describe", "revision", "HEAD~5");
    expect(missing.code).toBe(EXIT.usage);
    expect(missing.stderr).toMatch(/^steward: "HEAD~5" names no commit in /);
    const noInstance = await steward(h.dir, "describe", "instance", "db");
    expect(noInstance).toMatchObject({
      code: EXIT.usage,
      stderr:
        'steward: no instance "db" (instances are named ASSIGNMENT@NODE): `steward get instances` lists 1 (db@n1)\n',
    });
  });

  it("hub - describe condition shows the evidence, what was tried, the resolver, the task and the history", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [{ kind: "command", name: "reload", run: ["/nonexistent/reload"] }],
        }),
      },
    });
    await h.commit();
    await h.settle();
    const [condition] = await h.store.conditions.list({ status: "open" });
    const text = await steward(h.dir, "describe", "condition", condition!.id.slice(-8));
    expect(text.code).toBe(EXIT.ok);
    expect(text.stdout).toContain(`Blocked (open) ${condition!.id} on instance app@n1`);
    expect(text.stdout).toMatch(/tried: {5}[0-9A-Z]{26}\n/);
    expect(text.stdout).toContain("resolver:  operator");
    expect(text.stdout).toMatch(/task: {6}[0-9A-Z]{26} open/);
    expect(text.stdout).toMatch(/history:\n {10}\S+ opened CommandNotFound/);
    expect(text.stdout).toContain("evidence:\n          failureClass: permanent");
  });

  it("hub - describe instance shows why a service crashed: EADDRINUSE from its own output", async () => {
    listener = createServer();
    await new Promise<void>((resolve) => listener!.listen(0, "127.0.0.1", resolve));
    const port = (listener.address() as { port: number }).port;
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/web.yaml": assignmentYaml("web", {
          nodes: ["n1"],
          resources: [
            file(
              "server",
              `require("node:net").createServer().listen(${port}, "127.0.0.1");\n`,
              "/srv/web/server.js",
            ),
            {
              kind: "service",
              name: "web",
              exec: [process.execPath, "server.js"],
              cwd: "/srv/web",
              dependsOn: ["server"],
            },
          ],
          budget: { attempts: 10, within: "1h" },
        }),
      },
    });
    await h.commit();
    await h.settle();
    const line = `Error: listen EADDRINUSE: address already in use 127.0.0.1:${port}`;
    const text = await steward(h.dir, "describe", "instance", "web@n1");
    expect(text.stdout).toContain(`Error:       web: ${line}\n`);
    expect(text.stdout).toMatch(
      /service web: ServiceExited: service web exited with 1 within \d+ ms of starting/,
    );
    expect(text.stdout).toContain(`          error: ${line}\n`);
    expect(text.stdout).toMatch(/\| node:events:\d+\n/);
    const status = await steward(h.dir, "status");
    expect(status.stdout).toContain(`web: ${line}`);
  });
});
