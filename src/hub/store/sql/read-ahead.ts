/**
 * What a batch of reconciles reads, read ahead for the whole batch: one query per table for every
 * instance of the batch (the keys bound as one parameter), where each reconcile made one query per
 * table before it decided anything — eight round trips per instance on PostgreSQL.
 *
 * It belongs to one unit of work and sees that unit's snapshot. The ports answer from it what it
 * holds and read the database for anything else, and they keep it true to their own writes: a
 * write they can follow (an intent or attempt saved) updates it, any other write drops what it
 * held of that row, which is then read again. A step rolled back drops all of it. Records are
 * handed out as copies (specs and observations stay shared: they are frozen).
 */
import type {
  AttemptRecord,
  ConditionRecord,
  DesiredInstance,
  IntentRecord,
  IntentStatus,
  NodeRecord,
  Observation,
  RolloutDecisionRecord,
} from "../../records.js";

/** A rollout as the unit's maps name it. */
export const rolloutOf = (assignment: string, revision: string) => `${assignment}\0${revision}`;

/** An instance's intents as read ahead: its current generation's and every live one, by generation. */
export interface IntentsAhead {
  current: number;
  byGeneration: Map<number, IntentRecord>;
}

export class ReadAhead {
  /** By instance key; null: no such instance. */
  readonly desired = new Map<string, DesiredInstance | null>();
  readonly intents = new Map<string, IntentsAhead>();
  /** By id: the last attempts of the intents read ahead. */
  readonly attempts = new Map<string, AttemptRecord>();
  /** By name; null: no such node. */
  readonly nodes = new Map<string, NodeRecord | null>();
  /** By node: its latest report's time; null: none stored. */
  readonly reports = new Map<string, { takenAt: string; seq?: number } | null>();
  /** By instance key; null: none stored. */
  readonly observations = new Map<string, Observation | null>();
  /** By instance key: its open conditions, oldest first. */
  readonly openConditions = new Map<string, ConditionRecord[]>();

  // What the unit found, asked once per rollout or node rather than once per instance: a batch's
  // instances share a few rollouts and nodes. Absences are kept until a write could end them.
  /** By rollout (`assignment\0revision`): the operator's decision in force; null: none. */
  readonly decisions = new Map<string, RolloutDecisionRecord | null>();
  /** Rollouts (`assignment\0revision`) with no intent held for a rollout reason. */
  readonly noneHeld = new Set<string>();
  /** Rollouts with no failure that counts against maxFailures. */
  readonly noneFailed = new Set<string>();
  /** `findOpen` questions about a subject other than an instance that found no open condition. */
  readonly noneOpen = new Set<string>();
  /** By node: the keys of its intents in a status list (by its text), read ahead for a batch of its reports. */
  readonly ofNode = new Map<string, Map<string, string[]>>();
  /** By node: the status lists (by their text) of which it has no intent. */
  readonly noneOfNode = new Map<string, Map<string, readonly IntentStatus[]>>();

  /** A step rolled back: what was read ahead may be behind or ahead of the database now. */
  clear(): void {
    // Every member is a map or a set: all of them go, one added later too.
    for (const member of Object.values(this) as { clear(): void }[]) member.clear();
  }
}
