/**
 * The package driver against the real dpkg database and apt-get. Installing uses a local apt
 * repository (file:, trusted) with one dummy package built with dpkg-deb, so no network is needed;
 * apt-get is pointed at it with `-o` options and never touches the host's own sources or lists.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { parseDpkgQuery } from "../../src/agent/drivers/package.js";
import { bundle, type Sandbox, sandbox } from "./helpers.js";

const DUMMY = "steward-test-dummy";
let repo: string;
let aptOptions: string[];

function need(tool: string, install: string): void {
  const found = spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;
  if (!found) throw new Error(`${tool} is missing: ${install}`);
}

function installedVersion(name: string): string | undefined {
  const run = spawnSync("dpkg-query", ["-W", "-f", "${db:Status-Abbrev}\t${Version}", name], {
    encoding: "utf8",
  });
  const parsed = parseDpkgQuery(run.stdout);
  return parsed.installed ? parsed.version : undefined;
}

function purgeDummy(): void {
  spawnSync("dpkg", ["--purge", DUMMY]);
}

beforeAll(() => {
  need("dpkg-query", "the package driver needs a Debian-based host");
  need("apt-get", "the package driver needs a Debian-based host");
  need("dpkg-deb", "apt-get install -y dpkg-dev");
  need("dpkg-scanpackages", "apt-get install -y dpkg-dev");
  repo = mkdtempSync(join(tmpdir(), "steward-apt-repo-"));
  const pkg = join(repo, "build", "DEBIAN");
  mkdirSync(pkg, { recursive: true });
  writeFileSync(
    join(pkg, "control"),
    `Package: ${DUMMY}\nVersion: 1.0-1\nArchitecture: all\nMaintainer: steward tests <tests@steward.invalid>\nDescription: dummy package for steward agent tests\n`,
  );
  mkdirSync(join(repo, "pool"));
  execFileSync("dpkg-deb", ["--build", join(repo, "build"), join(repo, "pool", `${DUMMY}_1.0-1_all.deb`)]);
  execFileSync("sh", ["-c", "dpkg-scanpackages . /dev/null > Packages 2>/dev/null"], {
    cwd: join(repo, "pool"),
  });
  writeFileSync(join(repo, "sources.list"), `deb [trusted=yes] file:${join(repo, "pool")} ./\n`);
  for (const dir of ["lists/partial", "cache/archives/partial"])
    mkdirSync(join(repo, dir), { recursive: true });
  aptOptions = [
    `Dir::Etc::SourceList=${join(repo, "sources.list")}`,
    `Dir::Etc::SourceParts=${join(repo, "no-parts")}`,
    `Dir::State::Lists=${join(repo, "lists")}`,
    `Dir::Cache=${join(repo, "cache")}`,
  ];
  execFileSync("apt-get", ["update", "-q", ...aptOptions.flatMap((o) => ["-o", o])], { stdio: "ignore" });
  purgeDummy();
});

afterAll(() => {
  purgeDummy();
  rmSync(repo, { recursive: true, force: true });
});

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  purgeDummy();
  await box.close();
});

describe("agent package - observe from the dpkg database", () => {
  it("agent package - an installed package is ok with the version dpkg reports", async () => {
    const report = await box
      .agent()
      .apply(bundle({ resources: [{ kind: "package", name: "coreutils" }] }))
      .then((reply) => reply.report);
    const resource = report.instances[0]!.resources[0]!;
    expect(resource.status).toBe("ok");
    expect(resource.observed).toEqual({
      installed: true,
      version: installedVersion("coreutils"),
      status: "ii",
    });
  });

  it("agent package - removed behind the agent's back, it is observed as drifted and the next apply heals it", async () => {
    const agent = box.agent({ tools: { aptOptions } });
    const attempt = bundle({ resources: [{ kind: "package", name: DUMMY }] });
    await agent.apply(attempt);
    purgeDummy();
    const report = await agent.observe();
    expect(report.instances[0]!.resources[0]).toMatchObject({
      status: "drifted",
      observed: { installed: false },
      diff: ["not installed → installed"],
      counters: { everApplied: true },
    });
    // Observing installed nothing.
    expect(installedVersion(DUMMY)).toBeUndefined();
    const healed = await agent.apply({ ...attempt, attemptId: `${attempt.attemptId}-again` });
    expect(healed.result.resources[0]!.action).toBe("created");
    expect(installedVersion(DUMMY)).toBe("1.0-1");
  });

  it("agent package - parses dpkg status lines", () => {
    expect(parseDpkgQuery("ii \t9.1-1\n")).toEqual({ installed: true, version: "9.1-1", status: "ii" });
    expect(parseDpkgQuery("rc \t1.0\n")).toEqual({ installed: false, status: "rc" });
    expect(parseDpkgQuery("")).toEqual({ installed: false });
  });
});

describe("agent package - apply with apt-get", () => {
  it("agent package - absent → installed, already right → nothing done, ensure absent → removed", async () => {
    const agent = box.agent({ tools: { aptOptions } });
    const present = await agent.apply(bundle({ resources: [{ kind: "package", name: DUMMY }] }));
    expect(present.result.resources[0]).toMatchObject({ action: "created" });
    expect(installedVersion(DUMMY)).toBe("1.0-1");
    expect(present.report.instances[0]!.resources[0]).toMatchObject({
      status: "ok",
      observed: { version: "1.0-1" },
    });

    const again = await agent.apply(
      bundle({ resources: [{ kind: "package", name: DUMMY, version: "1.0-1" }], generation: 2 }),
    );
    expect(again.result.resources[0]!.action).toBe("unchanged");

    const absent = await agent.apply(
      bundle({ resources: [{ kind: "package", name: DUMMY, ensure: "absent" }], generation: 3 }),
    );
    expect(absent.result.resources[0]).toMatchObject({ action: "removed" });
    expect(installedVersion(DUMMY)).toBeUndefined();
  });

  it("agent package - a package no source has fails permanently with PackageNotFound", async () => {
    const { result, report } = await box
      .agent({ tools: { aptOptions } })
      .apply(bundle({ resources: [{ kind: "package", name: "steward-no-such-package" }] }));
    expect(result).toMatchObject({ outcome: "failed", failureClass: "permanent", reason: "PackageNotFound" });
    expect(result.resources[0]!.evidence).toContain("Unable to locate package");
    expect(report.instances[0]!.resources[0]).toMatchObject({
      status: "failed",
      counters: { everApplied: false },
    });
  });

  it("agent package - a version no source has fails permanently", async () => {
    const { result } = await box
      .agent({ tools: { aptOptions } })
      .apply(bundle({ resources: [{ kind: "package", name: DUMMY, version: "9.9-9" }] }));
    expect(result).toMatchObject({ failureClass: "permanent", reason: "PackageNotFound" });
    expect(installedVersion(DUMMY)).toBeUndefined();
  });
});
