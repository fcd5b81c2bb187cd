/**
 * Hosts asking to join, as the hub records and answers them. A request is answered from what the
 * tracked branch declares (decide.ts): a new one becomes an `EnrolmentRequested` task for a person,
 * a name taken by another key an `IdentityConflict`; the host is admitted once its Node document,
 * with its key, is on the tracked branch — admitting a host is a commit. A person approves (writes
 * the Node document: `steward enrolments approve`) or denies; the conditions resolve by observation
 * (the declaration arrives) or close with a denial. The credentials the hub issued are revoked once
 * Git no longer admits their key (`credentialRevocations`).
 */
import { NotFoundError, StewardError } from "../../model/errors.js";
import type { Node } from "../../model/generated.js";
import { closeCondition, markOpen, markResolved } from "../conditions.js";
import type { ConditionRecord, NodeRecord } from "../records.js";
import type { Store, StoreReads, UnitOfWork } from "../store/store.js";
import { closeTaskOf, resolveTask } from "../tasks.js";
import { decideEnrolment, MAX_UNDECIDED } from "./decide.js";
import type { EnrolmentInput, EnrolmentRecord, IssuedCredential } from "./records.js";

/** What every operation here works with; `now` is an ISO time. */
export interface EnrolmentContext {
  store: Store;
  now: string;
  newId: () => string;
}

/** What the hub answers a host; `admit` names the credential to issue with an `admitted` answer. */
export interface EnrolmentAnswer {
  status: "queued" | "duplicate" | "refused" | "admitted";
  message: string;
  /** The task a person answers, while the request waits or conflicts. */
  task?: string;
  admit?: { node: string; nkey: string };
}

/** A key shortened for a message: enough to tell keys apart. */
export function shortKey(key: string): string {
  return key.length > 16 ? `${key.slice(0, 12)}…` : key;
}

/** The node as the tracked branch declares it now (undefined when it is not declared). */
async function declaredNode(store: StoreReads, name: string): Promise<NodeRecord | undefined> {
  const node = await store.nodes.get(name);
  return node && !node.removedAt ? node : undefined;
}

function declaredKey(node: NodeRecord | undefined): string | undefined {
  return node?.spec.spec.identity?.nkey;
}

function describeHost(request: Pick<EnrolmentRecord, "facts" | "labels" | "nkey">): string {
  const labels = Object.entries(request.labels)
    .map(([key, value]) => `${key}=${value}`)
    .join(",");
  return `hostname ${request.facts.hostname}, ${request.facts.os} (${request.facts.arch}), agent ${request.facts.agentVersion}${labels ? `, labels ${labels}` : ""}, key ${shortKey(request.nkey)}`;
}

async function taskOf(
  store: StoreReads,
  condition: ConditionRecord | undefined,
): Promise<string | undefined> {
  return condition ? (await store.tasks.ofCondition(condition.id))?.id : undefined;
}

/**
 * Answers one request and records it: queued (a task for a person), duplicate (it waits already),
 * refused (denied, a conflict, not a NATS node, too many waiting) or admitted (with the credential
 * to issue). Runs in one transaction with the conditions it raises.
 */
