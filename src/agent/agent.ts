/**
 * The agent: what runs on every host. It applies one attempt's bundle by the ordinary path (each
 * resource observed, planned, applied in order), records what it did locally (for de-duplication
 * only), and reports what it observes, read from the system itself. A long-running agent also
 * supervises services (restart policy with backoff) and runs probes on their cadence.
 *
 * The agent depends on src/model only (never on the hub or the CLI) and has no native code, so it
 * bundles into one JS file that runs with plain `node` on a host.
 */
import { hostname } from "node:os";
import { resolve } from "node:path";
import type {
  AgentReply,
  AttemptResult,
  Bundle,
  FailureClass,
  InstanceReport,
  ProbeReport,
  Report,
  Resource,
  ResourceOutcome,
  ResourceReport,
} from "../model/generated.js";
import { type FlushBatch, processFlushes } from "./atomic.js";
import { checkBundle, WrongNodeError } from "./bundle.js";
import type { DriverContext, Plan, ToolSettings } from "./driver.js";
import { inSync } from "./driver.js";
import { DRIVER_KINDS } from "./drivers/index.js";
import { applyResource, applyResources, driverFor, observeAndPlan, type ResourceRun } from "./engine.js";
import { asResourceFailure } from "./failure.js";
import { acquireLock } from "./lock.js";
import { keepLostRuns, takeDecision } from "./oneshot.js";
import { BundleError } from "./order.js";
import { HostPaths } from "./paths.js";
import type { ProbeContext } from "./probes.js";
import { nodeProcessRunner, type ProcessRunner } from "./runner.js";
import { InstanceSecrets, secretPathsOf } from "./secrets.js";
import { AgentStore, type InstanceRecord, type RunOnceRecord } from "./store.js";
import type { Supervisor, SupervisorOptions } from "./supervisor.js";
import { budgetOf, countersOf, recordOutcome, resourceStatus } from "./tracking.js";
import { AGENT_VERSION } from "./version.js";

/** How an Agent is set up; everything it touches of the outside world can be injected. */
export interface AgentOptions {
  /** This node's name; bundles for other nodes are refused. */
  node: string;
  /** Where the agent keeps its local state. */
  stateDir: string;
  /** Maps every absolute resource path P to root+P (tests, the embedded demo). Default: none. */
  root?: string;
  clock?: () => Date;
  /** Runs commands and starts services. Default: real processes. */
  runner?: ProcessRunner;
  /** Environment passed on to commands and services before STEWARD_* (default: PATH, HOME, LANG of this process). */
  env?: Record<string, string>;
  tools?: ToolSettings;
  /** How long probes may take to pass after an apply. Default 10 s. */
  probeSettleMs?: number;
  /** Independent filesystem resources applied at once. Default 1024. */
  concurrency?: number;
  supervisor?: SupervisorOptions;
  /** Where this agent's writes are flushed to disk; default: one group for the whole process (see FlushBatch). */
  flusher?: FlushBatch;
}

/** What `applyAll` did with one attempt: its result, or the error `apply` would have thrown. */
export type ApplyOutcome = { result: AttemptResult } | { error: unknown };

/** What an apply just observed of one instance, for the report that follows it. */
interface FreshInstance {
  record: InstanceRecord;
  runs?: ResourceRun[];
  probes?: ProbeReport[];
  /** The apply's secrets: what it decrypted is not decrypted again for the report. */
  secrets?: InstanceSecrets;
}

/** What an observation of one resource found, before it becomes a report entry. */
interface ResourceObservation {
  observed?: unknown;
  plan?: Plan;
  failure?: { failureClass: FailureClass; reason: string; message: string; evidence?: string };
}

const SERVICE_KINDS = new Set(["service", "container", "systemd-unit"]);
const NOT_DONE = new Set(["failed", "blocked", "restored"]);
const DEFAULT_PROBE_SETTLE_MS = 10_000;
/** Resources observed at once: some observations run a tool (dpkg-query, docker inspect). */
const OBSERVE_CONCURRENCY = 16;

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  };
  for (const key of ["HOME", "LANG", "LC_ALL", "TZ"]) if (process.env[key]) env[key] = process.env[key]!;
  return env;
}

/** Runs `work` over `items` with at most `limit` at once, keeping the order of results. */
async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * One node's agent: `apply` an attempt, `observe` the node, `retire` an instance, and (long-running)
 * `start`/`stop` the supervisor. Applies are serialised, within the process and across processes.
 */
