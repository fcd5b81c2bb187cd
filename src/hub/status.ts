/**
 * Commit statuses: how the hub tells a commit whether the fleet converged on it. The hub defines the
 * port (`StatusWriter`, implemented in src/status/ for GitHub, GitLab, Gitea/Forgejo and git notes)
 * and builds the statuses from its own records with the pure functions below; a publisher
 * (src/status/publisher.ts, wired in by the CLI) posts them without ever making reconciliation wait.
 *
 * Contexts: `steward/<assignment>` for each assignment a commit changed, and the aggregate
 * `steward/fleet`. States: `pending` while rolling out, `success` when every instance converged,
 * `failure` naming condition, node and attempt, `error` for an invalid revision (file:line) or a
 * commit superseded before it converged.
 */
import type { Diagnostic } from "../model/diagnostics.js";
import { StewardError } from "../model/errors.js";

export type CommitState = "pending" | "success" | "failure" | "error";

/** One status on one commit, as every forge understands it. */
export interface CommitStatus {
  /** The commit (full hex object id). */
  sha: string;
  /** `steward/<assignment>` or `steward/fleet`. */
  context: string;
  state: CommitState;
  /** One line for people; never a secret (see `redactSecrets`). Writers truncate to their forge's limit. */
  description: string;
  /** The hub's page for the revision, when a public URL is configured. */
  targetUrl?: string;
}

/** True when two statuses would show the same thing. */
export function sameStatus(a: CommitStatus | undefined, b: CommitStatus | undefined): boolean {
  if (!a || !b) return a === b;
  return (
    a.sha === b.sha &&
    a.context === b.context &&
    a.state === b.state &&
    a.description === b.description &&
    (a.targetUrl ?? null) === (b.targetUrl ?? null)
  );
}

/**
 * Writes commit statuses to one place (a forge, or git notes). Implementations throw
 * `StatusWriteError` and never retry on their own: the publisher owns retries, rate limits and
 * coalescing. Neither the token nor any other secret appears in what they throw or log.
 */
export interface StatusWriter {
  /** Stable identity of the destination, e.g. `github:api.github.com/acme/fleet`; also the key of what was posted. */
  readonly name: string;
  /** The longest description the destination accepts, in characters (GitHub: 140). */
  readonly descriptionLimit: number;
  /** Records one status. Resolves once the destination has it (or, with `flush`, once flushed). */
  write(status: CommitStatus): Promise<void>;
  /**
   * Optional: makes the writes since the last flush visible (git notes: pushes the notes ref). The
   * publisher calls it after each batch and counts the batch as posted only when it resolves.
   */
  flush?(): Promise<void>;
}

/** What the hub hands statuses to; `StatusPublisher` implements it. Never blocks, never throws for a forge. */
export interface StatusSink {
  /** The latest desired statuses (any subset, as often as the hub likes). */
  publish(statuses: readonly CommitStatus[]): void;
}

/**
 * A destination started or stopped failing. The hub opens `StatusWriteFailing` (subject: the
 * provider) on `failing: true` and resolves it on `failing: false`.
 */
export type StatusHealth =
  | {
      provider: string;
      failing: true;
      /** Stable CamelCase reason: `ForgeUnavailable`, `Unauthorized`, `NotFound`, `Rejected`, `RateLimited`, ... */
      reason: string;
      message: string;
      /** When the failing began (unchanged while it lasts). */
      since: Date;
    }
  | { provider: string; failing: false; since: Date; recoveredAt: Date };

/**
 * How to handle a failed write. `transient`: the forge is down or erred (5xx, network): keep the
 * state and try again with backoff. `permanent`: the forge refused it (401, 403, 404, 422): it will
 * not work as configured. `rate-limited`: wait `retryAfterMs` before the next write to this forge.
 */
export type StatusFailureClass = "transient" | "permanent" | "rate-limited";

/** A write that did not happen, classified for the publisher. */
export class StatusWriteError extends StewardError {
  override readonly name = "StatusWriteError";
  readonly failureClass: StatusFailureClass;
  /** Stable CamelCase reason, e.g. `RateLimited`, `ForgeUnavailable`, `Unauthorized`. */
  readonly reason: string;
  readonly provider: string;
  readonly httpStatus: number | undefined;
  /** For `rate-limited` (and a 503 with Retry-After): how long to wait before the next write. */
  readonly retryAfterMs: number | undefined;

