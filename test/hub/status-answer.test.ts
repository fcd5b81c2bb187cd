import { describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/io.js";
import { runCli } from "../helpers/cli.js";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";
import { notesPublisher } from "./helpers/notes.js";

const steward = (dir: string, ...argv: string[]) => runCli(["--state", dir, ...argv], dir, { USER: "alice" });

describe("hub - status has three answers", () => {
  it("hub - status: a failure within budget is converging (exit 3), with the reason, the retries out of the budget and the next retry", async () => {
    const notes = notesPublisher(100);
    const h = await startHarness({
      hubOptions: notes.hubOptions,
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [
            file("conf", "v1"),
            shell("migrate", "echo migrating; echo 'ERROR: table locked' >&2; exit 3"),
          ],
          budget: { attempts: 10, within: "1h" },
        }),
      },
    });
    await h.commit();
    await h.settle();
    await h.advance(100);
    await notes.publisher().flushNow();
    const intent = await h.intent("app@n1");
    expect(intent).toMatchObject({ status: "backoff", failures: 1 });
    const text = await steward(h.dir, "status");
    expect(text.code).toBe(EXIT.converging);
    expect(text.stdout).toMatch(/^converging: no open conditions; 0\/1 instances converged\n/);
    // "in 1s" or, on a slow machine where the real clock passed the retry time, "due now".
    expect(text.stdout).toMatch(
      new RegExp(
        `failing within budget:\n  app@n1  failing within budget  retry 1/10, next at ${intent.nextAttemptAt!.replace(/[.]/g, "\\.")} \\((in \\d+s|due now)\\)`,
      ),
    );
    expect(text.stdout).toContain(
      "CommandFailed: 1 of 2 resources failed (first: migrate: command migrate exited with 3)",
    );
    expect(text.stdout).toContain("migrate: ERROR: table locked");
    expect(text.stdout).toContain(`retry 1/10, next at ${intent.nextAttemptAt}`);
    expect(text.stdout).toContain(`attempt ${intent.lastAttemptId}`);
    const json = JSON.parse((await steward(h.dir, "status", "--json")).stdout);
    expect(json).toMatchObject({
      answer: "converging",
      ok: false,
      failing: [{ instance: "app@n1", state: "failing", failures: 1, nextAttemptAt: intent.nextAttemptAt }],
    });
    const yaml = await steward(h.dir, "status", "-o", "yaml");
    expect(yaml.stdout).toMatch(/^answer: converging\n/);
    // The commit's statuses are pending: 3 as well.
    const revision = await steward(h.dir, "status", "--revision", intent.revision.slice(0, 8), "-o", "json");
    expect(JSON.parse(revision.stdout).fleet).toBe("pending");
    expect(revision.code).toBe(EXIT.converging);
    notes.publisher().close();
  });

  it("hub - status: open conditions are not right (exit 1); a converged fleet is right (exit 0)", async () => {
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
    const blocked = await steward(h.dir, "status");
    expect(blocked.code).toBe(EXIT.problems);
    expect(blocked.stdout).toMatch(/^not right: 1 open condition; 0\/1 instances converged\n/);
    expect(blocked.stdout).toContain("failed:\n  app@n1  blocked  CommandNotFound: ");
    expect(JSON.parse((await steward(h.dir, "status", "-o", "json")).stdout).answer).toBe("not-right");
    h.write({
      "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v2")] }),
    });
    await h.commit();
    await h.settle();
    const right = await steward(h.dir, "status");
    expect(right).toMatchObject({
      code: EXIT.ok,
      stdout: "right: no open conditions; 1/1 instances converged\n",
    });
  });

  it("hub - status: observe-only differences are listed and do not make it converging; drained nodes are listed and not counted", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1", "n2"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1", "n2"],
          resources: [file("conf", "v1")],
        }),
        "assignments/audit.yaml": assignmentYaml("audit", {
          nodes: ["n1"],
          resources: [file("audit", "v1")],
          rollout: { stage: "observe" },
        }),
      },
    });
    await h.commit();
    await h.settle();
    expect((await steward(h.dir, "drain", "n2", "--reason", "disk swap")).code).toBe(EXIT.ok);
    h.write({
      "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1", "n2"], resources: [file("conf", "v2")] }),
    });
    await h.commit();
    await h.settle();
    const status = await steward(h.dir, "status");
    expect(status.stdout).toBe(
      [
        "right: no open conditions; 1/1 instances converged (not counted: 1 observe-only, 1 drained)",
        "observe-only (compared, not delivered):",
        "  audit@n1  observe-only  observe-only: not applied on n1 yet",
        "drained (not counted):",
        "  app@n2  drained  node n2 is draining",
        "",
      ].join("\n"),
    );
    expect(status.code).toBe(EXIT.ok);
  });
});