export class Agent {
  readonly node: string;
  readonly store: AgentStore;
  private readonly root: string;
  private readonly clock: () => Date;
  private readonly runner: ProcessRunner;
  private readonly env: Record<string, string>;
  private readonly tools: ToolSettings;
  private readonly probeSettleMs: number;
  private readonly concurrency: number;
  private readonly startedAt: Date;
  private queue: Promise<unknown> = Promise.resolve();
  private supervisor: Promise<Supervisor> | undefined;
  private readonly supervisorOptions: SupervisorOptions;
  private readonly flusher: FlushBatch;
  /** Latest probe results per assignment, by probe name (a long-running agent reuses fresh ones). */
  private readonly probeResults = new Map<string, Map<string, ProbeReport>>();

  constructor(options: AgentOptions) {
    this.node = options.node;
    this.store = new AgentStore(resolve(options.stateDir));
    this.root = options.root ? resolve(options.root) : "";
    this.clock = options.clock ?? (() => new Date());
    this.runner = options.runner ?? nodeProcessRunner;
    this.env = options.env ?? baseEnv();
    this.tools = options.tools ?? {};
    this.probeSettleMs = options.probeSettleMs ?? DEFAULT_PROBE_SETTLE_MS;
    this.concurrency = options.concurrency ?? 1024;
    this.supervisorOptions = options.supervisor ?? {};
    this.flusher = options.flusher ?? processFlushes;
    this.startedAt = this.clock();
  }

  /** Runs `work` after every earlier apply, retire or supervision step of this agent, holding the state lock. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(async () => {
      const release = await acquireLock(this.store.dir);
      try {
        this.store.sweepLeftovers();
        return await work();
      } finally {
        release();
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * A driver context for one instance at the bundle's generation (`attemptId` set while applying).
   * `paths`: shared resolution (see pathsFor); a fresh one by default. `secrets`: the instance's
   * secrets already at work (an apply's, for the report that follows it); new ones by default.
   */
  private context(
    bundle: Bundle,
    attemptId?: string,
    paths?: HostPaths,
    secrets?: InstanceSecrets,
  ): DriverContext {
    const spec = bundle.spec;
    const usesSecrets = secrets ?? this.secretsFor(bundle, attemptId !== undefined);
    const resources: Record<string, Resource> = {};
    for (const resource of spec.resources) resources[resource.name ?? ""] = resource;
    return {
      assignment: spec.assignment,
      node: this.node,
      generation: bundle.generation,
      ...(attemptId ? { attemptId } : {}),
      state: spec.state,
      paths: paths ?? new HostPaths(this.root, spec.roots),
      runner: this.runner,
      store: this.store,
      clock: this.clock,
      env: {
        ...this.env,
        STEWARD_ROOT: this.root,
        STEWARD_NODE: this.node,
        STEWARD_ASSIGNMENT: spec.assignment,
        STEWARD_GENERATION: String(bundle.generation),
        STEWARD_ATTEMPT: attemptId ?? "",
      },
      dirty: new Set(),
      flusher: this.flusher,
      ...(attemptId ? { heldBefore: this.heldBefore(spec.assignment) } : {}),
      tools: this.tools,
      resources,
      memo: new Map(),
      onServiceExit: (assignment, name) =>
        void this.supervisor?.then((s) => s.serviceExited(assignment, name)),
      ...(usesSecrets ? { secrets: usesSecrets } : {}),
    };
  }

  /**
   * The instance's secrets, when its bundle uses any: digests remembered by its record, and (for an
   * apply) the secrets of the bundle held before, read only if a replaced file needs them.
   */
  private secretsFor(bundle: Bundle, applying: boolean): InstanceSecrets | undefined {
    const spec = bundle.spec;
    if (spec.secrets === undefined && !spec.resources.some((resource) => secretPathsOf(resource).length > 0))
      return undefined;
    const assignment = spec.assignment;
    const remembered = this.store.history(assignment)?.secrets;
    return new InstanceSecrets({
      spec,
      stateDir: this.store.dir,
      node: this.node,
      ...(remembered ? { remembered } : {}),
      ...(applying ? { held: () => this.store.instance(assignment)?.bundle.spec.secrets } : {}),
    });
  }

