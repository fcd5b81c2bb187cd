/**
 * What the hub keeps of hosts asking to join and of the credentials it issued, and the narrow port
 * that owns those tables (the store's `enrolments` port). A request is one host's ask for
 * one name with one key; the credentials issued are what a revocation must cover once Git no longer
 * admits the key.
 */

/** What a host says of itself when it asks to join (never a secret). */
export interface HostFacts {
  hostname: string;
  /** The operating system as the host names it, e.g. `Debian GNU/Linux 12 (bookworm)` or `Linux 6.1.0`. */
  os: string;
  /** `x64`, `arm64`, ... (Node.js's names). */
  arch: string;
  /** The version of the steward agent that asks. */
  agentVersion: string;
}

/** A host's public identity, as `spec.identity` of a Node document holds it. */
export interface PublicIdentity {
  nkey: string;
  age: string;
}

/** A request to join as `node` with `identity`, as the hub received it (its signature checked). */
export interface EnrolmentInput {
  node: string;
  identity: PublicIdentity;
  labels: Record<string, string>;
  facts: HostFacts;
}

/**
 * queued: a person is to decide (an `EnrolmentRequested` task). conflict: the name is declared or
 * asked for with another key (an `IdentityConflict` condition). approved: a person wrote its Node
 * document (a commit to merge, or on the tracked branch); admitted once the tracked branch declares
 * it. denied: a person refused it; the host is refused from then on.
 */
export type EnrolmentStatus = "queued" | "conflict" | "approved" | "denied" | "admitted";

/** One host's request to join as `node` with `nkey`, and what became of it. */
export interface EnrolmentRecord {
  node: string;
  nkey: string;
  age: string;
  labels: Record<string, string>;
  facts: HostFacts;
  status: EnrolmentStatus;
  requestedAt: string;
  /** The host's last ask (it asks again while it waits). */
  lastAskedAt: string;
  /** The condition the request raised (EnrolmentRequested or IdentityConflict). */
  conditionId?: string;
  decidedBy?: string;
  decidedAt?: string;
  /** What the decision was, in the decider's words (the commit written, the reason for a denial). */
  decision?: string;
  /** Where an approval wrote the Node document. */
  proposal?: { path: string; branch: string; commit: string };
}

/** A user JWT the hub issued: its key must be revoked once Git no longer admits it for that node. */
export interface IssuedCredential {
  nkey: string;
  node: string;
  issuedAt: string;
}
