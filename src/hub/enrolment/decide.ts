/**
 * What the hub answers a host that asks to join as a node, decided from what Git declares and what
 * the hub has recorded — one pure function, in this order:
 *
 *   1. the tracked branch declares the node with this key: admitted (a NATS node gets its user JWT;
 *      a node on another transport is refused: it never connects to the bus);
 *   2. a person denied this key for this name: refused; one approved it and the commit is not on the
 *      tracked branch yet: duplicate (it waits for the merge);
 *   3. the tracked branch declares the node with another key: a conflict (refused, and a person
 *      decides: a host impersonating another, or a re-installed one);
 *   4. another host waits with another key for the same name: a conflict too;
 *   5. this host asked already and waits for a person: duplicate;
 *   6. too many requests wait for a person: refused (the shared credential is not a way to flood
 *      the task queue);
 *   7. otherwise: queued, as a task for a person.
 */
import type { EnrolmentInput, EnrolmentRecord } from "./records.js";

/** What the hub knows when it decides. */
export interface EnrolmentFacts {
  /** The node as the tracked branch declares it now; absent when it is not declared. */
  declared?: { transport: string; nkey?: string };
  /** Every request recorded for this node name. */
  requests: readonly EnrolmentRecord[];
  /** Requests a person still has to decide, across the fleet. */
  undecided: number;
}

/** Undecided requests past which new ones are refused. */
export const MAX_UNDECIDED = 100;

/** The decision: admit, refuse (why), a conflict (with which key), a duplicate (of which request), or queue. */
export type EnrolmentVerdict =
  | { kind: "admit" }
  | { kind: "refuse"; reason: "Denied" | "NotNats" | "TooManyWaiting"; message: string }
  | {
      kind: "conflict";
      reason: "NameDeclaredWithAnotherKey" | "NameRequestedWithAnotherKey";
      /** The key the node is declared with, or the other request waits with. */
      otherKey: string;
    }
  | { kind: "duplicate"; record: EnrolmentRecord }
  | { kind: "queue" };

/** Decides the answer to `request` (see the order above). */
export function decideEnrolment(
  request: EnrolmentInput,
  facts: EnrolmentFacts,
  maxUndecided = MAX_UNDECIDED,
): EnrolmentVerdict {
  const key = request.identity.nkey;
  const declared = facts.declared;
  if (declared?.nkey === key) {
    if (declared.transport !== "nats")
      return {
        kind: "refuse",
        reason: "NotNats",
        message: `node "${request.node}" is declared with this host's key but reached over ${declared.transport}, not NATS: set spec.transport to nats in its Node document to run this agent on the bus`,
      };
    return { kind: "admit" };
  }
  const own = facts.requests.find((r) => r.nkey === key);
  if (own?.status === "denied")
    return {
      kind: "refuse",
      reason: "Denied",
      message: `${own.decidedBy ?? "a person"} denied this host joining as "${request.node}"${own.decision ? `: ${own.decision}` : ""}`,
    };
  if (own?.status === "approved") return { kind: "duplicate", record: own };
  if (declared?.nkey !== undefined)
    return { kind: "conflict", reason: "NameDeclaredWithAnotherKey", otherKey: declared.nkey };
  const rival = facts.requests.find(
    (r) => r.nkey !== key && (r.status === "queued" || r.status === "approved"),
  );
  if (rival) return { kind: "conflict", reason: "NameRequestedWithAnotherKey", otherKey: rival.nkey };
  if (own?.status === "queued") return { kind: "duplicate", record: own };
  if (facts.undecided >= maxUndecided)
    return {
      kind: "refuse",
      reason: "TooManyWaiting",
      message: `${facts.undecided} requests to join already wait for a person: ask again once they are decided (\`steward enrolments\`)`,
    };
  return { kind: "queue" };
}