  /** The resources of the bundle held for `assignment` before this apply, by name; read on first use. */
  private heldBefore(assignment: string): (name: string) => Resource | undefined {
    let held: Map<string, Resource> | undefined;
    return (name) => {
      if (!held) {
        held = new Map();
        for (const resource of this.store.instance(assignment)?.bundle.spec.resources ?? [])
          held.set(resource.name ?? "", resource);
      }
      return held.get(name);
    };
  }

  /**
   * The node's path resolution for `roots`, shared through `shared` by everything one hold of the
   * state lock does (its applies, then its report): only this agent changes directories meanwhile,
   * and it tells HostPaths when it does.
   */
  private pathsFor(shared: Map<string, HostPaths>, roots: readonly string[]): HostPaths {
    const key = roots.join("\0");
    let paths = shared.get(key);
    if (!paths) {
      paths = new HostPaths(this.root, roots);
      shared.set(key, paths);
    }
    return paths;
  }

  /** What ran of an instance's commands: only `command` resources run once, so others read nothing. */
  private runOnceOf(spec: Bundle["spec"]): Readonly<Record<string, RunOnceRecord>> {
    return spec.resources.some((resource) => resource.kind === "command")
      ? this.store.runOnce(spec.assignment)
      : {};
  }

  private probeContext(ctx: DriverContext): ProbeContext {
    return { runner: this.runner, env: ctx.env, cwd: ctx.paths.workingDirectory(), clock: this.clock };
  }

  /**
   * Applies one attempt. A redelivered attempt (an id already handled) returns the earlier result
   * with `duplicate: true` and runs nothing. Throws InvalidBundleError or WrongNodeError (nothing
   * applied) for a bundle this agent must not apply; every other problem is in the result.
   */
  async apply(input: Bundle): Promise<AgentReply> {
    const bundle = await this.accept(input);
    const { outcomes, report } = await this.applyAccepted([bundle]);
    const [outcome] = outcomes;
    if (!outcome || "error" in outcome) throw outcome?.error;
    return { result: outcome.result, report };
  }

  /**
   * Applies several attempts in the order given, under one hold of the state lock, each committed
   * durably before the next starts, then takes one full report after all of them (what a queue of
   * attempts for one node needs: one look at the node, not one per attempt). Each attempt's outcome
   * is its result, or the error `apply` would have thrown for it alone (a refused bundle, an apply
   * that failed mid-way); one attempt's error never stops the others.
   */
  async applyAll(inputs: readonly Bundle[]): Promise<{ outcomes: ApplyOutcome[]; report: Report }> {
    const accepted = await Promise.all(
      inputs.map((input) =>
        this.accept(input).then(
          (bundle) => bundle,
          (error: unknown) => ({ error }),
        ),
      ),
    );
    return this.applyAccepted(accepted);
  }

  /** The bundle, once it is valid and for this node (else InvalidBundleError, WrongNodeError). */
  private async accept(input: Bundle): Promise<Bundle> {
    const bundle = await checkBundle(input);
    if (bundle.spec.node !== this.node) throw new WrongNodeError(bundle.spec.node, this.node);
    return bundle;
  }

  private applyAccepted(
    bundles: readonly (Bundle | { error: unknown })[],
  ): Promise<{ outcomes: ApplyOutcome[]; report: Report }> {
    return this.exclusive(async () => {
      const outcomes: ApplyOutcome[] = [];
      const fresh = new Map<string, FreshInstance>();
      const paths = new Map<string, HostPaths>();
      // Applied, not yet committed: committed together (one flush), before anything reads them back.
      const pending: { index: number; result: AttemptResult; record?: InstanceRecord }[] = [];
      const applied = new Set<string>();
      const commit = async () => {
        const commits = pending.splice(0);
        if (commits.length === 0) return;
        try {
          await this.store.commitAttempts(commits, applied, this.flusher);
        } catch (error) {
          // Not durable: as if these applies had failed mid-way (the hub hears them lost).
          for (const { index, record } of commits) {
            outcomes[index] = { error };
            if (record) fresh.delete(record.assignment);
          }
        }
        applied.clear();
      };
      let remembered = false;
      for (const bundle of bundles) {
        if ("error" in bundle) {
          outcomes.push(bundle);
          continue;
        }
        try {
          // The same instance or attempt again: what the earlier one left must be on disk first.
          if (
            pending.some(
              (c) =>
                c.result.attemptId === bundle.attemptId || c.result.assignment === bundle.spec.assignment,
            )
          )
            await commit();
          const earlier = this.store.attempt(bundle.attemptId);
          if (earlier) {
            outcomes.push({ result: { ...earlier, duplicate: true } });
            continue;
          }
          if (!remembered) this.store.rememberNode(this.node);
          remembered = true;
          const { result, record, runs, probes, secrets, dirty } = await this.applyBundle(bundle, paths);
          for (const dir of dirty) applied.add(dir);
          pending.push({ index: outcomes.length, result, ...(record ? { record } : {}) });
          if (record)
            fresh.set(record.assignment, {
              record,
              ...(runs ? { runs } : {}),
              ...(probes ? { probes } : {}),
              ...(secrets ? { secrets } : {}),
            });
          outcomes.push({ result });
        } catch (error) {
          outcomes.push({ error });
        }
      }
      await commit();
      return { outcomes, report: await this.report(fresh, false, paths) };
    });
  }

