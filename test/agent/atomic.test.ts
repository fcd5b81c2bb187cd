import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { build } from "esbuild";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bundle, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  await box.close();
});

/** A real process that writes a file atomically and is SIGKILLed between the temp write and the rename. */
async function crashingWriter(dir: string): Promise<string> {
  const atomic = resolve("src/agent/atomic.ts");
  const out = join(dir, "crashing-writer.mjs");
  await build({
    stdin: {
      contents: `
        import { writeFileAtomic } from ${JSON.stringify(atomic)};
        await writeFileAtomic(process.argv[2], process.argv[3], {
          beforeRename: () => process.kill(process.pid, "SIGKILL"),
        });
        console.log("not reached");
      `,
      resolveDir: dirname(atomic),
      loader: "ts",
    },
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: out,
    logLevel: "silent",
  });
  return out;
}

describe("agent atomic writes", () => {
  it("agent atomic writes - a crash between temp write and rename leaves the old file whole", async () => {
    const path = box.host("/etc/demo/app.conf");
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, "old content\n");
    const writer = await crashingWriter(box.dir);
    const run = spawnSync(process.execPath, [writer, path, "new content\n"], { encoding: "utf8" });
    expect(run.signal).toBe("SIGKILL");
    expect(run.stdout).not.toContain("not reached");
    // The old file is intact; the complete new content only exists under the temporary name.
    expect(readFileSync(path, "utf8")).toBe("old content\n");
    const temporaries = readdirSync(dirname(path)).filter((name) => name.endsWith(".tmp"));
    expect(temporaries).toHaveLength(1);
    expect(temporaries[0]).toMatch(/^\.app\.conf\.steward-\d+-\d+\.tmp$/);
    expect(readFileSync(join(dirname(path), temporaries[0]!), "utf8")).toBe("new content\n");

    // The next apply is the ordinary path: it observes the old content and writes the desired one.
    const { result } = await box
      .agent()
      .apply(bundle({ resources: [{ kind: "file", path: "/etc/demo/app.conf", content: "desired\n" }] }));
    expect(result.resources[0]!.action).toBe("updated");
    expect(readFileSync(path, "utf8")).toBe("desired\n");
  });
});
