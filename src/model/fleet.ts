import { parseDuration } from "./duration.js";
import type {
  Budget,
  EnrolmentSettings,
  FleetSpec,
  SecretSettings,
  SigningPolicy,
  Stage,
  StatusSettings,
} from "./generated.js";

/** Retry budget in effect for an instance: transient failures are retried within it. */
export interface EffectiveBudget {
  attempts: number;
  withinMs: number;
}

/** steward.yaml with every default filled in. */
export interface FleetSettings {
  mode: Stage;
  budget: EffectiveBudget;
  heartbeat: { intervalMs: number; missed: number };
  ignore: string[];
  status: StatusSettings;
  signing?: SigningPolicy;
  /** Who besides the hosts may read secrets (`steward secret encrypt|update` encrypt for them too). */
  secrets?: SecretSettings;
  /** How approved hosts' Node documents are written (`steward enrolments approve`). */
  enrolment?: EnrolmentSettings;
}

export const DEFAULT_BUDGET: EffectiveBudget = { attempts: 5, withinMs: 30 * 60_000 };

export function effectiveBudget(budget: Budget | undefined, fallback: EffectiveBudget): EffectiveBudget {
  return {
    attempts: budget?.attempts ?? fallback.attempts,
    withinMs: budget?.within ? parseDuration(budget.within) : fallback.withinMs,
  };
}

/** Fleet settings from steward.yaml's spec (or all defaults when there is no steward.yaml). */
export function fleetSettings(spec: FleetSpec | undefined): FleetSettings {
  const settings: FleetSettings = {
    mode: spec?.mode ?? "apply",
    budget: effectiveBudget(spec?.budget, DEFAULT_BUDGET),
    heartbeat: {
      intervalMs: spec?.heartbeat?.interval ? parseDuration(spec.heartbeat.interval) : 30_000,
      missed: spec?.heartbeat?.missed ?? 3,
    },
    ignore: spec?.ignore ?? [],
    status: spec?.status ?? { providers: [{ type: "gitnotes" }] },
  };
  if (spec?.signing) settings.signing = spec.signing;
  if (spec?.secrets) settings.secrets = spec.secrets;
  if (spec?.enrolment) settings.enrolment = spec.enrolment;
  return settings;
}