  /** Applies one bundle; `dirty` are the directories where it renamed files (flushed with its record). */
  private async applyBundle(
    bundle: Bundle,
    shared: Map<string, HostPaths>,
  ): Promise<{
    result: AttemptResult;
    record?: InstanceRecord;
    runs?: ResourceRun[];
    probes?: ProbeReport[];
    secrets?: InstanceSecrets;
    dirty: Iterable<string>;
  }> {
    const spec = bundle.spec;
    const startedAt = this.clock().toISOString();
    const previous = this.store.history(spec.assignment);
    const base = {
      attemptId: bundle.attemptId,
      node: this.node,
      assignment: spec.assignment,
      generation: bundle.generation,
      startedAt,
    };
    if (previous && previous.heldGeneration > bundle.generation) {
      // Never roll an instance back because an old attempt arrived late: a newer generation supersedes.
      return {
        result: {
          ...base,
          outcome: "failed",
          failureClass: "permanent",
          reason: "Superseded",
          message: `generation ${bundle.generation} is older than generation ${previous.heldGeneration}, which this agent already holds: nothing applied`,
          resources: [],
          finishedAt: this.clock().toISOString(),
        },
        dirty: [],
      };
    }
    const ctx = this.context(bundle, bundle.attemptId, this.pathsFor(shared, spec.roots));
    for (const decision of bundle.decisions ?? [])
      takeDecision(this.store, spec.assignment, decision, startedAt);
    // Earlier generations' runs whose outcome was lost stay questions, whatever this generation
    // does with their commands (blocks, guards or removes them).
    keepLostRuns(this.store, spec.assignment, bundle.generation);
    await ctx.secrets?.prepare();
    let runs: ResourceRun[];
    try {
      runs = await applyResources(spec.resources, ctx, this.runOnceOf(spec), {
        concurrency: this.concurrency,
      });
      // What a resource's outcome says leaves the host: no secret value in it (a command's output).
      if (ctx.secrets) for (const run of runs) run.outcome = await ctx.secrets.mask(run.outcome);
    } catch (error) {
      if (!(error instanceof BundleError)) throw error;
      return {
        result: {
          ...base,
          outcome: "failed",
          failureClass: "permanent",
          reason: "InvalidBundle",
          message: `${error.message}: nothing applied`,
          resources: [],
          finishedAt: this.clock().toISOString(),
        },
        dirty: ctx.dirty,
      };
    }
    const outcomes = runs.map((run) => run.outcome);
    const failed = outcomes.filter((outcome) => outcome.action === "failed");
    const complete = !outcomes.some((outcome) => NOT_DONE.has(outcome.action));
    let probes: ProbeReport[] | undefined;
    if (complete && spec.state === "running" && spec.probes.length > 0) {
      const { probeUntilSettled } = await import("./probes.js");
      probes = await probeUntilSettled(spec.probes, this.probeContext(ctx), this.probeSettleMs);
      if (ctx.secrets) probes = await ctx.secrets.mask(probes);
      this.rememberProbes(spec.assignment, probes);
    }
    const failingProbes = (probes ?? []).filter((probe) => !probe.ok);
    const finishedAt = this.clock().toISOString();

    const record: InstanceRecord = {
      assignment: spec.assignment,
      bundle,
      appliedGeneration: previous?.appliedGeneration ?? 0,
      resources: {},
    };
    if (previous?.appliedHash) record.appliedHash = previous.appliedHash;
    if (previous?.appliedState) record.appliedState = previous.appliedState;
    if (previous?.appliedVersion) record.appliedVersion = previous.appliedVersion;
    const secrets = ctx.secrets?.remember();
    if (secrets) record.secrets = secrets;
    if (complete) {
      record.appliedGeneration = bundle.generation;
      record.appliedHash = bundle.hash;
      record.appliedState = spec.state;
      if (spec.version !== undefined) record.appliedVersion = spec.version;
      else delete record.appliedVersion;
    }
    for (const run of runs)
      record.resources[run.name] = recordOutcome(
        previous?.resources[run.name],
        run.outcome,
        bundle.generation,
        bundle.attemptId,
        finishedAt,
      );

    const result: AttemptResult = {
      ...base,
      outcome: complete && failingProbes.length === 0 ? "succeeded" : "failed",
      resources: outcomes,
      finishedAt,
    };
    if (failed.length > 0) {
      const first = failed[0]!;
      result.failureClass = failed.some((f) => f.failureClass === "permanent") ? "permanent" : "transient";
      result.reason = first.reason ?? "ResourceFailed";
      const blocked = outcomes.filter((o) => o.action === "blocked" || o.action === "restored").length;
      result.message = `${failed.length} of ${outcomes.length} resources failed (first: ${first.name}: ${first.message})${blocked > 0 ? `; ${blocked} blocked or restored` : ""}`;
    } else if (!complete) {
      result.failureClass = "transient";
      result.reason = "Blocked";
      result.message = "some resources were blocked";
    } else if (failingProbes.length > 0) {
      result.failureClass = "transient";
      result.reason = "ProbeFailing";
      result.message = `every resource applied, but ${failingProbes.map((p) => `probe ${p.name} fails: ${p.message}`).join("; ")}`;
    }
    record.lastAttempt = {
      attemptId: bundle.attemptId,
      generation: bundle.generation,
      outcome: result.outcome,
      at: finishedAt,
    };
    if (result.failureClass) record.lastAttempt.failureClass = result.failureClass;
    return {
      result,
      record,
      runs,
      ...(probes ? { probes } : {}),
      ...(ctx.secrets ? { secrets: ctx.secrets } : {}),
      dirty: ctx.dirty,
    };
  }