  constructor(
    message: string,
    details: {
      provider: string;
      failureClass: StatusFailureClass;
      reason: string;
      httpStatus?: number;
      retryAfterMs?: number;
      cause?: unknown;
    },
  ) {
    const { cause, ...data } = details;
    super("E_STATUS_WRITE", message, { data, cause });
    this.failureClass = details.failureClass;
    this.reason = details.reason;
    this.provider = details.provider;
    this.httpStatus = details.httpStatus;
    this.retryAfterMs = details.retryAfterMs;
  }
}

export const FLEET_CONTEXT = "steward/fleet";

/** The context of one assignment's status. */
export function assignmentContext(assignment: string): string {
  return `steward/${assignment}`;
}

/** `<publicUrl>/revisions/<sha>`, or undefined when no public URL is configured. */
export function revisionUrl(publicUrl: string | undefined, sha: string): string | undefined {
  if (!publicUrl) return undefined;
  return `${publicUrl.replace(/\/+$/, "")}/revisions/${sha}`;
}

/** The short form of a commit id used in descriptions. */
export function shortSha(sha: string): string {
  return /^[0-9a-f]{13,}$/i.test(sha) ? sha.slice(0, 12) : sha;
}

const SECRET_PATTERNS: readonly [RegExp, string][] = [
  // PEM private keys, whole or cut off.
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g, "***"],
  // Credentials inside URLs: https://user:pass@host
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@]+@/gi, "$1***@"],
  // Well-known token shapes: GitHub, GitLab, Slack, AWS access keys, JWTs.
  [/\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b/g, "***"],
  [/\bglpat-[A-Za-z0-9_-]{20,}/g, "***"],
  [/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, "***"],
  [/\bAKIA[0-9A-Z]{16}\b/g, "***"],
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, "***"],
  // Authorization headers.
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/g, "$1 ***"],
  // key=value and key: value where the key names a secret.
  [
    /\b((?:[a-z0-9_-]*_)?(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|authorization))(\s*[=:]\s*)((?:Bearer|Basic|token)\s+\S+|"[^"]*"|'[^']*'|[^\s,;]+)/gi,
    "$1$2***",
  ],
];

/**
 * Replaces what looks like a secret (tokens, passwords in URLs or `key=value`, private keys) and
 * every value in `known` with `***`. Statuses are public: anything the hub puts in a description
 * passes through this first.
 */
