import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { writeFileAtomicSync } from "../../src/agent/atomic.js";
import { AgentStore } from "../../src/agent/store.js";
import {
  createTemporary,
  findTemporaryFiles,
  removeLeftovers,
  settleTemporary,
  temporaryPath,
} from "../../src/agent/temporary.js";

let work: string;
/** A pid no process has any more (a process that ran and exited). */
let deadPid: number;
/** A process that stays alive for the whole file: not an agent, and its pid must be respected all the same. */
let live: ChildProcess;
let livePid: number;

beforeAll(() => {
  deadPid = spawnSync("true").pid;
  live = spawn("sleep", ["300"], { stdio: "ignore" });
  livePid = live.pid!;
});
afterAll(() => {
  live.kill("SIGKILL");
});
beforeEach(() => {
  work = mkdtempSync(join(tmpdir(), "steward-leftovers-"));
  return () => rmSync(work, { recursive: true, force: true });
});

type Entry = "file" | "directory" | "symlink" | "hard link";

/** Makes `what` at `dir/name`. */
function make(dir: string, name: string, what: Entry): void {
  const path = join(dir, name);
  mkdirSync(dir, { recursive: true });
  if (what === "file") writeFileSync(path, `written as ${name}\n`);
  else if (what === "directory") mkdirSync(path);
  else if (what === "symlink") symlinkSync("app.conf", path);
  else {
    writeFileSync(join(dir, `${name}.other-name`), "two names\n");
    linkSync(join(dir, `${name}.other-name`), path);
  }
}

describe("agent leftovers - the sweep of one directory", () => {
  /** Names with DEAD, LIVE and OWN standing for a gone writer's pid, a live one's and this process's. */
  const cases: [name: string, what: Entry, removed: boolean, why: string][] = [
    [".app.conf.steward-DEAD-1.tmp", "file", true, "its writer is gone"],
    [".app.link.steward-link-DEAD-2.tmp", "symlink", true, "its writer (of a link) is gone"],
    [".app.conf.steward-OWN-3.tmp", "file", true, "an earlier process had this pid"],
    [".app.conf.steward-LIVE-4.tmp", "file", false, "a live process has the pid"],
    [".app.link.steward-link-LIVE-5.tmp", "symlink", false, "a live process has the pid"],
    [".app.conf.steward-DEAD-6.tmp", "directory", false, "a directory"],
    [".app.conf.steward-DEAD-7.tmp", "symlink", false, "a link under a file's name"],
    [".app.link.steward-link-DEAD-8.tmp", "file", false, "a file under a link's name"],
    [".app.conf.steward-DEAD-9.tmp", "hard link", false, "a file with another name"],
    ["app.conf.steward-DEAD-10.tmp", "file", false, "not hidden"],
    [".app.conf.steward-DEAD-11.tmp.orig", "file", false, "another suffix"],
    [".app.conf.steward-DEAD.tmp", "file", false, "no counter"],
    [".app.conf.DEAD.tmp", "file", false, "another program's pattern"],
    [".app.conf.steward-99999999-12.tmp", "file", false, "no pid Linux hands out"],
    ["report-seq.DEAD.tmp", "file", false, "report numbers outside a state directory"],
    ["app.conf", "file", false, "the declared file itself"],
  ];
  const nameOf = (name: string) =>
    name
      .replace("DEAD", String(deadPid))
      .replace("LIVE", String(livePid))
      .replace("OWN", String(process.pid));

  it("agent leftovers - what a gone writer left is removed; a live pid's, and anything not named and typed as ours, stays", () => {
    const dir = join(work, "etc", "app");
    for (const [name, what] of cases) make(dir, nameOf(name), what);
    expect(removeLeftovers(dir)).toBe(cases.filter(([, , removed]) => removed).length);
    const outcome = cases.map(([name, , , why]) => [name, why, !present(join(dir, nameOf(name)))]);
    expect(outcome).toEqual(cases.map(([name, , removed, why]) => [name, why, removed]));
  });

  it("agent leftovers - this process's own writes in progress stay, even in a directory reached by another path", () => {
    const dir = join(work, "etc", "real");
    mkdirSync(dir, { recursive: true });
    symlinkSync(dir, join(work, "alias"));
    const { temporary } = createTemporary(join(dir, "app.conf"), "file", (name) =>
      writeFileSync(name, "in progress\n", { flag: "wx" }),
    );
    make(dir, `.old.conf.steward-${process.pid}-999999.tmp`, "file");
    expect(removeLeftovers(join(work, "alias"))).toBe(1);
    expect(present(temporary)).toBe(true);
    expect(present(join(dir, `.old.conf.steward-${process.pid}-999999.tmp`))).toBe(false);
    settleTemporary(temporary);
  });

  it("agent leftovers - a directory is swept once per process: what is left there later waits for the next process", () => {
    const dir = join(work, "etc", "once");
    make(dir, `.a.conf.steward-${deadPid}-1.tmp`, "file");
    expect(removeLeftovers(dir)).toBe(1);
    make(dir, `.b.conf.steward-${deadPid}-2.tmp`, "file");
    expect(removeLeftovers(dir)).toBe(0);
    expect(present(join(dir, `.b.conf.steward-${deadPid}-2.tmp`))).toBe(true);
  });

  it("agent leftovers - the first write into a directory sweeps it, and only it", () => {
    const dir = join(work, "etc", "app");
    const sibling = join(work, "etc", "other");
    make(dir, `.old.conf.steward-${deadPid}-1.tmp`, "file");
    make(sibling, `.old.conf.steward-${deadPid}-1.tmp`, "file");
    writeFileAtomicSync(join(dir, "app.conf"), "new\n");
    expect(readFileSync(join(dir, "app.conf"), "utf8")).toBe("new\n");
    expect(findTemporaryFiles(work)).toEqual([join(sibling, `.old.conf.steward-${deadPid}-1.tmp`)]);
  });

  it("agent leftovers - a temporary name already taken by something the sweep leaves is passed over", () => {
    const dir = join(work, "etc", "taken");
    mkdirSync(dir, { recursive: true });
    // The next name this process takes: this one's counter plus one.
    const probe = temporaryPath(join(work, "probe"));
    const counter = Number(/-(\d+)\.tmp$/.exec(probe)![1]);
    const taken = `.app.conf.steward-${process.pid}-${counter + 1}.tmp`;
    mkdirSync(join(dir, taken));
    writeFileAtomicSync(join(dir, "app.conf"), "written\n");
    expect(readFileSync(join(dir, "app.conf"), "utf8")).toBe("written\n");
    expect(lstatSync(join(dir, taken)).isDirectory()).toBe(true);
  });
});