  private rememberProbes(assignment: string, probes: readonly ProbeReport[]): void {
    const map = this.probeResults.get(assignment) ?? new Map<string, ProbeReport>();
    for (const probe of probes) map.set(probe.name, probe);
    this.probeResults.set(assignment, map);
  }

  /**
   * A full report over every instance this agent holds a bundle for, observed from the system now.
   * Changes nothing on the system.
   */
  observe(): Promise<Report> {
    return this.report();
  }

  /**
   * Builds a report. `fresh` carries what applies just observed, by assignment: resources found
   * as desired need no second look, changed ones are observed again. `cachedProbes` lets the
   * supervisor reuse probe results that are within their interval.
   */
  private async report(
    fresh?: ReadonlyMap<string, FreshInstance>,
    cachedProbes = false,
    shared = new Map<string, HostPaths>(),
  ): Promise<Report> {
    const instances: InstanceReport[] = [];
    for (const assignment of this.store.assignments()) {
      const reuse = fresh?.get(assignment);
      const record = reuse?.record ?? this.store.instance(assignment);
      if (!record) continue;
      const paths = this.pathsFor(shared, record.bundle.spec.roots);
      instances.push(await this.observeInstance(record, reuse, cachedProbes, paths));
    }
    const now = this.clock();
    return {
      apiVersion: "steward.dev/v1",
      kind: "Report",
      node: this.node,
      takenAt: now.toISOString(),
      seq: this.store.nextSeq(),
      agent: {
        version: AGENT_VERSION,
        hostname: hostname(),
        startedAt: this.startedAt.toISOString(),
        uptimeSeconds: Math.max(0, (now.getTime() - this.startedAt.getTime()) / 1000),
        capabilities: [...DRIVER_KINDS],
      },
      instances,
    };
  }

