/**
 * One-shot commands across crashes. A `command` runs at most once per (instance, generation,
 * resource), even when the agent — or the hub whose process it runs in — dies while it runs:
 *   1. before the spawn, the agent journals that it is starting this run (durably);
 *   2. the command runs under a small shell wrapper in a session of its own (it outlives the agent),
 *      its output going to files under the state directory and its exit status written by the
 *      wrapper when it ends, so a later agent process, which is not its parent, can still tell how
 *      it ended;
 *   3. right after the spawn, the agent journals the wrapper's pid and start time (a recycled pid
 *      has another start time, so it is never taken for the run);
 *   4. when the run ends, the agent journals its outcome.
 * A later agent that finds a start with no outcome waits for the process if it still runs, takes
 * the wrapper's exit status if it ended, and otherwise finds the run `lost`: its outcome is unknown,
 * and only a person (or the command's own `creates`/`unless` check) decides whether it runs again.
 */
import {
  accessSync,
  closeSync,
  constants,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from "node:fs";
import { join, resolve } from "node:path";
import type { LostRun, OneShotDecision } from "../model/generated.js";
import { tail } from "./evidence.js";
import { isSameProcess, readProcess, startTimeOf } from "./proc.js";
import type { ProcessRunner, RunResult } from "./runner.js";
import type { AgentStore, RunOnceRecord } from "./store.js";

/**
 * The wrapper: runs the command (its argv after the exit file's path), then writes its exit status
 * next to the output, renamed into place so a reader never sees half a number. No `exec`: the
 * shell must outlive the command to write how it ended — so it also outlives a SIGTERM to the run's
 * session (`trap :`: a handler, which the command does not inherit, unlike an ignored signal) and
 * waits for the command, which may take its time to stop; only SIGKILL ends both.
 */
const WRAPPER =
  'trap : TERM INT HUP; exit_file=$1; shift; "$@"; status=$?; printf "%s\\n" "$status" > "$exit_file.part" && mv -f "$exit_file.part" "$exit_file"; exit "$status"';
const SHELL = "/bin/sh";
/** Bytes of each output file kept as evidence. */
const OUTPUT_TAIL_BYTES = 64 * 1024;
/** How often a run this agent did not start is checked for its end. */
const ADOPTED_POLL_MS = 100;
/** How long a timed-out run gets between SIGTERM and SIGKILL. */
const KILL_GRACE_MS = 2000;
/**
 * How long a run journalled as starting, with no pid yet and no process found, is taken to be still
 * starting (the agent writes the pid a moment after the spawn) rather than lost.
 */
const START_GRACE_MS = 10_000;

/**
 * Runs this process has started and not yet journalled the end of: an observation made while one
 * starts (a report asked for meanwhile) sees it running, not lost. Keyed by run (runKey).
 */
const IN_PROGRESS = new Set<string>();

function runKey(store: AgentStore, assignment: string, resource: string, attemptId: string): string {
  return `${store.dir}\0${assignment}\0${resource}\0${attemptId}`;
}

/** Where one run's output and exit status are kept. */
export interface RunFiles {
  dir: string;
  stdout: string;
  stderr: string;
  exit: string;
}

/** The files of the run that `attemptId` started of `resource` (paths only; nothing is created). */
export function runFiles(
  store: AgentStore,
  assignment: string,
  resource: string,
  attemptId: string,
): RunFiles {
  const dir = join(
    store.dir,
    "runs",
    encodeURIComponent(assignment),
    encodeURIComponent(resource),
    encodeURIComponent(attemptId),
  );
  return { dir, stdout: join(dir, "stdout"), stderr: join(dir, "stderr"), exit: join(dir, "exit") };
}

/** True when the record holds the run's outcome (every record written before journalling had one). */
export function settled(record: RunOnceRecord): boolean {
  return record.at !== undefined;
}

/** A run whose outcome the journal does not hold, as found on the system now. */
export interface UnsettledRun {
  generation: number;
  attemptId?: string;
  startedAt?: string;
  pid?: number;
  /** `running`: the very process still runs; `ended`: it is gone and its wrapper wrote the exit status; `lost`: gone without one. */
  state: "running" | "ended" | "lost";
  exitCode?: number;
}

/** The exit status the wrapper wrote, if it did. */
function readExitStatus(files: RunFiles): number | undefined {
  let text: string;
  try {
    text = readFileSync(files.exit, "utf8");
  } catch {
    return undefined;
  }
  const code = Number.parseInt(text, 10);
  return Number.isInteger(code) ? code : undefined;
}

/** The end of an output file (bounded), or "" when there is none. */
function tailOf(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return "";
  }
  try {
    const size = statSync(path).size;
    const length = Math.min(size, OUTPUT_TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/** What a run printed, as the runner reports it (the ends of standard output and error). */
export function runOutput(files: RunFiles): { stdout: string; stderr: string } {
  return { stdout: tailOf(files.stdout), stderr: tailOf(files.stderr) };
}

/** The live process of a run, found by its exit file's path in its argv (unique per run). */
function findRunProcess(files: RunFiles): { pid: number; startTime: string } | undefined {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  for (const name of pids) {
    const pid = Number(name);
    const info = readProcess(pid);
    if (info?.cmdline.split("\0").includes(files.exit)) return { pid, startTime: info.startTime };
  }
  return undefined;
}

/**
 * The session leader of a run the journal holds no outcome for, if it still runs: the journalled
 * pid and start time, or — when the agent died between journalling the start and the pid — the
 * process whose argv names the run's exit file. Scanning /proc happens only in that rare case.
 */
function liveRun(files: RunFiles, record: RunOnceRecord): { pid: number; startTime: string } | undefined {
  if (record.pid !== undefined && record.startTime)
    return isSameProcess({ pid: record.pid, startTime: record.startTime })
      ? { pid: record.pid, startTime: record.startTime }
      : undefined;
  return findRunProcess(files);
}

/** Looks at a run the journal holds no outcome for: the process table and the wrapper's exit status. Read-only. */
export function observeUnsettled(
  store: AgentStore,
  assignment: string,
  resource: string,
  record: RunOnceRecord,
  now = Date.now(),
): UnsettledRun {
  const run: UnsettledRun = { generation: record.generation, state: "lost" };
  if (record.attemptId !== undefined) run.attemptId = record.attemptId;
  if (record.startedAt !== undefined) run.startedAt = record.startedAt;
  if (record.pid !== undefined) run.pid = record.pid;
  if (record.attemptId === undefined) return run;
  if (IN_PROGRESS.has(runKey(store, assignment, resource, record.attemptId))) {
    run.state = "running";
    return run;
  }
  const files = runFiles(store, assignment, resource, record.attemptId);
  const live = liveRun(files, record);
  if (live) {
    run.state = "running";
    run.pid = live.pid;
    return run;
  }
  const exitCode = readExitStatus(files);
  if (exitCode !== undefined) {
    run.state = "ended";
    run.exitCode = exitCode;
  } else if (
    record.pid === undefined &&
    record.startedAt !== undefined &&
    now - Date.parse(record.startedAt) < START_GRACE_MS
  )
    // Journalled as starting a moment ago, by a process that may still be about to spawn it.
    run.state = "running";
  return run;
}

/** A run's result as the runner reports one, from its exit status and output files. */
function resultOf(
  files: RunFiles,
  exit: { exitCode: number | null; signal: string | null },
  timedOut: boolean,
  startedAt: number,
  spawnError?: string,
): RunResult {
  const result: RunResult = { ...exit, ...runOutput(files), timedOut, durationMs: Date.now() - startedAt };
  if (spawnError !== undefined) result.spawnError = spawnError;
  return result;
}

/** What a one-shot run needs of the agent. */
export interface OneShotContext {
  store: AgentStore;
  runner: ProcessRunner;
  assignment: string;
  resource: string;
  generation: number;
  attemptId: string;
  clock: () => Date;
}

/** How the run is started. */
export interface OneShotRequest {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  /** The command has `creates` or `unless`: its own check, not a person, decides after a lost run. */
  guarded?: boolean;
}

/** Journals the outcome of a run, durably. */
function recordOutcome(
  ctx: OneShotContext,
  record: RunOnceRecord,
  result: RunResult,
  from: "agent" | "wrapper",
): void {
  ctx.store.recordRunOnce(ctx.assignment, ctx.resource, {
    ...record,
    at: ctx.clock().toISOString(),
    exitCode: result.exitCode,
    signal: result.signal,
    ...(result.timedOut ? { timedOut: true } : {}),
    outcomeFrom: from,
  });
}

/**
 * Why `file` cannot be executed as `execvp` would find it (`ENOENT`: not there, `EACCES`: not an
 * executable file), or undefined when it can.
 */
function executableProblem(file: string, path: string, cwd: string): "ENOENT" | "EACCES" | undefined {
  // As the shell will search: relative entries (and an empty one, ".") from the command's cwd.
  const candidates = file.includes("/")
    ? [resolve(cwd, file)]
    : path.split(":").map((dir) => resolve(cwd, dir || ".", file));
  let found: "ENOENT" | "EACCES" = "ENOENT";
  for (const candidate of candidates) {
    try {
      if (!statSync(candidate).isFile()) {
        found = "EACCES";
        continue;
      }
      accessSync(candidate, constants.X_OK);
      return undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EACCES") found = "EACCES";
    }
  }
  return found;
}

/** Removes the output of this resource's earlier runs: only the latest run's is kept, as evidence. */
function dropEarlierRuns(files: RunFiles): void {
  const parent = join(files.dir, "..");
  let names: string[] = [];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(parent, name);
    if (dir !== files.dir) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Starts the command as a journalled one-shot and waits for it to end (killing it at its timeout).
 * Its outcome is journalled before this resolves; a crash at any point leaves a journal a later
 * agent reads without ever starting a second copy. Undefined when the run's session was killed
 * from outside (its wrapper died by a signal this agent did not send, before writing the exit
 * status): whether the command took effect is as unknown as after a crash, and it stays journalled so.
 */
export async function runOneShot(
  ctx: OneShotContext,
  request: OneShotRequest,
): Promise<RunResult | undefined> {
  const files = runFiles(ctx.store, ctx.assignment, ctx.resource, ctx.attemptId);
  dropEarlierRuns(files);
  rmSync(files.dir, { recursive: true, force: true });
  mkdirSync(files.dir, { recursive: true, mode: 0o700 });
  const startedAt = ctx.clock().toISOString();
  const started = Date.now();
  const record: RunOnceRecord = {
    generation: ctx.generation,
    attemptId: ctx.attemptId,
    startedAt,
    timeoutMs: request.timeoutMs,
    ...(request.guarded ? { guarded: true } : {}),
  };
  // What cannot start is known before anything runs (and the wrapper's shell would only blur it).
  const unstartable = executableProblem(request.argv[0] ?? "", request.env.PATH ?? "", request.cwd);
  if (unstartable) {
    const result = resultOf(files, { exitCode: null, signal: null }, false, started, unstartable);
    recordOutcome(ctx, record, result, "agent");
    return result;
  }
  const key = runKey(ctx.store, ctx.assignment, ctx.resource, ctx.attemptId);
  IN_PROGRESS.add(key);
  try {
    ctx.store.recordRunOnce(ctx.assignment, ctx.resource, record);
    return await spawnAndWait(ctx, request, files, record, started);
  } finally {
    IN_PROGRESS.delete(key);
  }
}

/** runOneShot's spawn and wait, once the start is journalled. */
async function spawnAndWait(
  ctx: OneShotContext,
  request: OneShotRequest,
  files: RunFiles,
  record: RunOnceRecord,
  started: number,
): Promise<RunResult | undefined> {
  let child: Awaited<ReturnType<ProcessRunner["spawnDetached"]>>;
  try {
    child = await ctx.runner.spawnDetached({
      argv: [SHELL, "-c", WRAPPER, "steward-oneshot", files.exit, ...request.argv],
      cwd: request.cwd,
      env: request.env,
      logFile: files.stdout,
      errorFile: files.stderr,
      awaited: true,
    });
  } catch (error) {
    // Nothing started: a known outcome, like a command that is not there.
    const code = (error as NodeJS.ErrnoException).code ?? "ESPAWN";
    const result = resultOf(files, { exitCode: null, signal: null }, false, started, code);
    recordOutcome(ctx, record, result, "agent");
    return result;
  }
  const running: RunOnceRecord = { ...record, pid: child.pid, startTime: startTimeOf(child.pid) ?? "" };
  ctx.store.recordRunOnce(ctx.assignment, ctx.resource, running);
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  const timer = setTimeout(() => {
    timedOut = true;
    ctx.runner.signal(child.pid, "SIGTERM");
    killTimer = setTimeout(() => ctx.runner.signal(child.pid, "SIGKILL"), KILL_GRACE_MS);
  }, request.timeoutMs);
  const exit = await child.exited;
  clearTimeout(timer);
  clearTimeout(killTimer);
  // A timed-out run ends whole: nothing it started may go on beside its retry.
  if (timedOut) ctx.runner.signal(child.pid, "SIGKILL");
  // The wrapper's own status is the command's; a wrapper killed (at the timeout) wrote none.
  const wrote = readExitStatus(files);
  if (wrote === undefined && exit.signal !== null && !timedOut) return undefined;
  const result = resultOf(
    files,
    wrote === undefined ? exit : { exitCode: wrote, signal: null },
    timedOut,
    started,
  );
  recordOutcome(ctx, running, result, "agent");
  return result;
}

/**
 * Waits for a run an earlier agent process started and did not see end (this agent is not its
 * parent: it polls the process table), killing it once its timeout — counted from its start — has
 * passed; then journals how it ended, from the exit status its wrapper wrote. Never starts it again.
 * Undefined when it ended without an exit status: its outcome is lost.
 */
export async function awaitAdopted(
  ctx: OneShotContext,
  record: RunOnceRecord,
  timeoutMs: number,
): Promise<RunResult | undefined> {
  const attemptId = record.attemptId ?? ctx.attemptId;
  const files = runFiles(ctx.store, ctx.assignment, ctx.resource, attemptId);
  const now = () => ctx.clock().getTime();
  const startedAt = record.startedAt ? Date.parse(record.startedAt) : now();
  // The timeout it was started with, when journalled: a newer bundle's does not shorten it.
  const deadline = startedAt + (record.timeoutMs ?? timeoutMs);
  let timedOut = false;
  let killAt: number | undefined;
  let live = liveRun(files, record);
  // Journalled as starting, no process yet: its agent may have died just before the spawn.
  while (!live && record.pid === undefined && now() - startedAt < START_GRACE_MS) {
    await new Promise((resolve) => setTimeout(resolve, ADOPTED_POLL_MS));
    live = liveRun(files, record);
  }
  while (live && isSameProcess(live)) {
    if (!timedOut && now() >= deadline) {
      timedOut = true;
      ctx.runner.signal(live.pid, "SIGTERM");
      killAt = now() + KILL_GRACE_MS;
    } else if (killAt !== undefined && now() >= killAt) {
      ctx.runner.signal(live.pid, "SIGKILL");
      killAt = undefined;
    }
    await new Promise((resolve) => setTimeout(resolve, ADOPTED_POLL_MS));
  }
  if (timedOut && live) ctx.runner.signal(live.pid, "SIGKILL");
  const wrote = readExitStatus(files);
  // Gone without an exit status, and not at our hand: how it ended is unknown.
  if (wrote === undefined && !timedOut) return undefined;
  const exit =
    wrote === undefined ? { exitCode: null, signal: "SIGTERM" } : { exitCode: wrote, signal: null };
  const result = resultOf(files, exit, timedOut, startedAt);
  recordOutcome(ctx, record, result, "wrapper");
  return result;
}

/**
 * Keeps every journalled run below `generation` whose outcome is lost and unanswered as a question
 * (see lostRunOf), before a newer generation's apply can replace, block or drop its command.
 */
export function keepLostRuns(store: AgentStore, assignment: string, generation: number): void {
  for (const [resource, record] of Object.entries(store.runOnce(assignment)))
    if (record.generation < generation) keepIfLost(store, assignment, resource);
}

/**
 * Keeps the journal's run of `resource` as a question for a person before a newer generation's run
 * replaces it, when its outcome is lost (gone without an exit status) and nobody has answered it.
 */
export function keepIfLost(store: AgentStore, assignment: string, resource: string): void {
  const record = store.runOnce(assignment)[resource];
  const lost = record && lostRunOf(store, assignment, resource, record);
  if (!lost) return;
  const kept = store
    .lostRuns(assignment)
    .filter((known) => known.run !== lost.run || known.resource !== resource);
  store.saveLostRuns(assignment, [...kept, lost]);
}

/**
 * The journal's run of `resource` as a question for a person, when its outcome is lost (gone
 * without an exit status), nobody has answered it, and no check of its own decides (a guarded
 * command's `creates`/`unless` does).
 */
export function lostRunOf(
  store: AgentStore,
  assignment: string,
  resource: string,
  record: RunOnceRecord,
): LostRun | undefined {
  if (settled(record) || record.decision || record.guarded || record.attemptId === undefined)
    return undefined;
  const run = observeUnsettled(store, assignment, resource, record);
  if (run.state !== "lost") return undefined;
  const lost: LostRun = { resource, generation: record.generation, run: record.attemptId };
  if (record.startedAt) lost.startedAt = record.startedAt;
  lost.evidence = runEvidenceOf(store, assignment, resource, run);
  return lost;
}

/** What is known of a run that did not end under this agent's eyes: when, by whom, how far, its output. */
export function runEvidenceOf(
  store: AgentStore,
  assignment: string,
  resource: string,
  run: UnsettledRun,
): string {
  const output = run.attemptId
    ? runOutput(runFiles(store, assignment, resource, run.attemptId))
    : { stdout: "", stderr: "" };
  const how =
    run.state === "running"
      ? `still running (pid ${run.pid})`
      : run.state === "ended"
        ? `exit code ${run.exitCode}`
        : "the process is gone and left no exit status";
  const parts = [`started ${run.startedAt ?? "?"} by attempt ${run.attemptId ?? "?"}; ${how}`];
  if (output.stdout.trim()) parts.push(`stdout so far:\n${tail(output.stdout, 10, 1000)}`);
  if (output.stderr.trim()) parts.push(`stderr so far:\n${tail(output.stderr, 10, 1000)}`);
  return parts.join("\n");
}

/**
 * Journals a person's decision about an interrupted run: only for the run it names, and only while
 * that run is really lost (an answer given about a run that turns out to be alive, or that ended
 * with an exit status after all, changes nothing). An answered question is no longer asked.
 */
export function takeDecision(
  store: AgentStore,
  assignment: string,
  decision: OneShotDecision,
  at: string,
): void {
  const lost = store.lostRuns(assignment);
  const rest = lost.filter((run) => run.run !== decision.run || run.resource !== decision.resource);
  if (rest.length !== lost.length) store.saveLostRuns(assignment, rest);
  const record = store.runOnce(assignment)[decision.resource];
  if (
    !record ||
    settled(record) ||
    record.attemptId !== decision.run ||
    record.decision?.task === decision.task ||
    observeUnsettled(store, assignment, decision.resource, record).state !== "lost"
  )
    return;
  const decided: RunOnceRecord = { ...record, decision };
  if (decision.outcome === "ran") Object.assign(decided, { at, exitCode: 0, outcomeFrom: "person" });
  store.recordRunOnce(assignment, decision.resource, decided);
}
