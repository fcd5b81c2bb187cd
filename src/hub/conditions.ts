/**
 * Conditions, through one small helper (after fluxcd/pkg runtime/conditions): `markOpen` raises or
 * refreshes a condition, `markResolved` closes it. Only the reconciler calls them, from what it
 * observed; nobody clicks a condition away. `since` changes only when the status or the reason
 * changes; every open, change of reason or message, and resolution is recorded in the history.
 * Conditions that need judgement get a task (tasks.ts) when they open; the task closes with them.
 */
import type { ConditionRecord, ConditionType, Resolver, SubjectKind } from "./records.js";
import { redact, redactDeep } from "./redact.js";
import type { StoreReads, UnitOfWork } from "./store/store.js";
import { closeTaskOf, needsJudgement, openTaskFor } from "./tasks.js";

/** What the reconciler knows when it raises a condition. */
export type ConditionInput = Pick<
  ConditionRecord,
  "type" | "subjectKind" | "subject" | "reason" | "message" | "resolver"
> &
  Partial<
    Pick<ConditionRecord, "evidence" | "procedure" | "assignment" | "node" | "revision" | "generation">
  > & {
    /** The attempt that caused this observation; added to `tried`. */
    attemptId?: string;
    /** Attempt ids to add to `tried`. */
    tried?: string[];
  };

export type ConditionChange = "opened" | "updated" | "unchanged";

/** How stale `lastObserved` may get before an unchanged observation is written anyway. */
const OBSERVED_REFRESH_MS = 10_000;

/**
 * Types whose conditions are told apart by reason as well as subject: one node's agent may be
 * disconnected while its attempts exhaust their deliveries, and each problem opens and resolves on
 * its own. Every other type has one open condition per subject, whose reason may change. (The
 * store's unique index `conditions_open` says the same.)
 */
const KEYED_BY_REASON: ReadonlySet<ConditionType> = new Set<ConditionType>(["TransportDegraded"]);

/**
 * Types whose conditions are told apart by generation as well: an interrupted one-shot is a
 * question about one generation's run, which a newer generation's interruption does not answer.
 */
const KEYED_BY_GENERATION: ReadonlySet<ConditionType> = new Set<ConditionType>(["OneShotInterrupted"]);

/** The reason that is part of a condition's identity, if its type is keyed by reason. */
function identityReason(type: ConditionType, reason: string): string | undefined {
  return KEYED_BY_REASON.has(type) ? reason : undefined;
}

/** The generation that is part of a condition's identity, if its type is keyed by generation. */
function identityGeneration(type: ConditionType, generation: number | undefined): number | undefined {
  return KEYED_BY_GENERATION.has(type) ? generation : undefined;
}

/**
 * Raises the condition, or refreshes the open one of the same type and subject (and reason, for
 * types keyed by reason).
 */
export async function markOpen(
  store: UnitOfWork,
  input: ConditionInput,
  now: string,
  newId: () => string,
): Promise<{ condition: ConditionRecord; change: ConditionChange }> {
  const message = redact(input.message);
  const evidence = redactDeep(input.evidence ?? {});
  const addTried = [...(input.tried ?? []), ...(input.attemptId ? [input.attemptId] : [])];
  const existing = await store.conditions.findOpen(
    input.type,
    input.subjectKind,
    input.subject,
    identityReason(input.type, input.reason),
    identityGeneration(input.type, input.generation),
  );
  if (!existing) {
    const condition: ConditionRecord = {
      id: newId(),
      type: input.type,
      subjectKind: input.subjectKind,
      subject: input.subject,
      status: "open",
      since: now,
      lastObserved: now,
      reason: input.reason,
      message,
      evidence,
      tried: [...new Set(addTried)],
      resolver: input.resolver,
      openedAt: now,
    };
    assignOptional(condition, input);
    await store.conditions.insert(condition);
    await store.conditions.appendEvent({
      conditionId: condition.id,
      at: now,
      event: "opened",
      reason: condition.reason,
      message,
      ...(input.attemptId ? { attemptId: input.attemptId } : {}),
    });
    if (needsJudgement(condition.type)) await openTaskFor(store, condition, now, newId);
    return { condition, change: "opened" };
  }
  const tried = [...new Set([...existing.tried, ...addTried])];
  const reasonChanged = existing.reason !== input.reason;
  const changed =
    reasonChanged ||
    existing.message !== message ||
    existing.resolver !== input.resolver ||
    existing.procedure !== input.procedure ||
    tried.length !== existing.tried.length ||
    JSON.stringify(existing.evidence) !== JSON.stringify(evidence) ||
    existing.generation !== input.generation ||
    (input.attemptId !== undefined && existing.attemptId !== input.attemptId);
  const stale = Date.parse(now) - Date.parse(existing.lastObserved) >= OBSERVED_REFRESH_MS;
  if (!changed && !stale) return { condition: existing, change: "unchanged" };
  const condition: ConditionRecord = {
    ...existing,
    since: reasonChanged ? now : existing.since,
    lastObserved: now,
    reason: input.reason,
    message,
    evidence,
    tried,
    resolver: input.resolver,
  };
  delete condition.procedure;
  assignOptional(condition, input);
  await store.conditions.save(condition);
  if (reasonChanged || existing.message !== message)
    await store.conditions.appendEvent({
      conditionId: condition.id,
      at: now,
      event: "updated",
      reason: condition.reason,
      message,
      ...(input.attemptId ? { attemptId: input.attemptId } : {}),
    });
  return { condition, change: changed ? "updated" : "unchanged" };
}