  private async observeResource(
    resource: Resource,
    ctx: DriverContext,
    runOnce: Readonly<Record<string, RunOnceRecord>>,
  ): Promise<ResourceObservation> {
    try {
      const { observed, plan } = await observeAndPlan(resource, ctx, runOnce[resource.name ?? ""], []);
      if (plan.conflict)
        return {
          observed,
          plan,
          failure: {
            failureClass: "permanent",
            reason: plan.conflict.reason,
            message: plan.conflict.message,
          },
        };
      return { observed, plan };
    } catch (error) {
      const failure = asResourceFailure(error);
      return {
        failure: {
          failureClass: failure.failureClass,
          reason: failure.reason,
          message: failure.message,
          ...(failure.evidence ? { evidence: failure.evidence } : {}),
        },
      };
    }
  }

  private async observeInstance(
    record: InstanceRecord,
    fresh: { runs?: ResourceRun[]; probes?: ProbeReport[]; secrets?: InstanceSecrets } | undefined,
    cachedProbes: boolean,
    paths: HostPaths,
  ): Promise<InstanceReport> {
    const { bundle } = record;
    const spec = bundle.spec;
    const ctx = this.context(bundle, undefined, paths, fresh?.secrets);
    await ctx.secrets?.prepare();
    const now = this.clock();
    const budget = budgetOf(bundle);
    const runOnce = this.runOnceOf(spec);
    const reused = new Map<string, ResourceObservation>();
    for (const run of fresh?.runs ?? []) if (run.observation) reused.set(run.name, run.observation);
    const resources = await mapLimited(
      spec.resources,
      OBSERVE_CONCURRENCY,
      async (resource): Promise<ResourceReport> => {
        const name = resource.name ?? "";
        const seen = reused.get(name) ?? (await this.observeResource(resource, ctx, runOnce));
        const resourceRecord = record.resources[name];
        const status = resourceStatus({
          inSync: seen.plan !== undefined && inSync(seen.plan),
          ...(seen.failure ? { observeFailure: seen.failure } : {}),
          record: resourceRecord,
          generation: bundle.generation,
          budget,
          now,
        });
        const report: ResourceReport = {
          name,
          kind: resource.kind,
          ...status,
          counters: countersOf(resourceRecord),
        };
        if (seen.observed !== undefined) report.observed = seen.observed as Record<string, unknown>;
        if (seen.plan && seen.plan.diff.length > 0) report.diff = seen.plan.diff;
        if (status.status !== "ok" && report.evidence === undefined && seen.observed !== undefined) {
          const evidence = (await driverFor(resource)).evidence?.(resource, seen.observed, ctx);
          if (evidence) report.evidence = evidence;
        }
        return report;
      },
    );

    let probes: ProbeReport[] = [];
    if (spec.state === "running" && spec.probes.length > 0) {
      const { runProbe } = await import("./probes.js");
      const cached = this.probeResults.get(spec.assignment);
      probes = await Promise.all(
        spec.probes.map((probe) => {
          const justRun = fresh?.probes?.find((p) => p.name === probe.name);
          if (justRun) return justRun;
          const known = cached?.get(probe.name);
          if (cachedProbes && known) return known;
          return runProbe(probe, this.probeContext(ctx));
        }),
      );
      this.rememberProbes(spec.assignment, probes);
    }

    const report: InstanceReport = {
      assignment: spec.assignment,
      generation: record.appliedGeneration,
      observedGeneration: bundle.generation,
      state: this.observedState(spec.resources, resources, record),
      converged:
        record.appliedGeneration === bundle.generation &&
        resources.every((r) => r.status === "ok") &&
        probes.every((p) => p.ok),
      resources,
      probes,
    };
    if (record.appliedHash) report.hash = record.appliedHash;
    if (record.appliedVersion !== undefined && record.appliedGeneration > 0)
      report.version = record.appliedVersion;
    if (record.lastAttempt) report.lastAttempt = record.lastAttempt;
    // Read whatever the spec holds now: a command removed since may have left a question.
    const lost = this.store.lostRuns(spec.assignment);
    if (lost.length > 0) report.lostRuns = [...lost];
    // Evidence, messages and lost runs' output leave the host: no secret value in them.
    return ctx.secrets ? ctx.secrets.mask(report) : report;
  }

