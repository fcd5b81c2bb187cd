import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { binPath } from "../helpers/cli.js";

describe("cli - launcher", () => {
  it("cli launcher - run as a program (as npm and npx run it), steward starts with malloc's mmap threshold fixed, and runs", () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-launcher-"));
    try {
      // Loaded by the Node process the shebang starts, before steward: it says what it was given.
      const probe = join(dir, "probe.mjs");
      writeFileSync(
        probe,
        'process.stderr.write(`tunables: ${process.env.GLIBC_TUNABLES ?? "(none)"}\\n`);\n',
      );
      const { GLIBC_TUNABLES: _, ...env } = process.env;
      const run = spawnSync(binPath, ["--version"], {
        encoding: "utf8",
        env: { ...env, NODE_OPTIONS: `--import=${probe}` },
      });
      expect(run.error).toBeUndefined();
      expect(run.stderr).toContain("tunables: glibc.malloc.mmap_threshold=1048576\n");
      expect(run.status).toBe(0);
      expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
