import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readProcess } from "../../src/agent/proc.js";
import { AGENT_SCHEMA_ID, schemaFindings, validatorFor } from "../../src/model/schema.js";
import { bundle, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  await box.close();
});

const motd = { kind: "file" as const, path: "/etc/demo/motd", content: "hello\n" };

describe("agent report", () => {
  it("agent report - a full report of every instance held, valid against the schema, with node facts", async () => {
    const agent = box.agent();
    await agent.apply(bundle({ assignment: "a", resources: [motd], version: "3" }));
    await agent.apply(bundle({ assignment: "b", resources: [{ kind: "directory", path: "/srv/b" }] }));
    const report = await agent.observe();
    expect(schemaFindings(validatorFor(AGENT_SCHEMA_ID, "Report"), report)).toEqual([]);
    expect(report).toMatchObject({ apiVersion: "steward.dev/v1", kind: "Report", node: "node-1" });
    expect(report.agent).toMatchObject({ version: expect.any(String), hostname: expect.any(String) });
    expect(report.agent.capabilities).toEqual(
      expect.arrayContaining([
        "file",
        "directory",
        "symlink",
        "command",
        "service",
        "systemd-unit",
        "container",
        "package",
      ]),
    );
    expect(report.instances.map((i) => [i.assignment, i.generation, i.version])).toEqual([
      ["a", 1, "3"],
      ["b", 1, undefined],
    ]);
    expect(report.instances[0]!.lastAttempt).toMatchObject({ outcome: "succeeded", generation: 1 });
  });

  it("agent report - seq increases across agent processes sharing a state directory", async () => {
    await box.agent().apply(bundle({ resources: [motd] }));
    const first = await box.agent().observe();
    const second = await box.agent().observe();
    expect(second.seq!).toBeGreaterThan(first.seq!);
  });

  it("agent report - observing reads the system and changes nothing, however drifted", async () => {
    const agent = box.agent();
    await agent.apply(bundle({ resources: [motd] }));
    writeFileSync(box.host("/etc/demo/motd"), "defaced\n");
    const report = await agent.observe();
    expect(report.instances[0]!.resources[0]!.status).toBe("drifted");
    expect(readFileSync(box.host("/etc/demo/motd"), "utf8")).toBe("defaced\n");
  });

  it("agent report - retiring an instance stops reporting it and deletes or stops nothing", async () => {
    const agent = box.agent();
    const applied = await agent.apply(
      bundle({
        assignment: "old",
        resources: [motd, { kind: "service", name: "keeps-running", exec: ["sleep", "300"] }],
      }),
    );
    const pid = (applied.report.instances[0]!.resources[1]!.observed as { pid: number }).pid;
    await agent.retire("old");
    const report = await agent.observe();
    expect(report.instances).toEqual([]);
    expect(existsSync(box.host("/etc/demo/motd"))).toBe(true);
    expect(readProcess(pid)).toBeDefined();
  });

  it("agent report - an attempt for an older generation than the one held is refused, nothing applied", async () => {
    const agent = box.agent();
    await agent.apply(bundle({ generation: 5, resources: [motd] }));
    const late = await agent.apply(bundle({ generation: 4, resources: [{ ...motd, content: "older\n" }] }));
    expect(late.result).toMatchObject({ outcome: "failed", failureClass: "permanent", reason: "Superseded" });
    expect(readFileSync(box.host("/etc/demo/motd"), "utf8")).toBe("hello\n");
    expect(late.report.instances[0]!.generation).toBe(5);
  });

  it("agent report - a bundle for another node is refused before anything is applied", async () => {
    await expect(box.agent().apply(bundle({ node: "elsewhere", resources: [motd] }))).rejects.toMatchObject({
      code: "E_WRONG_NODE",
    });
    expect(existsSync(box.host("/etc/demo/motd"))).toBe(false);
  });

  it("agent report - the precompiled Bundle validator is generated from the current schemas", () => {
    const check = spawnSync(process.execPath, ["scripts/gen-agent-validator.mjs", "--check"], {
      encoding: "utf8",
    });
    expect(check.stderr).toBe("");
    expect(check.status).toBe(0);
  });
});
