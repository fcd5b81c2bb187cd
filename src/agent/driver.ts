/**
 * The Driver port: one implementation per resource kind (src/agent/drivers/<kind>.ts). A driver
 * reads the thing itself (`observe`), decides with a pure `plan(desired, observed)` what to change,
 * and `apply` does the I/O. Healing drift is the same observe → plan → apply run again.
 */
import type { Resource, ResourceOutcome } from "../model/generated.js";
import type { FlushBatch } from "./atomic.js";
import type { HostPaths } from "./paths.js";
import type { ProcessRunner } from "./runner.js";
import type { InstanceSecrets } from "./secrets.js";
import type { AgentStore, RunOnceRecord } from "./store.js";

/** Settings for drivers that call host tools; tests point them at local fixtures. */
export interface ToolSettings {
  /** Extra `-o Key=Value` options for apt-get (e.g. a local repository in tests). */
  aptOptions?: string[];
  /** Container engines tried in order when `engine: auto`. Default docker, then podman. */
  containerEngines?: string[];
  /** How long a started service must stay up before it counts as started. Default 300 ms. */
  serviceStartGraceMs?: number;
}

/** What a driver may touch, for one instance at one generation. */
export interface DriverContext {
  assignment: string;
  node: string;
  /** The generation being applied or observed against. */
  generation: number;
  /** Set while applying an attempt. */
  attemptId?: string;
  /** The instance's desired state: services and containers run, or are stopped. */
  state: "running" | "stopped";
  paths: HostPaths;
  runner: ProcessRunner;
  store: AgentStore;
  clock: () => Date;
  /** The environment commands and services start from (PATH, HOME, STEWARD_*). */
  env: Record<string, string>;
  /** Directories whose entries changed; flushed once, with the attempt's record (AgentStore.commitAttempts). */
  dirty: Set<string>;
  /** Flushes written files together (see FlushBatch). */
  flusher: FlushBatch;
  tools: ToolSettings;
  /** The instance's resources by name (a service fingerprints its `restartOn` resources). */
  resources: Readonly<Record<string, Resource>>;
  /** Memo for one attempt or observation (e.g. which container engine answers). */
  memo: Map<string, unknown>;
  /**
   * While applying: the resource of that name as the bundle this agent held before declared it
   * (what steward itself last wrote, and the repository's history still has), if any. Read only
   * when asked: a file driver asks before it replaces content.
   */
  heldBefore?: (name: string) => Resource | undefined;
  /** Called when a process this agent started exits (the supervisor listens). */
  onServiceExit?: (assignment: string, name: string) => void;
  /** The instance's secrets, decrypted on this host only (absent when it uses none). */
  secrets?: InstanceSecrets;
}

/** Facts a plan needs beyond desired and observed state, all plain data. */
export interface PlanFacts {
  generation: number;
  state: "running" | "stopped";
  /** Names of resources created, updated or restarted earlier in this attempt. */
  changed: readonly string[];
  /** The instance's resources by name (a service fingerprints the specs of its `restartOn`). */
  resources: Readonly<Record<string, Resource>>;
  /** The run-once record of this resource, for commands. */
  runOnce?: RunOnceRecord;
  /**
   * Digests of the instance's secrets' plaintext (InstanceSecrets.digests: `PATH`, `PATH#KEY`):
   * what a plan compares a secret file's observed digest with, and fingerprints a secret value by.
   */
  secretDigests?: Readonly<Record<string, string>>;
}

/** What a plan does to a resource; `none` and `skip` mean it is as desired. */
export type PlanAction =
  | "none"
  | "skip"
  | "create"
  | "update"
  | "remove"
  | "run"
  | "start"
  | "stop"
  | "restart";

/** A JSON-serialisable plan for one resource. */
export interface Plan {
  action: PlanAction;
  /** What differs from desired, field by field. Empty when in sync. */
  diff: string[];
  /** Why nothing is done, e.g. `creates /var/lib/db/schema-version exists`. */
  note?: string;
  /** A conflict that needs a person (what is there is not what steward may replace). */
  conflict?: { reason: string; message: string };
}

/** What apply did, in the wire vocabulary. */
export interface Applied {
  action: ResourceOutcome["action"];
  message?: string;
  evidence?: string;
}

/** The outcome action that a plan's action becomes once applied. */
export const APPLIED_ACTION: Record<PlanAction, ResourceOutcome["action"]> = {
  none: "unchanged",
  skip: "skipped",
  create: "created",
  update: "updated",
  remove: "removed",
  run: "ran",
  start: "started",
  stop: "stopped",
  restart: "restarted",
};

/** True when the plan says the resource is observed as desired. */
export function inSync(plan: Plan): boolean {
  return plan.action === "none" || plan.action === "skip";
}

// biome-ignore lint/suspicious/noExplicitAny: the registry holds drivers of every resource type.
export type AnyDriver = Driver<any, any, any>;

/** One resource kind: read it, plan it (pure), apply the plan, and for atomic groups put it back. */
export interface Driver<R extends Resource, O, S = unknown> {
  readonly kind: R["kind"];
  /** Reads the resource from the system. Never changes anything. Returns JSON-serialisable data. */
  observe(resource: R, ctx: DriverContext): Promise<O>;
  /** Pure: what to do to go from `observed` to `resource`. */
  plan(resource: R, observed: O, facts: PlanFacts): Plan;
  /** Does the I/O of a plan whose action is not `none`/`skip`. Throws ResourceFailure. */
  apply(resource: R, plan: Plan, observed: O, ctx: DriverContext): Promise<Applied>;
  /** For atomic groups: what it takes to put the resource back as it was before apply. */
  capture?(resource: R, observed: O, ctx: DriverContext): Promise<S>;
  restore?(resource: R, snapshot: S, ctx: DriverContext): Promise<void>;
  /** Evidence for a resource that is not as desired (recent output, exit status). */
  evidence?(resource: R, observed: O, ctx: DriverContext): string | undefined;
}
