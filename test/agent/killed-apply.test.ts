/**
 * A real agent process (`steward agent apply`) SIGKILLed at random points of an apply of many
 * files, round after round: from outside, at a random count of temporary names appearing in the
 * directories it writes, and from inside, between a temporary file's completion and its rename
 * (the moment a kill leaves one behind), in the declared directories or in the state directory.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import {
  existsSync,
  type FSWatcher,
  lstatSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  watch,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { findTemporaryFiles } from "../../src/agent/temporary.js";
import type { AgentReply } from "../../src/model/generated.js";
import { binPath } from "../helpers/cli.js";
import { stewardEntry } from "../hub/helpers/process.js";
import { bundle, type Sandbox, sandbox } from "./helpers.js";

const FILES = 200;
const SIZE = 16 * 1024;
const DIRECTORIES = 4;

/**
 * Runs before the CLI in the same bundle: kills the process when it asks to flush the n-th
 * temporary file under a directory, after the file is complete and before anything is renamed.
 */
const KILL_AT_FLUSH = `
  import { processFlushes } from "./src/agent/atomic.ts";
  const killAt = Number(process.env.STEWARD_TEST_KILL_AT_FLUSH ?? 0);
  const under = process.env.STEWARD_TEST_KILL_UNDER ?? "/";
  const flush = processFlushes.flush.bind(processFlushes);
  let flushes = 0;
  processFlushes.flush = (path: string) => {
    if (path.startsWith(under) && ++flushes === killAt) process.kill(process.pid, "SIGKILL");
    return flush(path);
  };
`;

/** How a round's agent dies: killed from outside at the n-th temporary name seen, or by itself at the n-th flush. */
type Kill =
  | { by: "test"; atName: readonly [number, number] }
  | { by: "itself"; under: "root" | "state"; atFlush: readonly [number, number] };

const ROUNDS: readonly Kill[] = [
  // While it writes the temporary files.
  { by: "test", atName: [1, FILES] },
  // Between a state file's temporary write and its rename (a kept copy, or the attempt's records).
  { by: "itself", under: "state", atFlush: [1, 3] },
  // While it renames: some files are new, the others old.
  { by: "test", atName: [FILES + 1, 2 * FILES] },
  { by: "itself", under: "root", atFlush: [1, FILES] },
  // Anywhere, the records and the report included.
  { by: "test", atName: [1, 2 * FILES + 8] },
  { by: "test", atName: [1, 2 * FILES + 8] },
];

let box: Sandbox;
let deadPid: number;
let live: ChildProcess;
beforeAll(() => {
  deadPid = spawnSync("true").pid;
  live = spawn("sleep", ["300"], { stdio: "ignore" });
});
afterAll(() => {
  live.kill("SIGKILL");
});
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  await box.close();
});

function pathOf(i: number): string {
  return `/etc/x/d${i % DIRECTORIES}/file-${i}.conf`;
}

/** File i's whole content at a generation: the generation in every line, so a mix of two shows. */
function content(generation: number, i: number): string {
  return Buffer.alloc(SIZE, `generation ${generation} of file ${i}\n`).toString("utf8");
}

function bundleFile(generation: number): string {
  const resources = Array.from({ length: FILES }, (_, i) => ({
    kind: "file" as const,
    path: pathOf(i),
    content: content(generation, i),
  }));
  const file = join(box.dir, `generation-${generation}.json`);
  writeFileSync(file, JSON.stringify(bundle({ roots: ["/etc/x"], generation, resources })));
  return file;
}

function applyArgs(file: string): string[] {
  return ["agent", "apply", "--bundle", file, "--root", box.root, "--state", box.state, "--json"];
}

function randomIn([low, high]: readonly [number, number]): number {
  return low + Math.floor(Math.random() * (high - low + 1));
}

/** The generation whose whole content file i has, or undefined (torn, or missing). */
function generationOf(i: number, upTo: number): number | undefined {
  const bytes = readFileSync(box.host(pathOf(i)), "utf8");
  for (let generation = upTo; generation >= 1; generation--)
    if (bytes === content(generation, i)) return generation;
  return undefined;
}

