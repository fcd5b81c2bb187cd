/**
 * The long-running agent's loop: services are restarted per their restart policy, with exponential
 * backoff after quick crashes, by the same observe → plan → apply as any attempt; probes run on their
 * cadence; a fresh full report goes out when something changed and at least every report interval.
 * The one-shot agent (over SSH) has no supervisor: there, the next attempt restarts a dead service.
 */
import type { Probe, ProbeReport, Report, ResourceOutcome, ServiceResource } from "../model/generated.js";
import { logTail, observeService } from "./drivers/service.js";
import { intervalOf } from "./probes.js";
import type { AgentStore, InstanceRecord } from "./store.js";

/** Cadences of a long-running agent. */
export interface SupervisorOptions {
  /** How often services are looked at. Default 1 s. */
  tickMs?: number;
  /** A full report at least this often. Default 30 s. */
  reportIntervalMs?: number;
  /** First restart delay after a quick crash; doubles per crash in a row. Default 1 s. */
  backoffBaseMs?: number;
  /** Longest restart delay. Default 60 s. */
  backoffMaxMs?: number;
  /** A service up this long is healthy: its crash count starts over. Default 10 s. */
  healthyAfterMs?: number;
}

/** What the supervisor needs from the agent. */
export interface SupervisedAgent {
  instances(): readonly InstanceRecord[];
  /** Counts a crash the supervisor saw as a failure of the resource. */
  recordCrash(assignment: string, resource: string, crash: ResourceOutcome): Promise<void>;
  /** Repairs one resource by the ordinary path. */
  heal(assignment: string, resource: string): Promise<void>;
  /** Records that a service stayed up. */
  healthy(assignment: string, resource: string): Promise<void>;
  probe(record: InstanceRecord, probe: Probe): Promise<ProbeReport>;
  rememberProbes(assignment: string, probes: ProbeReport[]): void;
  report(): Promise<Report>;
  store: AgentStore;
  clock: () => Date;
}

interface ServiceWatch {
  /** Quick crashes in a row. */
  crashes: number;
  /** When the next restart may happen (ms since epoch). */
  restartAt?: number;
  /** startedAt of the process whose exit was already counted. */
  counted?: string;
  healthyFor?: string;
}

/** The delay before restarting after `crashes` quick crashes in a row. Pure. */
export function restartDelay(crashes: number, baseMs: number, maxMs: number): number {
  if (crashes <= 0) return 0;
  return Math.min(maxMs, baseMs * 2 ** (crashes - 1));
}

/** The loop of a long-running agent (see the file comment). */
export class Supervisor {
  private readonly tickMs: number;
  private readonly reportIntervalMs: number;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private readonly healthyAfterMs: number;
  private readonly watches = new Map<string, ServiceWatch>();
  private readonly probeRuns = new Map<string, ProbeReport & { ranAt: number }>();
  private lastReportAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private again = false;

  constructor(
    private readonly agent: SupervisedAgent,
    private readonly onReport: (report: Report) => void,
    options: SupervisorOptions = {},
  ) {
    this.tickMs = options.tickMs ?? 1000;
    this.reportIntervalMs = options.reportIntervalMs ?? 30_000;
    this.backoffBaseMs = options.backoffBaseMs ?? 1000;
    this.backoffMaxMs = options.backoffMaxMs ?? 60_000;
    this.healthyAfterMs = options.healthyAfterMs ?? 10_000;
  }

  start(): void {
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** A process this agent started has exited: look at once rather than at the next tick. */
  serviceExited(_assignment: string, _name: string): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.running = this.tick()
        .catch(() => {
          // A failed look is retried at the next tick; what failed shows in the next report.
        })
        .finally(() => {
          this.running = undefined;
          const soon = this.again;
          this.again = false;
          this.schedule(soon ? 0 : this.tickMs);
        });
    }, delay);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    let changed = false;
    for (const record of this.agent.instances()) {
      if (this.stopped) return;
      const spec = record.bundle.spec;
      if (spec.state !== "running") continue;
      for (const resource of spec.resources)
        if (resource.kind === "service" && (await this.watch(record, resource))) changed = true;
      if (await this.probe(record)) changed = true;
    }
    const now = Date.now();
    if (!this.stopped && (changed || now - this.lastReportAt >= this.reportIntervalMs)) {
      this.lastReportAt = now;
      this.onReport(await this.agent.report());
    }
  }

  /** Restarts a dead service when its policy and backoff allow; true when it acted. */
  private async watch(record: InstanceRecord, resource: ServiceResource): Promise<boolean> {
    const assignment = record.assignment;
    const key = `${assignment}\0${resource.name}`;
    const service = this.agent.store.service(assignment, resource.name);
    // Never started by an attempt (blocked, say): that is the hub's business, not a restart.
    if (!service || service.stoppedAt) return false;
    const watch = this.watches.get(key) ?? { crashes: 0 };
    this.watches.set(key, watch);
    const now = this.agent.clock().getTime();
    const endedAt = service.exit ? Date.parse(service.exit.at) : now;
    const upFor = endedAt - Date.parse(service.startedAt);
    const observed = observeService(service);
    if (observed.running) {
      if (upFor >= this.healthyAfterMs && watch.healthyFor !== service.startedAt) {
        watch.healthyFor = service.startedAt;
        watch.crashes = 0;
        if ((record.resources[resource.name]?.counters.consecutiveFailures ?? 0) > 0) {
          await this.agent.healthy(assignment, resource.name);
          return true;
        }
      }
      return false;
    }
    const policy = resource.restart ?? "always";
    if (policy === "never") return false;
    if (policy === "on-failure" && service.exit?.exitCode === 0) return false;
    let counted = false;
    if (watch.counted !== service.startedAt) {
      // First look at this exit: count it, and wait the backoff before the restart.
      watch.counted = service.startedAt;
      const last = record.resources[resource.name]?.last;
      const failedToStart = last?.action === "failed" && last.at >= service.startedAt;
      if (upFor < this.healthyAfterMs) {
        watch.crashes += 1;
        counted = true;
        // A process that died during its start was counted by that start already.
        if (!failedToStart)
          await this.agent.recordCrash(assignment, resource.name, {
            name: resource.name,
            kind: "service",
            action: "failed",
            failureClass: "transient",
            reason: "ServiceExited",
            message: `service ${resource.name} ${observed.why} after ${upFor} ms (crash ${watch.crashes} in a row)`,
            evidence: logTail(this.agent.store.logFile(assignment, resource.name)),
          });
      } else watch.crashes = 0;
      watch.restartAt = now + restartDelay(watch.crashes, this.backoffBaseMs, this.backoffMaxMs);
    }
    if (now < (watch.restartAt ?? 0)) return counted;
    await this.agent.heal(assignment, resource.name);
    return true;
  }

  /** Runs the probes that are due; true when one changed its verdict. */
  private async probe(record: InstanceRecord): Promise<boolean> {
    let changed = false;
    const results: ProbeReport[] = [];
    for (const probe of record.bundle.spec.probes) {
      const key = `${record.assignment}\0${probe.name}`;
      const last = this.probeRuns.get(key);
      const now = Date.now();
      if (last && now - last.ranAt < intervalOf(probe)) continue;
      const result = await this.agent.probe(record, probe);
      if (!last || last.ok !== result.ok) changed = true;
      this.probeRuns.set(key, { ...result, ranAt: now });
      results.push(result);
    }
    if (results.length > 0) this.agent.rememberProbes(record.assignment, results);
    return changed;
  }
}
