import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { AgentReply, Node } from "../../../src/model/generated.js";
import { loadAgentArtifact } from "../../../src/transport/ssh/index.js";
import { testAgentFile, testBundle } from "./fixtures.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

describe("build:agent", () => {
  it("build:agent - writes one self-contained file and its sha256, naming the version", () => {
    const file = testAgentFile();
    expect(readdirSync(dirname(file)).sort()).toEqual(["steward-agent.mjs", "steward-agent.mjs.sha256"]);
    const bytes = readFileSync(file);
    const digest = createHash("sha256").update(bytes).digest("hex");
    expect(readFileSync(`${file}.sha256`, "utf8")).toBe(`${digest}  steward-agent.mjs\n`);
    expect(bytes.toString("utf8").split("\n")[1]).toMatch(
      new RegExp(`^// steward-agent ${VERSION.replace(/\./g, "\\.")} `),
    );
    expect(loadAgentArtifact(file)).toMatchObject({
      sha256: digest,
      version: VERSION,
      id: `${VERSION}-${digest.slice(0, 12)}`,
    });
  });

  it("build:agent - the file runs the agent with plain node in a directory with nothing else", () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-agent-alone-"));
    copyFileSync(testAgentFile(), join(dir, "steward-agent.mjs"));
    const env = { PATH: dirname(process.execPath), HOME: dir };
    const version = spawnSync(process.execPath, ["steward-agent.mjs", "--version"], {
      cwd: dir,
      env,
      encoding: "utf8",
    });
    expect(version.stdout.trim()).toBe(VERSION);
    const observe = spawnSync(
      process.execPath,
      ["steward-agent.mjs", "--state", "s", "agent", "observe", "--node", "alone-1", "--json"],
      {
        cwd: dir,
        env,
        encoding: "utf8",
      },
    );
    expect(observe.status).toBe(0);
    expect(JSON.parse(observe.stdout)).toMatchObject({ kind: "Report", node: "alone-1", instances: [] });
    // An attempt applied by it: the file written under --root, the version baked in reported.
    const node: Node = {
      apiVersion: "steward.dev/v1",
      kind: "Node",
      metadata: { name: "alone-1" },
      spec: { transport: "local", roots: ["/srv"] },
    };
    const bundle = testBundle(node, {
      generation: 1,
      resources: [
        { kind: "file", name: "motd", path: "/srv/motd", content: "alone-1 is managed by steward\n" },
      ],
    });
    const apply = spawnSync(
      process.execPath,
      ["steward-agent.mjs", "agent", "apply", "--bundle", "-", "--root", "r", "--state", "s", "--json"],
      { cwd: dir, env, input: JSON.stringify(bundle), encoding: "utf8" },
    );
    expect(apply.stderr).toBe("");
    expect(apply.status).toBe(0);
    const reply = JSON.parse(apply.stdout) as AgentReply;
    expect(reply.result.outcome).toBe("succeeded");
    expect(reply.report.agent.version).toBe(VERSION);
    expect(readFileSync(join(dir, "r", "srv", "motd"), "utf8")).toBe("alone-1 is managed by steward\n");
  });

  it("build:agent - refuses to bundle the hub's code, naming who imports it", () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-agent-hub-"));
    const entry = join(dir, "entry.ts");
    writeFileSync(
      entry,
      `import { WorkQueue } from "${join(ROOT, "src/hub/queue.js")}";\nconsole.log(WorkQueue);\n`,
    );
    const run = spawnSync(
      process.execPath,
      [join(ROOT, "scripts/build-agent.mjs"), "--entry", entry, "--out", join(dir, "out.mjs")],
      { cwd: ROOT, encoding: "utf8" },
    );
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain("src/hub/queue.js is the hub's code, imported by");
    expect(readdirSync(dir)).toEqual(["entry.ts"]);
  });

  it("build:agent - refuses to bundle a native addon, naming who imports it", () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-agent-native-"));
    const entry = join(dir, "entry.ts");
    writeFileSync(entry, 'import Database from "better-sqlite3";\nconsole.log(Database);\n');
    const run = spawnSync(
      process.execPath,
      [join(ROOT, "scripts/build-agent.mjs"), "--entry", entry, "--out", join(dir, "out.mjs")],
      {
        cwd: ROOT,
        encoding: "utf8",
      },
    );
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain("better-sqlite3 is a native addon");
    expect(readdirSync(dir)).toEqual(["entry.ts"]);
  });
});
