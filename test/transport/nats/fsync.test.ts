/**
 * `steward nats config --fsync always|DURATION`: `sync_interval` in the jetstream block for a
 * nats-server that takes it (2.10 and later), left out with a warning for one that refuses it
 * (Debian's 2.9.10, installed here), a bad value a usage error before anything is written.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  installedNatsServerVersion,
  parseFsync,
  parseNatsServerVersion,
  planFsync,
  takesSyncInterval,
} from "../../../src/transport/nats/fsync.js";
import { locateNatsServer } from "../../../src/transport/nats/server.js";
import { removeNatsConfigDirs, runNatsConfig } from "../../helpers/nats-config.js";

describe("nats fsync - sync_interval only where the server takes it", () => {
  const dirs: string[] = [];
  afterAll(() => {
    removeNatsConfigDirs();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const run = runNatsConfig;
  /** A stand-in `nats-server` that only answers `--version` with `version`. */
  const fakeServer = (version: string) => {
    const dir = mkdtempSync(join(tmpdir(), "steward-fake-nats-"));
    dirs.push(dir);
    const binary = join(dir, "nats-server");
    writeFileSync(binary, `#!/bin/sh\necho "nats-server: ${version}"\n`);
    chmodSync(binary, 0o755);
    return binary;
  };

  it("nats fsync - the version gate: 2.10 and later take sync_interval, 2.9 and before do not", () => {
    const cases: [string, boolean][] = [
      ["nats-server: v2.9.10", false],
      ["nats-server: v2.9.25", false],
      ["nats-server: v2.10.0", true],
      ["nats-server: v2.10.24", true],
      ["nats-server: v2.12.1", true],
      ["nats-server: v3.0.0", true],
      ["nats-server: v1.4.1", false],
    ];
    for (const [output, takes] of cases) {
      const version = parseNatsServerVersion(output);
      expect(version, output).toBeDefined();
      expect(takesSyncInterval(version!), output).toBe(takes);
      expect(planFsync("always", version).write, output).toBe(takes);
    }
    expect(parseNatsServerVersion("nats-server: v2.9.10")).toEqual({ major: 2, minor: 9, patch: 10 });
    expect(parseNatsServerVersion("command not found")).toBeUndefined();
    const refused = planFsync({ duration: "10s" }, parseNatsServerVersion("v2.9.10"));
    expect(refused).toEqual({
      write: false,
      warning: expect.stringMatching(
        /^--fsync 10s left out: nats-server 2\.9\.10 here refuses sync_interval \(added in 2\.10\)/,
      ),
    });
    expect(planFsync("always", undefined)).toEqual({
      write: true,
      warning: expect.stringMatching(/no nats-server here to check its version/),
    });
  });

  it("nats fsync - always or a duration; anything else is refused with what to give", () => {
    expect(parseFsync("always")).toBe("always");
    for (const duration of ["10s", "1m", "500ms", "1h30m", "2m"])
      expect(parseFsync(duration)).toEqual({ duration });
    for (const bad of ["soon", "0s", "10", "", "-1s", "Always", "1d"])
      expect(() => parseFsync(bad), bad).toThrow(
        /is neither `always` nor a duration: give `always` .* or an interval such as 10s or 1m/,
      );
  });

  it("nats fsync - on the nats-server installed here (2.9.10) the field is left out, a warning says why and what to do, and the server starts with the file", async () => {
    expect(installedNatsServerVersion()).toEqual({ major: 2, minor: 9, patch: 10 });
    const result = await run(["--fsync", "always"], { PATH: process.env.PATH });
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(
      /^steward: warning: --fsync always left out: nats-server 2\.9\.10 here refuses sync_interval \(added in 2\.10\), so JetStream keeps its default of syncing every 2 minutes and a power failure can lose acknowledged writes — install nats-server 2\.10 or later and run this again\n$/,
    );
    const config = readFileSync(join(result.bus, "nats-server.conf"), "utf8");
    expect(config).not.toContain("sync_interval");
    execFileSync(locateNatsServer(), ["-t", "-c", join(result.bus, "nats-server.conf")], { stdio: "pipe" });
  });

  it("nats fsync - for a 2.10 server the jetstream block gets sync_interval, in every server of a cluster", async () => {
    const result = await run(["--fsync", "always", "--cluster", "3"], {
      NATS_SERVER: fakeServer("v2.10.24"),
    });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    for (const n of [1, 2, 3])
      expect(readFileSync(join(result.bus, `nats-${n}.conf`), "utf8")).toMatch(
        new RegExp(`jetstream \\{\\n {2}store_dir: ".*/nats-${n}"\\n {2}sync_interval: always\\n\\}`),
      );
    // Why the gate: the 2.9.10 here refuses the very file a 2.10 server is given.
    const refusal = (() => {
      try {
        execFileSync(locateNatsServer(), ["-t", "-c", join(result.bus, "nats-1.conf")], { stdio: "pipe" });
        return "";
      } catch (error) {
        return String((error as { stderr?: Buffer }).stderr);
      }
    })();
    expect(refusal).toMatch(/unknown field "sync_interval"/);
    const interval = await run(["--static", "--node", "a", "--fsync", "30s"], {
      NATS_SERVER: fakeServer("v2.12.1"),
    });
    expect(interval.code).toBe(0);
    expect(readFileSync(join(interval.bus, "nats-server.conf"), "utf8")).toContain(
      '  sync_interval: "30s"\n}',
    );
  });

  it("nats fsync - with no nats-server to ask, the field is written and the warning says how to undo it for an old server", async () => {
    const result = await run(["--fsync", "1m"], { NATS_SERVER: "/nonexistent/nats-server" });
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(
      /^steward: warning: --fsync 1m: no nats-server here to check its version, so sync_interval is written; a server before 2\.10 refuses to start with it .* remove the line there\n$/,
    );
    expect(readFileSync(join(result.bus, "nats-server.conf"), "utf8")).toContain('  sync_interval: "1m"\n');
  });

  it("nats fsync - --fsync soon is a usage error, and nothing is written", async () => {
    for (const args of [
      ["--fsync", "soon"],
      ["--static", "--node", "a", "--fsync", "soon"],
    ]) {
      const result = await run(args, { PATH: process.env.PATH });
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr).toMatch(/^steward: --fsync soon is neither `always` nor a duration/);
      expect(existsSync(result.bus)).toBe(false);
    }
  });
});