describe("agent leftovers - the writers' names", () => {
  it("agent leftovers - a name a writer takes for a file or a link is one the sweep and the count recognise, as that type only", () => {
    const dir = join(work, "etc", "names");
    mkdirSync(dir, { recursive: true });
    const file = temporaryPath(join(dir, "app.conf"), "file");
    const link = temporaryPath(join(dir, "app.link"), "link");
    writeFileSync(file, "new bytes\n");
    symlinkSync("app.conf", link);
    expect(findTemporaryFiles(dir)).toEqual([file, link].sort());
    rmSync(file);
    rmSync(link);
    symlinkSync("app.conf", file);
    writeFileSync(link, "a file under a link's name\n");
    expect(findTemporaryFiles(dir)).toEqual([]);
  });
});

describe("agent leftovers - a state directory", () => {
  it("agent leftovers - swept at start in every directory the agent writes, with the report-number name of earlier agents; trash/ and logs/ untouched", () => {
    const state = join(work, "state");
    const left = [
      join(state, `report-seq.${deadPid}.tmp`),
      join(state, `.agent.json.steward-${deadPid}-1.tmp`),
      join(state, "attempts", `.01ATTEMPT.json.steward-${deadPid}-2.tmp`),
      join(state, "instances", `.web.json.steward-${deadPid}-3.tmp`),
      join(state, "bundles", `.web.json.steward-${deadPid}-4.tmp`),
      join(state, "kept", `.0123abcd.steward-${deadPid}-5.tmp`),
      join(state, "runonce", `.web.json.steward-${deadPid}-6.tmp`),
      join(state, "containers", `.proxy.env.steward-${deadPid}-7.tmp`),
      join(state, "services", "web", `.server.json.steward-${deadPid}-8.tmp`),
    ];
    const kept = [
      join(state, `report-seq.${livePid}.tmp`),
      join(state, "attempts", `.01LIVE.json.steward-${livePid}-9.tmp`),
      join(state, "trash", "2025-01-01T00-00-00-000Z", "etc", `.moved.steward-${deadPid}-10.tmp`),
      join(state, "logs", "web", `.server.log.steward-${deadPid}-11.tmp`),
      join(state, "attempts", "01DONE.json"),
    ];
    for (const path of [...left, ...kept]) {
      mkdirSync(join(path, ".."), { recursive: true });
      writeFileSync(path, "{}\n");
    }
    new AgentStore(state).sweepLeftovers();
    expect(left.filter((path) => present(path))).toEqual([]);
    expect(kept.filter((path) => !present(path))).toEqual([]);
  });
});

describe("agent leftovers - counting what is left under a tree", () => {
  it("agent leftovers - every file and link named and typed as ours, whatever its writer, and nothing else", () => {
    const etc = join(work, "root", "etc", "app");
    make(etc, `.a.conf.steward-${deadPid}-1.tmp`, "file");
    make(etc, `.a.conf.steward-${livePid}-2.tmp`, "file");
    make(join(etc, "deep", "er"), `.l.steward-link-${deadPid}-3.tmp`, "symlink");
    make(etc, `.d.steward-${deadPid}-4.tmp`, "directory");
    make(etc, `.s.steward-${deadPid}-5.tmp`, "symlink");
    make(etc, `x.steward-${deadPid}-6.tmp`, "file");
    expect(findTemporaryFiles(join(work, "root"))).toEqual([
      join(etc, `.a.conf.steward-${deadPid}-1.tmp`),
      join(etc, `.a.conf.steward-${livePid}-2.tmp`),
      join(etc, "deep", "er", `.l.steward-link-${deadPid}-3.tmp`),
    ]);
    expect(findTemporaryFiles(join(work, "missing"))).toEqual([]);
  });
});

/** Whether anything (a dangling link included) is at `path`. */
function present(path: string): boolean {
  return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
}