/** Runs one apply that `kill` ends; resolves with how it ended. */
async function killedApply(
  file: string,
  kill: Kill,
): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  let child: ChildProcess;
  const watchers: FSWatcher[] = [];
  if (kill.by === "itself") {
    child = spawn(process.execPath, [await stewardEntry(KILL_AT_FLUSH), ...applyArgs(file)], {
      env: {
        ...process.env,
        STEWARD_TEST_KILL_AT_FLUSH: String(randomIn(kill.atFlush)),
        STEWARD_TEST_KILL_UNDER: kill.under === "root" ? box.root : box.state,
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
  } else {
    child = spawn(process.execPath, [binPath, ...applyArgs(file)], { stdio: ["ignore", "ignore", "pipe"] });
    const killAt = randomIn(kill.atName);
    let names = 0;
    const watched = [
      ...Array.from({ length: DIRECTORIES }, (_, d) => box.host(`/etc/x/d${d}`)),
      ...["", "attempts", "instances", "bundles", "kept"].map((name) => join(box.state, name)),
    ];
    for (const dir of watched.filter((path) => existsSync(path)))
      watchers.push(
        watch(dir, (event, name) => {
          // A temporary name appears, or is renamed into place.
          if (event === "rename" && name?.endsWith(".tmp") && ++names === killAt) child.kill("SIGKILL");
        }),
      );
  }
  let stderr = "";
  child.stderr!.on("data", (chunk) => {
    stderr += chunk;
  });
  const [code, signal] = (await once(child, "close")) as [number | null, string | null];
  for (const watcher of watchers) watcher.close();
  return { code, signal, stderr };
}

function applyToTheEnd(file: string): AgentReply {
  const run = spawnSync(process.execPath, [binPath, ...applyArgs(file)], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  expect(run.stderr).toBe("");
  expect(run.status).toBe(0);
  return JSON.parse(run.stdout) as AgentReply;
}

/**
 * Plants things named like temporary files that are not a gone writer's: a live process's files in
 * progress (which the sweep must leave, and the count finds), and entries of another type or
 * pattern. Returns what each is, to compare with at the end.
 */
function plantDecoys(): { inProgress: string[]; decoys: Map<string, string> } {
  const d0 = box.host("/etc/x/d0");
  const inProgress = [
    join(box.state, "attempts", `.01DECOY.json.steward-${live.pid}-4.tmp`),
    join(d0, `.file-2.conf.steward-${live.pid}-3.tmp`),
  ];
  for (const path of inProgress) writeFileSync(path, "a live writer's, in progress\n");
  const others = {
    directory: [
      join(d0, `.file-0.conf.steward-${deadPid}-1.tmp`),
      join(box.state, "instances", `.decoy.json.steward-${deadPid}-5.tmp`),
    ],
    link: [join(d0, `.file-1.conf.steward-${deadPid}-2.tmp`)],
    file: [
      join(d0, ".file-3.conf.steward-tmp"),
      join(d0, `file-4.conf.${deadPid}.tmp`),
      join(box.state, `report-seq.${live.pid}.tmp`),
    ],
  };
  for (const path of others.directory) mkdirSync(path);
  for (const path of others.link) symlinkSync("file-1.conf", path);
  for (const path of others.file) writeFileSync(path, "not a gone writer's\n");
  const decoys = new Map<string, string>();
  for (const path of [...inProgress, ...Object.values(others).flat()]) decoys.set(path, what(path));
  return { inProgress, decoys };
}

/** What is at `path`, to tell whether it changed. */
function what(path: string): string {
  const stats = lstatSync(path);
  if (stats.isSymbolicLink()) return `link to ${readlinkSync(path)}`;
  if (stats.isDirectory()) return "directory";
  return `file: ${readFileSync(path, "utf8")}`;
}

describe("agent killed mid-apply", () => {
  it("agent killed mid-apply - every file is one generation's whole content; the next apply leaves no temporary file of ours, and what is only named like one stays", async () => {
    expect(applyToTheEnd(bundleFile(1)).result.outcome).toBe("succeeded");
    const { inProgress, decoys } = plantDecoys();
    const leftBehind = (tree: string) => findTemporaryFiles(tree).filter((path) => !decoys.has(path));
    const left = { declared: 0, state: 0 };
    let kills = 0;
    for (const [round, kill] of ROUNDS.entries()) {
      const generation = round + 2;
      const ended = await killedApply(bundleFile(generation), kill);
      if (ended.signal === "SIGKILL") kills++;
      else
        expect(ended, `round ${round} was not killed: it must have succeeded`).toEqual({
          code: 0,
          signal: null,
          stderr: "",
        });
      const torn = Array.from({ length: FILES }, (_, i) => i).filter(
        (i) => generationOf(i, generation) === undefined,
      );
      expect(torn, `round ${round}: files neither wholly old nor wholly new`).toEqual([]);
      left.declared += leftBehind(box.root).length;
      left.state += leftBehind(box.state).length;
    }

    const final = ROUNDS.length + 2;
    expect(applyToTheEnd(bundleFile(final)).result.outcome).toBe("succeeded");
    const stale = Array.from({ length: FILES }, (_, i) => i).filter((i) => generationOf(i, final) !== final);
    expect(stale).toEqual([]);
    expect([...findTemporaryFiles(box.root), ...findTemporaryFiles(box.state)].sort()).toEqual(
      inProgress.sort(),
    );
    for (const [path, was] of decoys) expect(what(path), path).toBe(was);
    // The rounds proved something: the kills landed, and left temporary files in both places.
    expect(kills).toBeGreaterThanOrEqual(4);
    expect(left.declared).toBeGreaterThan(0);
    expect(left.state).toBeGreaterThan(0);
  }, 120_000);
});
