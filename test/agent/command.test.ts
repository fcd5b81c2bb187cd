import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CommandResource } from "../../src/model/generated.js";
import { again, bundle, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  await box.close();
});

/** A command that appends a line to /srv/runs.log under the root, so runs can be counted. */
const counting: CommandResource = {
  kind: "command",
  name: "count",
  run: ["sh", "-c", 'echo "run $STEWARD_GENERATION" >> "$STEWARD_ROOT/srv/runs.log"'],
};

function runs(): string[] {
  const path = box.host("/srv/runs.log");
  return existsSync(path) ? readFileSync(path, "utf8").trim().split("\n") : [];
}

describe("agent command - run once", () => {
  it("agent command - a redelivered attempt returns its earlier result and runs nothing", async () => {
    mkdirSync(box.host("/srv"), { recursive: true });
    const agent = box.agent();
    const attempt = bundle({ resources: [counting] });
    const first = await agent.apply(attempt);
    expect(first.result.resources[0]!.action).toBe("ran");
    const redelivered = await agent.apply(attempt);
    expect(redelivered.result).toEqual({ ...first.result, duplicate: true });
    // A fresh agent process on the same state directory knows the attempt too.
    const restarted = await box.agent().apply(attempt);
    expect(restarted.result.duplicate).toBe(true);
    expect(runs()).toEqual(["run 1"]);
  });

  it("agent command - a new attempt of the same generation does not run it again; a new generation does", async () => {
    mkdirSync(box.host("/srv"), { recursive: true });
    const agent = box.agent();
    const attempt = bundle({ resources: [counting] });
    await agent.apply(attempt);
    const second = await agent.apply(again(attempt));
    expect(second.result.resources[0]).toMatchObject({
      action: "unchanged",
      message: expect.stringMatching(/^ran for generation 1 at /),
    });
    expect(second.report.instances[0]!.resources[0]!.status).toBe("ok");
    const next = await agent.apply(bundle({ resources: [counting], generation: 2 }));
    expect(next.result.resources[0]!.action).toBe("ran");
    expect(runs()).toEqual(["run 1", "run 2"]);
  });

  it("agent command - creates decides instead of the run-once record", async () => {
    mkdirSync(box.host("/srv"), { recursive: true });
    const agent = box.agent();
    const command: CommandResource = {
      kind: "command",
      name: "init",
      run: ["sh", "-c", 'echo made > "$STEWARD_ROOT/srv/marker"; echo x >> "$STEWARD_ROOT/srv/runs.log"'],
      creates: "/srv/marker",
    };
    const attempt = bundle({ resources: [command] });
    expect((await agent.apply(attempt)).result.resources[0]!.action).toBe("ran");
    expect((await agent.apply(again(attempt))).result.resources[0]).toMatchObject({
      action: "skipped",
      message: "creates /srv/marker exists",
    });
    // Someone removed what it creates: the same generation runs it again.
    (await import("node:fs")).rmSync(box.host("/srv/marker"));
    expect((await agent.apply(again(attempt))).result.resources[0]!.action).toBe("ran");
    expect(runs()).toHaveLength(2);
  });

  it("agent command - unless exiting 0 skips it", async () => {
    mkdirSync(box.host("/srv"), { recursive: true });
    writeFileSync(box.host("/srv/ready"), "");
    const { result } = await box
      .agent()
      .apply(
        bundle({ resources: [{ ...counting, unless: ["sh", "-c", 'test -f "$STEWARD_ROOT/srv/ready"'] }] }),
      );
    expect(result.resources[0]!.action).toBe("skipped");
    expect(runs()).toEqual([]);
  });

  it("agent command - a command that exits 0 but does not create its creates path fails permanently", async () => {
    const { result } = await box
      .agent()
      .apply(
        bundle({ resources: [{ kind: "command", name: "liar", run: ["true"], creates: "/srv/never" }] }),
      );
    expect(result.resources[0]).toMatchObject({ action: "failed", failureClass: "permanent" });
    expect(result.reason).toBe("CreatesMissing");
  });
});

describe("agent command - environment and failures", () => {
  it("agent command - runs with STEWARD_* in the environment and its cwd mapped under the root", async () => {
    mkdirSync(box.host("/srv/work"), { recursive: true });
    const attempt = bundle({
      generation: 7,
      resources: [
        {
          kind: "command",
          name: "env",
          cwd: "/srv/work",
          env: { EXTRA: "yes" },
          run: [
            "sh",
            "-c",
            'echo "$STEWARD_ROOT|$STEWARD_NODE|$STEWARD_ASSIGNMENT|$STEWARD_GENERATION|$STEWARD_ATTEMPT|$EXTRA|$(pwd)" > seen',
          ],
        },
      ],
    });
    await box.agent().apply(attempt);
    expect(readFileSync(box.host("/srv/work/seen"), "utf8").trim()).toBe(
      `${box.root}|node-1|demo|7|${attempt.attemptId}|yes|${box.host("/srv/work")}`,
    );
  });

  const failures: {
    name: string;
    run: string[];
    timeout?: string;
    reason: string;
    failureClass: string;
    evidence?: RegExp;
  }[] = [
    {
      name: "an executable that does not exist fails permanently",
      run: ["/nonexistent/steward-tool"],
      reason: "CommandNotFound",
      failureClass: "permanent",
    },
    {
      name: "a non-zero exit fails transiently with its output as evidence",
      run: ["sh", "-c", "echo connecting to db >&2; exit 3"],
      reason: "CommandFailed",
      failureClass: "transient",
      evidence: /exit code 3[\s\S]*connecting to db/,
    },
    {
      name: "a command past its timeout is killed and fails transiently",
      run: ["sleep", "30"],
      timeout: "300ms",
      reason: "CommandTimedOut",
      failureClass: "transient",
    },
  ];
  for (const f of failures) {
    it(`agent command - ${f.name}`, async () => {
      const command: CommandResource = { kind: "command", name: "c", run: f.run };
      if (f.timeout) command.timeout = f.timeout;
      const { result, report } = await box.agent().apply(bundle({ resources: [command] }));
      expect(result).toMatchObject({ outcome: "failed", reason: f.reason, failureClass: f.failureClass });
      expect(result.resources[0]).toMatchObject({ action: "failed", failureClass: f.failureClass });
      if (f.evidence) expect(result.resources[0]!.evidence).toMatch(f.evidence);
      expect(report.instances[0]!.resources[0]).toMatchObject({
        status: f.failureClass === "permanent" ? "failed" : "waiting",
        reason: f.reason,
        counters: { consecutiveFailures: 1, everApplied: false },
      });
    });
  }
});