  /**
   * `running` when every service, container and unit is observed running, `stopped` when none is;
   * an instance of files only is in the state it was last applied with.
   */
  private observedState(
    resources: readonly Resource[],
    reports: readonly ResourceReport[],
    record: InstanceRecord,
  ): InstanceReport["state"] {
    const states: boolean[] = [];
    resources.forEach((resource, i) => {
      if (!SERVICE_KINDS.has(resource.kind)) return;
      if (resource.kind === "systemd-unit" && resource.enabled === false) return;
      const observed = reports[i]!.observed as { running?: boolean; activeState?: string } | undefined;
      if (observed === undefined) return;
      states.push(observed.running ?? observed.activeState === "active");
    });
    if (states.length === 0) return record.appliedState ?? "unknown";
    if (states.every(Boolean)) return "running";
    if (states.every((running) => !running)) return "stopped";
    return "unknown";
  }

  /** Stops managing an instance: nothing on the system is deleted or stopped; it is no longer reported. */
  retire(assignment: string): Promise<void> {
    return this.exclusive(async () => {
      this.store.retire(assignment, this.clock());
      this.probeResults.delete(assignment);
    });
  }

  /**
   * Starts supervising: services are restarted per their restart policy (with backoff) by the
   * ordinary apply path, probes run on their cadence, and `onReport` receives a fresh full report
   * when something changed and at least every report interval.
   */
  start(onReport: (report: Report) => void): void {
    if (this.supervisor) return;
    // Loaded here: a one-shot agent never supervises.
    this.supervisor = Promise.all([import("./supervisor.js"), import("./probes.js")]).then(
      ([{ Supervisor }, { runProbe }]) => {
        const supervisor = new Supervisor(
          {
            instances: () => this.store.instances(),
            recordCrash: (assignment, resource, crash) =>
              this.exclusive(() => this.recordSupervised(assignment, resource, () => crash)),
            heal: (assignment, resource) => this.exclusive(() => this.heal(assignment, resource)),
            // Staying up ends the run of failures, as a success would.
            healthy: (assignment, resource) =>
              this.exclusive(() =>
                this.recordSupervised(assignment, resource, (kind) => ({
                  name: resource,
                  kind,
                  action: "unchanged",
                })),
              ),
            probe: (record, probe) => runProbe(probe, this.probeContext(this.context(record.bundle))),
            rememberProbes: (assignment, probes) => this.rememberProbes(assignment, probes),
            report: () => this.report(undefined, true),
            store: this.store,
            clock: this.clock,
          },
          onReport,
          this.supervisorOptions,
        );
        supervisor.start();
        return supervisor;
      },
    );
  }

  /** Stops supervising (services keep running: a restarted agent picks them up again). */
  async stop(): Promise<void> {
    const supervisor = this.supervisor;
    this.supervisor = undefined;
    await (await supervisor)?.stop();
    await this.queue;
  }

  /** Records an outcome the supervisor saw for one resource (a crash, or that it stayed up). */
  private async recordSupervised(
    assignment: string,
    resourceName: string,
    outcome: (kind: string) => ResourceOutcome,
  ): Promise<void> {
    const record = this.store.instance(assignment);
    const resource = record?.bundle.spec.resources.find((r) => r.name === resourceName);
    if (!record || !resource) return;
    record.resources[resourceName] = recordOutcome(
      record.resources[resourceName],
      outcome(resource.kind),
      record.bundle.generation,
      record.lastAttempt?.attemptId,
      this.clock().toISOString(),
    );
    this.store.saveInstance(record);
  }

  /**
   * The supervisor's repair of one resource, by the ordinary observe → plan → apply. A restart after
   * crashes does not clear their count: only staying up does (`healthy`), so a crash loop spends
   * the budget and ends up `stuck`.
   */
  private async heal(assignment: string, resourceName: string): Promise<void> {
    const record = this.store.instance(assignment);
    const resource = record?.bundle.spec.resources.find((r) => r.name === resourceName);
    if (!record || !resource) return;
    const attemptId = record.lastAttempt?.attemptId;
    const ctx = this.context(record.bundle, attemptId);
    await ctx.secrets?.prepare();
    const run = await applyResource(
      0,
      resource,
      resourceName,
      ctx,
      this.store.runOnce(assignment)[resourceName],
      [],
    );
    if (ctx.secrets) run.outcome = await ctx.secrets.mask(run.outcome);
    const previous = record.resources[resourceName];
    if (run.outcome.action === "failed" || (previous?.counters.consecutiveFailures ?? 0) === 0) {
      record.resources[resourceName] = recordOutcome(
        previous,
        run.outcome,
        record.bundle.generation,
        attemptId,
        this.clock().toISOString(),
      );
      this.store.saveInstance(record);
    }
  }
}
