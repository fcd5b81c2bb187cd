/**
 * Probes check what an assignment promises, not only that a process is alive: an HTTP route answers
 * with the expected status and body (the declared version, say), a TCP port accepts connections, a
 * command prints what it should. Run after apply (until they pass or the settle time is over) and
 * on their own cadence by a long-running agent.
 */
import { connect } from "node:net";
import { parseDuration } from "../model/duration.js";
import type { CommandProbe, HttpProbe, Probe, ProbeReport, TcpProbe } from "../model/generated.js";
import { runEvidence, tail } from "./evidence.js";
import type { ProcessRunner } from "./runner.js";

/** What a probe may use: the process runner, the environment and working directory of commands, the clock. */
export interface ProbeContext {
  runner: ProcessRunner;
  env: Record<string, string>;
  /** Working directory of command probes (the mapped root). */
  cwd: string;
  clock: () => Date;
}

const DEFAULT_TIMEOUT_MS = 5000;
/** Default cadence of a probe without `interval`. */
export const DEFAULT_PROBE_INTERVAL_MS = 30_000;
const MAX_BODY = 64 * 1024;

function timeoutOf(probe: Probe): number {
  return probe.timeout ? parseDuration(probe.timeout) : DEFAULT_TIMEOUT_MS;
}

/** How often a long-running agent runs the probe. */
export function intervalOf(probe: Probe): number {
  return probe.interval ? parseDuration(probe.interval) : DEFAULT_PROBE_INTERVAL_MS;
}

type Verdict = { ok: boolean; message: string; evidence?: string };

async function httpProbe(probe: HttpProbe): Promise<Verdict> {
  const expectStatus = probe.expectStatus ?? 200;
  let response: Response;
  try {
    response = await fetch(probe.url, { signal: AbortSignal.timeout(timeoutOf(probe)), redirect: "manual" });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return {
      ok: false,
      message: `GET ${probe.url} failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`,
    };
  }
  const reader = response.body?.getReader();
  let body = "";
  if (reader) {
    const decoder = new TextDecoder();
    while (body.length < MAX_BODY) {
      const { done, value } = await reader.read();
      if (done) break;
      body += decoder.decode(value, { stream: true });
    }
    await reader.cancel().catch(() => undefined);
  }
  const evidence = `HTTP ${response.status}\n${tail(body, 10, 500)}`;
  if (response.status !== expectStatus)
    return {
      ok: false,
      message: `GET ${probe.url} answered ${response.status}, expected ${expectStatus}`,
      evidence,
    };
  if (probe.expectBody !== undefined && !body.includes(probe.expectBody))
    return {
      ok: false,
      message: `GET ${probe.url} answered without ${JSON.stringify(probe.expectBody)} in its body`,
      evidence,
    };
  return { ok: true, message: `GET ${probe.url} answered ${response.status}`, evidence };
}

function tcpProbe(probe: TcpProbe): Promise<Verdict> {
  const host = probe.host ?? "127.0.0.1";
  const port = Number(probe.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    return Promise.resolve({ ok: false, message: `port ${JSON.stringify(probe.port)} is not a port number` });
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (verdict: Verdict) => {
      socket.destroy();
      resolve(verdict);
    };
    socket.setTimeout(timeoutOf(probe), () =>
      done({ ok: false, message: `${host}:${port} did not answer in time` }),
    );
    socket.once("connect", () => done({ ok: true, message: `${host}:${port} accepts connections` }));
    socket.once("error", (error: NodeJS.ErrnoException) =>
      done({ ok: false, message: `${host}:${port}: ${error.code ?? error.message}` }),
    );
  });
}

async function commandProbe(probe: CommandProbe, ctx: ProbeContext): Promise<Verdict> {
  const result = await ctx.runner.run({
    argv: probe.run,
    env: ctx.env,
    cwd: ctx.cwd,
    timeoutMs: timeoutOf(probe),
  });
  const evidence = runEvidence(result);
  if (result.spawnError)
    return { ok: false, message: `${probe.run[0]} could not start (${result.spawnError})` };
  if (result.timedOut) return { ok: false, message: "timed out", evidence };
  if (result.exitCode !== 0) return { ok: false, message: `exited with ${result.exitCode}`, evidence };
  if (probe.expectOutput !== undefined && !result.stdout.includes(probe.expectOutput))
    return { ok: false, message: `output does not contain ${JSON.stringify(probe.expectOutput)}`, evidence };
  return { ok: true, message: "exited with 0", evidence };
}

/** Runs one probe now. Never throws: a probe that cannot run fails. */
export async function runProbe(probe: Probe, ctx: ProbeContext): Promise<ProbeReport> {
  let verdict: Verdict;
  try {
    if (probe.kind === "http") verdict = await httpProbe(probe);
    else if (probe.kind === "tcp") verdict = await tcpProbe(probe);
    else verdict = await commandProbe(probe, ctx);
  } catch (error) {
    verdict = { ok: false, message: (error as Error).message };
  }
  const report: ProbeReport = {
    name: probe.name,
    kind: probe.kind,
    ok: verdict.ok,
    message: verdict.message,
    at: ctx.clock().toISOString(),
  };
  if (verdict.evidence) report.evidence = verdict.evidence;
  return report;
}

/**
 * Runs the probes until all pass or `settleMs` is over (a service just started needs a moment to
 * listen); returns the last result of each.
 */
export async function probeUntilSettled(
  probes: readonly Probe[],
  ctx: ProbeContext,
  settleMs: number,
): Promise<ProbeReport[]> {
  const deadline = Date.now() + settleMs;
  let results = await Promise.all(probes.map((probe) => runProbe(probe, ctx)));
  while (results.some((r) => !r.ok) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(250, Math.max(0, deadline - Date.now()))));
    results = await Promise.all(
      probes.map((probe, i) => (results[i]!.ok ? results[i]! : runProbe(probe, ctx))),
    );
  }
  return results;
}
