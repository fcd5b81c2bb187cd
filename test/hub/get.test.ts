import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/io.js";
import { runCli } from "../helpers/cli.js";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";
import { eventually, startSteward } from "./helpers/process.js";

const steward = (dir: string, ...argv: string[]) => runCli(["--state", dir, ...argv], dir, { USER: "alice" });

const fleet = {
  ...nodes("n1", "n2"),
  "assignments/app.yaml": assignmentYaml("app", {
    nodes: ["n1", "n2"],
    resources: [
      file("conf", "v1"),
      shell("check-config-accepted", "echo 'fatal: config v1 rejected' >&2; exit 1"),
    ],
    budget: { attempts: 1, within: "1h" },
  }),
};

describe("hub - get lists every kind, kubectl style", () => {
  it("hub - get KIND [NAME] for attempts, conditions, tasks and revisions; -o json|yaml|wide; unknown names exit 2", async () => {
    const h = await startHarness({ files: fleet });
    const { sha } = await h.commit("app v1");
    await h.settle();
    const attemptId = (await h.intent("app@n1")).lastAttemptId!;

    const attempts = await steward(h.dir, "get", "attempts");
    expect(attempts.code).toBe(EXIT.ok);
    expect(attempts.stdout.split("\n")[0]).toMatch(
      /^ID\s+INSTANCE\s+GEN\s+STATUS\s+CLASS\s+REASON\s+CREATED\s+ERROR$/,
    );
    expect(attempts.stdout).toMatch(
      new RegExp(
        `${attemptId}\\s+app@n1\\s+1\\s+failed\\s+transient\\s+CommandFailed\\s+\\d+s ago\\s+check-config-accepted: fatal: config v1 rejected`,
      ),
    );
    const one = JSON.parse(
      (await steward(h.dir, "get", "attempt", attemptId.slice(-6), "-o", "json")).stdout,
    );
    expect(one).toMatchObject({
      id: attemptId,
      instance: "app@n1",
      errorLine: "check-config-accepted: fatal: config v1 rejected",
    });

    const conditions = await steward(h.dir, "get", "conditions");
    expect(conditions.stdout.split("\n")[0]).toMatch(/^ID\s+TYPE\s+SUBJECT\s+SINCE/);
    expect(conditions.stdout).toMatch(/Stuck\s+instance app@n1/);
    const yaml = await steward(h.dir, "get", "conditions", "-o", "yaml");
    expect(yaml.stdout).toMatch(/^- id: \S+\n {2}type: Stuck\n/);

    const tasks = JSON.parse((await steward(h.dir, "get", "tasks", "--json")).stdout);
    expect(tasks).toHaveLength(2);
    expect(tasks[0]).toMatchObject({ task: { type: "Stuck", status: "open" } });

    const revisions = await steward(h.dir, "get", "revisions");
    expect(revisions.stdout).toMatch(
      new RegExp(`^${sha.slice(0, 12)}\\s+1\\s+applied\\s+\\d+s ago\\s+Test\\s+app\\s+app v1$`, "m"),
    );
    expect((await steward(h.dir, "get", "revisions", "-o", "wide")).stdout).toContain(sha);
    expect(
      JSON.parse((await steward(h.dir, "get", "revision", sha.slice(0, 8), "--json")).stdout),
    ).toMatchObject({ sha });

    // wide never cuts a message.
    const message = (await h.intent("app@n1")).message!;
    expect(message.length).toBeGreaterThan(70);
    expect((await steward(h.dir, "get", "intents")).stdout).not.toContain(message);
    expect((await steward(h.dir, "get", "intents", "-o", "wide")).stdout).toContain(message);

    for (const [kind, name] of [
      ["nodes", "n9"],
      ["instances", "app@n9"],
      ["attempts", "ZZZZZZ"],
      ["revisions", "fff0"],
    ]) {
      const missing = await steward(h.dir, "get", kind!, name!);
      expect({ kind, code: missing.code }).toEqual({ kind, code: EXIT.usage });
      expect(missing.stderr).toMatch(/^steward: no /);
    }
    const badFormat = await steward(h.dir, "get", "nodes", "-o", "xml");
    expect(badFormat.code).toBe(EXIT.usage);
    expect(badFormat.stderr).toMatch(/^steward: option '-o, --output <format>' argument 'xml' is invalid/);
  });

  it("hub - get --watch and describe --watch print again when what they show changes, until Ctrl-C", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v1")] }),
      },
    });
    await h.commit();
    await h.settle();
    const { readFileSync } = await import("node:fs");
    const read = (log: string) => readFileSync(join(h.dir, log), "utf8");
    const watch = (log: string, ...args: string[]) =>
      startSteward(["--state", h.dir, ...args, "--watch"], { cwd: h.dir, log: join(h.dir, log) });
    const watchers = [
      await watch("get.log", "get", "nodes"),
      await watch("describe.log", "describe", "node", "n1", "-o", "json"),
    ];
    // Listened for from the start: a watcher may end while the test waits for another.
    const closed = watchers.map(
      (watcher) => new Promise<number | null>((resolve) => watcher.on("close", resolve)),
    );
    try {
      await eventually(
        () => read("get.log").includes("n1    local      1/1        no"),
        30_000,
        "the first listing",
      );
      await eventually(() => read("describe.log").includes('"draining":false'), 30_000, "the first story");
      expect((await steward(h.dir, "drain", "n1", "--reason", "kernel")).code).toBe(EXIT.ok);
      await eventually(
        () => /--- \S+Z\n.*\nn1 +local +1\/1 +yes \(kernel\)/.test(read("get.log")),
        30_000,
        "the listing after the drain",
      );
      // JSON: one document per line, each parsing, the last one drained.
      await eventually(
        () => read("describe.log").trim().split("\n").length === 2,
        30_000,
        "the story after the drain",
      );
      const stories = read("describe.log")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
      expect(stories.map((s) => [s.kind, s.draining, s.drainReason])).toEqual([
        ["node", false, undefined],
        ["node", true, "kernel"],
      ]);
    } finally {
      for (const watcher of watchers) watcher.kill("SIGINT");
    }
    expect(await Promise.all(closed)).toEqual([0, 0]);
  }, 60_000);
});