export function receiveEnrolment(ctx: EnrolmentContext, request: EnrolmentInput): Promise<EnrolmentAnswer> {
  const { now } = ctx;
  return ctx.store.transaction(async (store): Promise<EnrolmentAnswer> => {
    const enrolments = store.enrolments;
    const node = await declaredNode(store, request.node);
    const requests = await enrolments.requestsOf(request.node);
    const verdict = decideEnrolment(
      request,
      {
        ...(node
          ? {
              declared: {
                transport: node.transport,
                ...(declaredKey(node) ? { nkey: declaredKey(node)! } : {}),
              },
            }
          : {}),
        requests,
        undecided: await enrolments.countUndecided(),
      },
      MAX_UNDECIDED,
    );
    const own = requests.find((r) => r.nkey === request.identity.nkey);
    const record: EnrolmentRecord = {
      ...(own ?? {
        node: request.node,
        nkey: request.identity.nkey,
        requestedAt: now,
        status: "queued" as const,
      }),
      age: request.identity.age,
      labels: request.labels,
      facts: request.facts,
      lastAskedAt: now,
    };
    switch (verdict.kind) {
      case "admit": {
        if (own && own.status !== "admitted") {
          await enrolments.saveRequest({ ...record, status: "admitted" });
          await resolveRequestConditions(
            store,
            now,
            record,
            `node "${request.node}" is declared with this host's key: admitted`,
          );
        }
        return {
          status: "admitted",
          message: `node "${request.node}" is declared with this host's key: here are its credentials`,
          admit: { node: request.node, nkey: request.identity.nkey },
        };
      }
      case "refuse":
        if (own) await enrolments.saveRequest(record);
        return { status: "refused", message: verdict.message };
      case "duplicate": {
        await enrolments.saveRequest(record);
        const condition = record.conditionId ? await store.conditions.get(record.conditionId) : undefined;
        const task = await taskOf(store, condition);
        const proposal = verdict.record.proposal;
        return {
          status: "duplicate",
          message:
            verdict.record.status === "approved" && proposal
              ? `approved by ${verdict.record.decidedBy}: waiting for commit ${proposal.commit.slice(0, 12)} (${proposal.path} on ${proposal.branch}) to reach the tracked branch`
              : `still queued: a person decides${task ? ` (task ${task})` : ""}`,
          ...(task ? { task } : {}),
        };
      }
      case "conflict": {
        const why =
          verdict.reason === "NameDeclaredWithAnotherKey"
            ? `the fleet declares node "${request.node}" with another key (${shortKey(verdict.otherKey)})`
            : `another host already asks to join as "${request.node}" with another key (${shortKey(verdict.otherKey)})`;
        const { condition } = await markOpen(
          store,
          {
            type: "IdentityConflict",
            subjectKind: "node",
            subject: request.node,
            node: request.node,
            reason: verdict.reason,
            message: `a host asks to join as "${request.node}" (${describeHost(record)}), but ${why}: a host impersonating "${request.node}", or "${request.node}" re-installed — a person decides`,
            evidence: {
              requested: { nkey: record.nkey, age: record.age },
              otherKey: verdict.otherKey,
              facts: record.facts,
              labels: record.labels,
            },
            procedure: `If "${request.node}" was re-installed, admit its new key: \`steward enrolments approve ${request.node} --key ${record.nkey}\` (writes it into the Node document; merge the commit). If not, refuse it: \`steward enrolments deny ${request.node} --key ${record.nkey} --reason TEXT\`.`,
            resolver: "operator",
          },
          now,
          ctx.newId,
        );
        await enrolments.saveRequest({ ...record, status: "conflict", conditionId: condition.id });
        const task = await taskOf(store, condition);
        return {
          status: "refused",
          message: `${why}: refused — a person decides${task ? ` (task ${task})` : ""} whether this host may take the name`,
          ...(task ? { task } : {}),
        };
      }
      case "queue": {
        const { condition } = await markOpen(
          store,
          {
            type: "EnrolmentRequested",
            subjectKind: "node",
            subject: request.node,
            node: request.node,
            reason: "AwaitingApproval",
            message: `a host asks to join as "${request.node}": ${describeHost(record)}`,
            evidence: {
              identity: { nkey: record.nkey, age: record.age },
              labels: record.labels,
              facts: record.facts,
              requestedAt: record.requestedAt,
            },
            procedure: `Approve: \`steward enrolments approve ${request.node} --roots DIR[,DIR...]\` writes nodes/${request.node}.yaml as a commit on the branch steward/enrol-${request.node} (merge it; --commit writes it on the tracked branch). Refuse: \`steward enrolments deny ${request.node} --reason TEXT\`.`,
            resolver: "operator",
          },
          now,
          ctx.newId,
        );
        await enrolments.saveRequest({ ...record, status: "queued", conditionId: condition.id });
        const task = await taskOf(store, condition);
        return {
          status: "queued",
          message: `queued: a person decides${task ? ` (task ${task})` : ""}`,
          ...(task ? { task } : {}),
        };
      }
    }
  });
}

/** Resolves the conditions a request raised, by observation. */
async function resolveRequestConditions(
  store: UnitOfWork,
  now: string,
  record: EnrolmentRecord,
  resolution: string,
): Promise<void> {
  for (const type of ["EnrolmentRequested", "IdentityConflict"] as const) {
    const open = await store.conditions.findOpen(type, "node", record.node);
    if (open && requestKeyOf(open) === record.nkey)
      await markResolved(store, type, "node", record.node, now, resolution);
  }
}