function assignOptional(condition: ConditionRecord, input: ConditionInput): void {
  if (input.procedure !== undefined) condition.procedure = input.procedure;
  if (input.assignment !== undefined) condition.assignment = input.assignment;
  if (input.node !== undefined) condition.node = input.node;
  if (input.revision !== undefined) condition.revision = input.revision;
  if (input.generation !== undefined) condition.generation = input.generation;
  if (input.attemptId !== undefined) condition.attemptId = input.attemptId;
}

/**
 * Resolves the open condition of this type and subject, if there is one, because observation shows
 * it no longer holds; `resolution` says what was observed. With `reason`, only a condition with that
 * reason resolves (for a type keyed by reason: the one problem that was recovered); without it, every
 * open condition of the type on the subject does. Returns the (last) resolved condition.
 */
export async function markResolved(
  store: UnitOfWork,
  type: ConditionType,
  subjectKind: SubjectKind,
  subject: string,
  now: string,
  resolution: string,
  reason?: string,
): Promise<ConditionRecord | undefined> {
  const open =
    reason === undefined && (KEYED_BY_REASON.has(type) || KEYED_BY_GENERATION.has(type))
      ? await store.conditions.list({ status: "open", type, subjectKind, subject })
      : [await store.conditions.findOpen(type, subjectKind, subject, reason)];
  let resolved: ConditionRecord | undefined;
  for (const existing of open)
    if (existing) resolved = await resolveCondition(store, existing, now, resolution);
  return resolved;
}

/** Resolves one open condition by observation, closing its task. */
export async function resolveCondition(
  store: UnitOfWork,
  open: ConditionRecord,
  now: string,
  resolution: string,
): Promise<ConditionRecord> {
  const resolved = await closeCondition(store, open, now, redact(resolution));
  await closeTaskOf(store, resolved, now);
  return resolved;
}

/** Records `condition` as resolved with `resolution` (and who resolved it), with its history entry. */
export async function closeCondition(
  store: UnitOfWork,
  open: ConditionRecord,
  now: string,
  resolution: string,
  resolver: Resolver = open.resolver,
): Promise<ConditionRecord> {
  const condition: ConditionRecord = {
    ...open,
    status: "resolved",
    since: now,
    lastObserved: now,
    resolvedAt: now,
    resolver,
    resolution,
  };
  await store.conditions.save(condition);
  await store.conditions.appendEvent({
    conditionId: condition.id,
    at: now,
    event: "resolved",
    reason: condition.reason,
    message: resolution,
  });
  return condition;
}

/** Resolves every open condition of `types` on one subject. */
export async function resolveAll(
  store: UnitOfWork,
  types: readonly ConditionType[],
  subjectKind: SubjectKind,
  subject: string,
  now: string,
  resolution: string,
): Promise<ConditionRecord[]> {
  const resolved: ConditionRecord[] = [];
  for (const type of types) {
    const condition = await markResolved(store, type, subjectKind, subject, now, resolution);
    if (condition) resolved.push(condition);
  }
  return resolved;
}

/**
 * The invariants every condition keeps, as a list of violations (empty when all hold): at most one
 * open condition per type and subject (and reason or generation, for types keyed by them); an open
 * one has no resolution; a resolved one has both a
 * resolution time and a history that ends in `resolved`; `since` never precedes `openedAt`; the
 * history starts with `opened`. Tests run it after every scenario.
 */
export async function conditionViolations(store: StoreReads): Promise<string[]> {
  const violations: string[] = [];
  const open = new Map<string, string>();
  for (const condition of await store.conditions.list()) {
    const label = `${condition.type} ${condition.subjectKind} ${condition.subject} (${condition.id})`;
    const history = await store.conditions.history(condition.id);
    if (history[0]?.event !== "opened") violations.push(`${label}: history does not start with "opened"`);
    if (condition.since < condition.openedAt) violations.push(`${label}: since precedes openedAt`);
    if (condition.status === "open") {
      const key = `${condition.type}|${condition.subjectKind}|${condition.subject}|${identityReason(condition.type, condition.reason) ?? ""}|${identityGeneration(condition.type, condition.generation) ?? ""}`;
      if (open.has(key))
        violations.push(
          `${label}: a second open condition for the same type and subject (and reason or generation)`,
        );
      open.set(key, condition.id);
      if (condition.resolvedAt || condition.resolution)
        violations.push(`${label}: open but has a resolution`);
      if (history.at(-1)?.event === "resolved")
        violations.push(`${label}: open but its history ends resolved`);
    } else {
      if (!condition.resolvedAt) violations.push(`${label}: resolved without a resolution time`);
      if (history.at(-1)?.event !== "resolved")
        violations.push(`${label}: resolved but history does not say so`);
    }
  }
  return violations;
}