export function redactSecrets(text: string, known: readonly string[] = []): string {
  let out = text;
  for (const secret of known) if (secret.length >= 4) out = out.split(secret).join("***");
  for (const [pattern, replacement] of SECRET_PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/** One line, no control characters, no secrets: what a description may contain. */
export function cleanDescription(text: string, known: readonly string[] = []): string {
  return (
    redactSecrets(text, known)
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we strip
      .replace(/[\u0000-\u001f\u007f]+/g, " ")
      .replace(/\s+/g, " ")
      .trim()
  );
}

/**
 * Shortens `text` to at most `limit` characters (code points), ending with an ellipsis. Cuts at a
 * word boundary unless that would throw away more than half of the room.
 */
export function truncateDescription(text: string, limit: number): string {
  const chars = Array.from(text);
  if (chars.length <= limit) return text;
  if (limit <= 1) return "…".slice(0, Math.max(0, limit));
  const room = limit - 1;
  let cut = chars.slice(0, room).join("");
  if (!/\s/.test(chars[room] ?? "")) {
    const lastSpace = cut.search(/\s\S*$/);
    if (lastSpace >= 0 && Array.from(cut.slice(0, lastSpace)).length >= room / 2)
      cut = cut.slice(0, lastSpace);
  }
  cut = cut.replace(/[\s.,;:!?(-]+$/u, "");
  return `${cut}…`;
}

/** What a writer sends: cleaned of secrets and control characters, then cut to the forge's limit. */
export function fitDescription(text: string, limit: number, known: readonly string[] = []): string {
  return truncateDescription(cleanDescription(text, known), limit);
}

/** One instance the revision changed, at the generation the revision gave it. */
export interface InstanceProgress {
  assignment: string;
  node: string;
  generation: number;
  /** A report showed this generation, the desired state, every resource right and the probes passing. */
  converged: boolean;
  /** Why the rollout goes on around this instance's node, in words (`drained`, `silent`...), when it does. */
  skipped?: string;
}

/** An operator's pause of one assignment's rollout, as a status names it. */
export interface RolloutPause {
  assignment: string;
  by: string;
  reason: string;
}

/** An open condition that stops an instance of the revision from converging. */
export interface InstanceFailure {
  assignment: string;
  node: string;
  /** Condition type, e.g. `Blocked`, `Stuck`, `ProbeFailing`. */
  condition: string;
  /** The attempt that failed (its ULID is the correlation id), when there was one. */
  attemptId?: string;
  message: string;
  /** The line of the attempt's evidence that names the error (src/hub/evidence.ts), when it has one. */
  errorLine?: string;
}

function withUrl(status: CommitStatus, publicUrl: string | undefined): CommitStatus {
  const targetUrl = revisionUrl(publicUrl, status.sha);
  return targetUrl ? { ...status, targetUrl } : status;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/**
 * What one failure says: condition, node and attempt first, then the line of the evidence that
 * names the error, then the condition's message — so truncation only shortens the message.
 */
function describeFailure(first: InstanceFailure, others: number): string {
  const more = others > 0 ? ` (+${others} more)` : "";
  const attempt = first.attemptId ? `, attempt ${first.attemptId}` : "";
  const why =
    first.errorLine && !first.message.includes(first.errorLine)
      ? `${first.errorLine} (${first.message})`
      : first.message;
  return `${first.condition} on ${first.node}${more}${attempt}: ${cleanDescription(why)}`;
}

/**
 * The status of a set of instances on a commit: `failure` when any has a failing condition (the
 * first by node names it), `success` when all converged, `pending` with progress otherwise
 * ("3/10 nodes at generation 7"; "instances" when the set spans nodes more than once or several
 * generations), naming the nodes the rollout skipped and why, and who paused it. An empty set
 * succeeds: there is nothing to converge.
 */
export function convergenceStatus(input: {
  sha: string;
  context: string;
  instances: readonly InstanceProgress[];
  failures?: readonly InstanceFailure[];
  paused?: readonly RolloutPause[];
  publicUrl?: string;
}): CommitStatus {
  const { sha, context, instances, publicUrl } = input;
  const failures = [...(input.failures ?? [])].sort(
    (a, b) => a.node.localeCompare(b.node) || a.assignment.localeCompare(b.assignment),
  );
  const first = failures[0];
  if (first)
    return withUrl(
      { sha, context, state: "failure", description: describeFailure(first, failures.length - 1) },
      publicUrl,
    );
  const total = instances.length;
  if (total === 0)
    return withUrl({ sha, context, state: "success", description: "nothing to converge" }, publicUrl);
  const converged = instances.filter((i) => i.converged).length;
  const generations = new Set(instances.map((i) => i.generation));
  const nodes = new Set(instances.map((i) => i.node));
  const [generation] = generations;
  const progress =
    generations.size === 1 && nodes.size === total
      ? `${converged}/${plural(total, "node")} at generation ${generation}`
      : `${converged}/${plural(total, "instance")} converged`;
  if (converged === total)
    return withUrl({ sha, context, state: "success", description: `${progress}, probes passing` }, publicUrl);
  const parts = [progress];
  // By node: a node that has several instances of the set is skipped once.
  const skipped = new Map<string, string>();
  for (const i of instances)
    if (!i.converged && i.skipped && !skipped.has(i.node)) skipped.set(i.node, i.skipped);
  if (skipped.size > 0) {
    const named = [...skipped].slice(0, 3).map(([node, why]) => `${node} (${why})`);
    if (skipped.size > 3) named.push(`+${skipped.size - 3} more`);
    parts.push(`skipped ${named.join(", ")}`);
  }
  for (const pause of input.paused ?? [])
    parts.push(`${pause.assignment} paused by ${pause.by}: ${pause.reason}`);
  return withUrl({ sha, context, state: "pending", description: parts.join("; ") }, publicUrl);
}

/**
 * A status of a commit that is no longer the newest synced revision: a final state stays as it is;
 * a pending one ends in `error`, naming the commit that carried the fleet forward and what it had
 * reached — so no commit keeps a `pending` status for ever.
 */
export function carriedForwardStatus(status: CommitStatus, by: string): CommitStatus {
  if (status.state !== "pending") return status;
  return {
    ...status,
    state: "error",
    description: `superseded by ${shortSha(by)} before it converged; was ${status.description}`,
  };
}

/** `error` on `steward/fleet` for a revision that failed validation, naming file:line of the first error. */
export function invalidRevisionStatus(input: {
  sha: string;
  diagnostics: readonly Diagnostic[];
  publicUrl?: string;
}): CommitStatus {
  const errors = input.diagnostics.filter((d) => d.severity === "error");
  const list = errors.length > 0 ? errors : input.diagnostics;
  const first = [...list].sort(
    (a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.column - b.column,
  )[0];
  let description = "invalid revision: nothing was changed";
  if (first) {
    const where = first.line > 0 ? `${first.file}:${first.line}` : first.file;
    const more = list.length > 1 ? ` (+${list.length - 1} more)` : "";
    description = `invalid${more}: ${where}: ${cleanDescription(first.message)}`;
  }
  return withUrl({ sha: input.sha, context: FLEET_CONTEXT, state: "error", description }, input.publicUrl);
}

/**
 * The final status of a commit a newer one superseded. A commit that had reached a final state
 * keeps it (the description adds its successor); one still pending (or never rolled out) ends in
 * `error`, so no status is left pending for ever.
 */
export function supersededStatus(input: {
  sha: string;
  context: string;
  supersededBy: string;
  previous?: CommitStatus;
  publicUrl?: string;
}): CommitStatus {
  const { sha, context, previous } = input;
  const successor = `superseded by ${shortSha(input.supersededBy)}`;
  if (previous && previous.state !== "pending")
    return withUrl(
      { sha, context, state: previous.state, description: `${successor}; was ${previous.description}` },
      input.publicUrl,
    );
  const before = previous ? "before it converged" : "before it rolled out";
  return withUrl({ sha, context, state: "error", description: `${successor} ${before}` }, input.publicUrl);
}

/** A revision as the syncer recorded it (the `revisions` table). */
export interface RevisionRecord {
  sha: string;
  outcome: "applied" | "invalid" | "superseded";
  /** The commit that replaced this one before it converged, if any. */
  supersededBy?: string | null;
  diagnostics?: readonly Diagnostic[] | null;
  /** Assignments whose instances the revision changed. */
  changedAssignments: readonly string[];
  /** A later applied revision, once there is one: this commit's pending contexts end, naming it. */
  carriedForwardBy?: string | null;
}

/**
 * Every status a revision should show now: `steward/fleet` and one per changed assignment. Pass the
 * instances at the generations this revision produced, the open conditions stopping them, and (for
 * a superseded revision) what was last said, so a final state is kept.
 */
export function revisionStatuses(
  revision: RevisionRecord,
  progress: {
    instances: readonly InstanceProgress[];
    failures?: readonly InstanceFailure[];
    /** Rollouts of the revision an operator paused. */
    paused?: readonly RolloutPause[];
    previous?: readonly CommitStatus[];
    publicUrl?: string;
  },
): CommitStatus[] {
  const { sha } = revision;
  const publicUrl = progress.publicUrl;
  if (revision.outcome === "invalid")
    return [invalidRevisionStatus({ sha, diagnostics: revision.diagnostics ?? [], publicUrl })];
  const contexts = [FLEET_CONTEXT, ...[...revision.changedAssignments].sort().map(assignmentContext)];
  const successor =
    revision.supersededBy ?? (revision.outcome === "superseded" ? "a later commit" : undefined);
  if (successor)
    return contexts.map((context) =>
      supersededStatus({
        sha,
        context,
        supersededBy: successor,
        previous: progress.previous?.find((s) => s.sha === sha && s.context === context),
        publicUrl,
      }),
    );
  const changed = new Set(revision.changedAssignments);
  const instances = progress.instances.filter((i) => changed.has(i.assignment));
  const failures = (progress.failures ?? []).filter((f) => changed.has(f.assignment));
  const paused = (progress.paused ?? []).filter((p) => changed.has(p.assignment));
  const statuses = [
    convergenceStatus({ sha, context: FLEET_CONTEXT, instances, failures, paused, publicUrl }),
    ...[...changed].sort().map((assignment) =>
      convergenceStatus({
        sha,
        context: assignmentContext(assignment),
        instances: instances.filter((i) => i.assignment === assignment),
        failures: failures.filter((f) => f.assignment === assignment),
        paused: paused.filter((p) => p.assignment === assignment),
        publicUrl,
      }),
    ),
  ];
  const carrier = revision.carriedForwardBy;
  return carrier ? statuses.map((status) => carriedForwardStatus(status, carrier)) : statuses;
}