/** The key the request behind an enrolment condition asked with. */
function requestKeyOf(condition: ConditionRecord): string | undefined {
  const evidence = condition.evidence as { identity?: { nkey?: string }; requested?: { nkey?: string } };
  return condition.type === "EnrolmentRequested" ? evidence.identity?.nkey : evidence.requested?.nkey;
}

/** A request that cannot be decided as asked: none for that name, or several and no `--key`. */
export class EnrolmentChoiceError extends StewardError {
  override readonly name = "EnrolmentChoiceError";
  constructor(message: string, data: Record<string, unknown>) {
    super("E_ENROLMENT_CHOICE", message, { data });
  }
}

/**
 * The request a person decides about: the one for `node` (with `nkey`, when given) that is still
 * undecided — or, with `nkey`, whatever its status. Throws NotFoundError or EnrolmentChoiceError.
 */
export async function requestToDecide(
  store: StoreReads,
  node: string,
  nkey?: string,
): Promise<EnrolmentRecord> {
  const all = await store.enrolments.requestsOf(node);
  if (all.length === 0)
    throw new NotFoundError(
      `no host asked to join as "${node}": run \`steward enrolments\` to list the requests`,
      {
        node,
      },
    );
  if (nkey !== undefined) {
    const chosen = all.find((r) => r.nkey === nkey || r.nkey.startsWith(nkey));
    if (!chosen)
      throw new NotFoundError(
        `no request to join as "${node}" with key ${nkey}: its requests have ${all.map((r) => shortKey(r.nkey)).join(", ")}`,
        { node, nkey },
      );
    return chosen;
  }
  const open = all.filter((r) => r.status === "queued" || r.status === "conflict");
  if (open.length === 1) return open[0]!;
  if (open.length === 0)
    throw new EnrolmentChoiceError(
      `the requests to join as "${node}" are decided already (${all.map((r) => `${shortKey(r.nkey)} ${r.status}`).join(", ")}): pass --key KEY to decide one again`,
      { node },
    );
  throw new EnrolmentChoiceError(
    `${open.length} hosts ask to join as "${node}" (keys ${open.map((r) => shortKey(r.nkey)).join(", ")}): pass --key KEY to say which one`,
    { node, keys: open.map((r) => r.nkey) },
  );
}

/** The Node document an approval writes for `record`: a NATS node with its identity, labels and roots. */
export function enrolledNode(record: EnrolmentRecord, roots: readonly string[]): Node {
  return {
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: {
      name: record.node,
      ...(Object.keys(record.labels).length > 0 ? { labels: { ...record.labels } } : {}),
    },
    spec: {
      transport: "nats",
      roots: [...roots],
      identity: { nkey: record.nkey, age: record.age },
    },
  };
}

/**
 * Records that `by` approved `record` by writing its Node document (`proposal`): the request is
 * approved and its task resolved with that action; its condition stays open until the tracked
 * branch declares the node (`reviewEnrolments`).
 */
export function recordApproval(
  ctx: EnrolmentContext,
  record: EnrolmentRecord,
  decision: { by: string; proposal: NonNullable<EnrolmentRecord["proposal"]> },
): Promise<EnrolmentRecord> {
  const { now } = ctx;
  return ctx.store.transaction(async (store) => {
    const approved: EnrolmentRecord = {
      ...record,
      status: "approved",
      decidedBy: decision.by,
      decidedAt: now,
      decision: `approved: ${decision.proposal.path} in commit ${decision.proposal.commit.slice(0, 12)} on ${decision.proposal.branch}`,
      proposal: decision.proposal,
    };
    await store.enrolments.saveRequest(approved);
    await answerTask(store, now, record, decision.by, approved.decision!);
    return approved;
  });
}

/**
 * Records that `by` refused `record`: from now on the host is refused, its task is resolved with
 * the refusal and its condition closed (nothing a host does later could show the decision).
 */
