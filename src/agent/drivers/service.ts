/**
 * `service`: a long-running process the agent supervises. Started detached in its own session (it
 * outlives a one-shot agent), tracked by a record in the state directory plus /proc (pid, start time
 * and command line, so a reused pid is never taken for ours), output appended to a log file whose
 * recent lines are evidence. Restarted when its exec/env/cwd or a `restartOn` resource changed;
 * stopped with SIGTERM, then SIGKILL after `stopTimeout`. A process killed behind the agent's back
 * is observed as not running and started again by the ordinary apply.
 */
import { closeSync, existsSync, openSync, readSync, renameSync, statSync, writeFileSync } from "node:fs";
import { contentHash } from "../../model/canonical.js";
import { parseDuration } from "../../model/duration.js";
import type { Resource, ServiceResource } from "../../model/generated.js";
import type { Applied, Driver, DriverContext, Plan, PlanFacts } from "../driver.js";
import { tail } from "../evidence.js";
import { permanent, transient } from "../failure.js";
import { isSameProcess, readProcess } from "../proc.js";
import { fingerprintEnv, secretPathsOf } from "../secrets.js";
import type { ServiceRecord } from "../store.js";

/** A service as its record and /proc show it. */
export interface ServiceObservation {
  running: boolean;
  pid?: number;
  startedAt?: string;
  /** What the current (or last) process was started from. */
  fingerprint?: string;
  generation?: number;
  /** How the last process ended, when this agent saw it end. */
  exit?: ServiceRecord["exit"];
  /** Set when the agent stopped it on purpose. */
  stoppedAt?: string;
  /** Why it is not running, in words. */
  why?: string;
}

const DEFAULT_STOP_TIMEOUT = "10s";
const DEFAULT_START_GRACE_MS = 300;
const MAX_LOG_BYTES = 8 * 1024 * 1024;
/** How the agent marks each start of a service in its log. */
const START_MARKER = "--- steward: starting ";

/**
 * Hash of everything a running process depends on: a change means restart. Pure. A secret counts by
 * the digest of its plaintext (PlanFacts.secretDigests), never its ciphertext: a secret encrypted
 * again for other hosts restarts nothing, a changed value or secret file does.
 */
export function serviceFingerprint(
  resource: ServiceResource,
  facts: Pick<PlanFacts, "resources" | "secretDigests">,
): string {
  const digests = facts.secretDigests ?? {};
  return contentHash({
    exec: resource.exec,
    env: fingerprintEnv(resource.env, digests),
    cwd: resource.cwd ?? "/",
    restartOn: (resource.restartOn ?? []).map((name) => {
      const other = facts.resources[name];
      const secrets = other ? secretPathsOf(other) : [];
      const spec = contentHash(other ?? null);
      return secrets.length === 0
        ? [name, spec]
        : [name, spec, secrets.map((path) => fingerprintOf(path, other!, digests))];
    }),
  });
}

/** How a secret a `restartOn` resource uses counts in a fingerprint: its file's digest, or its values'. */
function fingerprintOf(path: string, resource: Resource, digests: Readonly<Record<string, string>>): string {
  if ("secret" in resource && resource.secret) return digests[path] ?? "unknown";
  return contentHash(fingerprintEnv((resource as { env?: ServiceResource["env"] }).env, digests));
}

function describeExit(exit: ServiceRecord["exit"]): string {
  if (!exit) return "exited (exit status unknown: it was started by an earlier agent process)";
  return exit.signal ? `was killed by ${exit.signal}` : `exited with ${exit.exitCode}`;
}

/** Reads a service's state from its record and the process table. */
export function observeService(record: ServiceRecord | undefined): ServiceObservation {
  if (!record) return { running: false, why: "not started yet" };
  const base = {
    fingerprint: record.fingerprint,
    generation: record.generation,
    startedAt: record.startedAt,
    ...(record.exit ? { exit: record.exit } : {}),
    ...(record.stoppedAt ? { stoppedAt: record.stoppedAt } : {}),
  };
  if (record.stoppedAt) return { running: false, ...base, why: `stopped by steward at ${record.stoppedAt}` };
  if (isSameProcess(record)) return { running: true, pid: record.pid, ...base };
  const why = readProcess(record.pid)
    ? `pid ${record.pid} is now another process; ours ${describeExit(record.exit)}`
    : `pid ${record.pid} ${describeExit(record.exit)}`;
  return { running: false, ...base, why };
}