export function denyEnrolment(
  ctx: EnrolmentContext,
  record: EnrolmentRecord,
  decision: { by: string; reason: string },
): Promise<EnrolmentRecord> {
  const { now } = ctx;
  return ctx.store.transaction(async (store) => {
    const denied: EnrolmentRecord = {
      ...record,
      status: "denied",
      decidedBy: decision.by,
      decidedAt: now,
      decision: decision.reason,
    };
    delete denied.proposal;
    await store.enrolments.saveRequest(denied);
    const action = `denied${decision.reason ? `: ${decision.reason}` : ""}`;
    const condition = await answerTask(store, now, record, decision.by, action);
    if (condition?.status === "open") {
      const closed = await closeCondition(
        store,
        condition,
        now,
        `request of key ${shortKey(record.nkey)} ${action} (by ${decision.by})`,
        "operator",
      );
      // A task someone else had claimed is closed with it: nothing is left to do about it.
      await closeTaskOf(store, closed, now);
    }
    return denied;
  });
}

/** Resolves the task of the request's condition with `action` (when it is still open); returns the condition. */
async function answerTask(
  store: UnitOfWork,
  now: string,
  record: EnrolmentRecord,
  by: string,
  action: string,
): Promise<ConditionRecord | undefined> {
  const condition = record.conditionId ? await store.conditions.get(record.conditionId) : undefined;
  if (!condition) return undefined;
  const task = await store.tasks.ofCondition(condition.id);
  if (task && (task.status === "open" || (task.status === "claimed" && task.claimedBy === by)))
    return (await resolveTask(store, task.id, by, action, now)).condition;
  return store.conditions.get(condition.id);
}

/**
 * Looks again at the requests of `nodes` (whose declarations changed; every node with a request
 * when absent): a request whose key the tracked branch now declares is admitted and its conditions
 * resolve; a conflict whose premise is gone (the name no longer declared nor asked for with another
 * key) resolves, and the host's next ask is decided afresh.
 */
export function reviewEnrolments(ctx: EnrolmentContext, nodes?: readonly string[]): Promise<void> {
  const { now } = ctx;
  return ctx.store.transaction(async (store) => {
    const names = nodes ?? [...new Set((await store.enrolments.requests()).map((r) => r.node))];
    for (const name of names) {
      const requests = await store.enrolments.requestsOf(name);
      if (requests.length === 0) continue;
      const node = await declaredNode(store, name);
      const key = declaredKey(node);
      for (const record of requests) {
        if (key === record.nkey && record.status !== "admitted" && record.status !== "denied") {
          await store.enrolments.saveRequest({ ...record, status: "admitted" });
          await resolveRequestConditions(
            store,
            now,
            record,
            `node "${name}" is declared with this host's key (revision ${node?.revision?.slice(0, 12) ?? "?"}): admitted`,
          );
        }
      }
      const conflict = await store.conditions.findOpen("IdentityConflict", "node", name);
      if (
        !conflict ||
        (conflict.reason !== "NameDeclaredWithAnotherKey" &&
          conflict.reason !== "NameRequestedWithAnotherKey")
      )
        continue;
      const requested = requestKeyOf(conflict);
      const rival = requests.some(
        (r) => r.nkey !== requested && (r.status === "queued" || r.status === "approved"),
      );
      if ((key === undefined || key === requested) && !rival)
        await markResolved(
          store,
          "IdentityConflict",
          "node",
          name,
          now,
          key === requested
            ? `node "${name}" is declared with the key that asked: admitted`
            : `node "${name}" is no longer declared nor asked for with another key: the host's next request is decided afresh`,
        );
    }
  });
}

/** Records the credential about to be issued (before it is sent, so a revocation always covers it). */
export async function recordIssued(
  ctx: EnrolmentContext,
  node: string,
  nkey: string,
): Promise<IssuedCredential> {
  const credential = { node, nkey, issuedAt: ctx.now };
  await ctx.store.transaction((tx) => tx.enrolments.recordIssued(credential));
  return credential;
}

/**
 * What the account must revoke now: every key the hub issued credentials for that no NATS node the
 * tracked branch declares holds (a node removed from Git, given another key, moved off NATS), as of
 * `atSeconds`; and the keys admitted now, which must not stay revoked.
 */
export async function credentialRevocations(
  store: StoreReads,
  atSeconds: number,
): Promise<{ revoke: Map<string, number>; admitted: Set<string> }> {
  const admitted = new Set<string>();
  for (const node of await store.nodes.list()) {
    const key = declaredKey(node);
    if (!node.removedAt && node.transport === "nats" && key) admitted.add(key);
  }
  const revoke = new Map<string, number>();
  for (const credential of await store.enrolments.issued())
    if (!admitted.has(credential.nkey)) revoke.set(credential.nkey, atSeconds);
  return { revoke, admitted };
}