/** The last lines a service printed since its latest start (reads only the end of its log). */
export function logTail(file: string, bytes = 4096): string {
  try {
    const size = statSync(file).size;
    const fd = openSync(file, "r");
    try {
      const length = Math.min(size, bytes);
      const buffer = Buffer.alloc(length);
      readSync(fd, buffer, 0, length, size - length);
      // Only the latest process's output: what an earlier start printed is not its evidence.
      const text = buffer.toString("utf8");
      const start = text.lastIndexOf(START_MARKER);
      return tail(start < 0 ? text : text.slice(start));
    } finally {
      closeSync(fd);
    }
  } catch {
    return "";
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** SIGTERM to the process group, then SIGKILL once `timeoutMs` passed. Resolves when it is gone. */
export async function stopProcess(
  record: ServiceRecord,
  timeoutMs: number,
  ctx: DriverContext,
): Promise<string> {
  if (!isSameProcess(record)) return "was not running";
  ctx.runner.signal(record.pid, "SIGTERM");
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    await sleep(25);
    if (!isSameProcess(record)) return "stopped with SIGTERM";
  }
  ctx.runner.signal(record.pid, "SIGKILL");
  for (let i = 0; i < 200 && isSameProcess(record); i++) await sleep(10);
  return `did not stop within ${timeoutMs} ms of SIGTERM: killed`;
}

async function start(resource: ServiceResource, fingerprint: string, ctx: DriverContext): Promise<Applied> {
  const cwd = ctx.paths.workingDirectory(resource.cwd);
  if (!existsSync(cwd))
    throw transient(
      "WorkingDirectoryMissing",
      `service ${resource.name}: working directory ${cwd} does not exist`,
    );
  const logFile = ctx.store.logFile(ctx.assignment, resource.name);
  try {
    if (statSync(logFile).size > MAX_LOG_BYTES) renameSync(logFile, `${logFile}.1`);
  } catch {
    // No log yet.
  }
  const startedAt = ctx.clock().toISOString();
  writeFileSync(
    logFile,
    `${START_MARKER}${JSON.stringify(resource.exec)} in ${cwd} (generation ${ctx.generation}${ctx.attemptId ? `, attempt ${ctx.attemptId}` : ""}) at ${startedAt}\n`,
    { flag: "a", mode: 0o600 },
  );
  let child: Awaited<ReturnType<DriverContext["runner"]["spawnDetached"]>>;
  try {
    const own = ctx.secrets
      ? await ctx.secrets.environment(resource.env)
      : (resource.env as Record<string, string> | undefined);
    child = await ctx.runner.spawnDetached({
      argv: resource.exec,
      cwd,
      env: { ...ctx.env, ...own },
      logFile,
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT")
      throw permanent(
        "ExecutableNotFound",
        `service ${resource.name}: ${resource.exec[0]} was not found on this host`,
      );
    if (code === "EACCES")
      throw permanent("PermissionDenied", `service ${resource.name}: ${resource.exec[0]} is not executable`);
    throw transient("SpawnFailed", `service ${resource.name}: could not start (${code ?? String(error)})`);
  }
  const info = readProcess(child.pid);
  const record: ServiceRecord = {
    pid: child.pid,
    startTime: info?.startTime ?? "",
    cmdline: info?.cmdline ?? "",
    fingerprint,
    startedAt,
    generation: ctx.generation,
    ...(ctx.attemptId ? { attemptId: ctx.attemptId } : {}),
  };
  // Recorded before anything else: a crash from here on must not lose track of the process.
  ctx.store.saveService(ctx.assignment, resource.name, record);
  let exited: { exitCode: number | null; signal: string | null } | undefined;
  const { assignment, store, clock, onServiceExit } = ctx;
  void child.exited.then((exit) => {
    exited = exit;
    try {
      const current = store.service(assignment, resource.name);
      if (current && current.pid === record.pid && current.startTime === record.startTime) {
        store.saveService(assignment, resource.name, {
          ...current,
          exit: { ...exit, at: clock().toISOString() },
        });
      }
    } catch {
      // The state directory is gone (the agent is shutting down): nothing to record into.
    }
    onServiceExit?.(assignment, resource.name);
  });
  const graceMs = ctx.tools.serviceStartGraceMs ?? DEFAULT_START_GRACE_MS;
  const until = Date.now() + graceMs;
  while (Date.now() < until && !exited && (record.startTime === "" || isSameProcess(record))) await sleep(20);
  if (exited || !isSameProcess(record)) {
    // Gone: this agent is its parent, so how it ended is a moment away.
    if (!exited) exited = await Promise.race([child.exited, sleep(500).then(() => undefined)]);
    const how = exited ? describeExit({ ...exited, at: "" }) : "exited at once";
    throw transient(
      "ServiceExited",
      `service ${resource.name} ${how} within ${graceMs} ms of starting`,
      logTail(logFile),
    );
  }
  // The command line read at spawn may still be the agent's own (before exec): keep the real one.
  const running = readProcess(record.pid);
  if (running && running.cmdline !== record.cmdline)
    ctx.store.saveService(ctx.assignment, resource.name, { ...record, cmdline: running.cmdline });
  return { action: "started", message: `pid ${child.pid}` };
}

/** The `service` driver. */
export const serviceDriver: Driver<ServiceResource, ServiceObservation> = {
  kind: "service",

  async observe(resource, ctx) {
    return observeService(ctx.store.service(ctx.assignment, resource.name));
  },

  plan(resource, observed, facts): Plan {
    if (facts.state === "stopped") {
      if (!observed.running) return { action: "none", diff: [] };
      return { action: "stop", diff: [`running (pid ${observed.pid}) → stopped`] };
    }
    const fingerprint = serviceFingerprint(resource, facts);
    if (!observed.running) {
      const policy = resource.restart ?? "always";
      const sameSpec = observed.fingerprint === fingerprint && !observed.stoppedAt;
      if (sameSpec && policy === "never")
        return { action: "none", diff: [], note: `${observed.why}; restart: never` };
      if (sameSpec && policy === "on-failure" && observed.exit?.exitCode === 0)
        return { action: "none", diff: [], note: "exited with 0; restart: on-failure" };
      return { action: "start", diff: [`not running (${observed.why}) → running`] };
    }
    if (observed.fingerprint !== fingerprint)
      return { action: "restart", diff: ["exec, env, cwd or a restartOn resource changed since it started"] };
    const changed = (resource.restartOn ?? []).filter((name) => facts.changed.includes(name));
    if (changed.length > 0) return { action: "restart", diff: [`${changed.join(", ")} changed`] };
    return { action: "none", diff: [] };
  },

  async apply(resource, plan, _observed, ctx): Promise<Applied> {
    const record = ctx.store.service(ctx.assignment, resource.name);
    const stopTimeoutMs = parseDuration(resource.stopTimeout ?? DEFAULT_STOP_TIMEOUT);
    if (plan.action === "stop" || plan.action === "restart") {
      const how = record ? await stopProcess(record, stopTimeoutMs, ctx) : "was not running";
      if (record)
        ctx.store.saveService(ctx.assignment, resource.name, {
          ...record,
          stoppedAt: ctx.clock().toISOString(),
        });
      if (plan.action === "stop") return { action: "stopped", message: how };
    }
    const facts = {
      resources: ctx.resources,
      ...(ctx.secrets ? { secretDigests: ctx.secrets.digests } : {}),
    };
    const started = await start(resource, serviceFingerprint(resource, facts), ctx);
    return plan.action === "restart" ? { ...started, action: "restarted" } : started;
  },

  evidence(resource, observed, ctx) {
    const recent = logTail(ctx.store.logFile(ctx.assignment, resource.name));
    return [observed.why, recent].filter(Boolean).join("\n");
  },
};
