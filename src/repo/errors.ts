/**
 * Errors of the git side: fetching, reading and writing the fleet repository. Each has a stable
 * `code`; `transient` says whether retrying later can help (the sync loop retries either way, with
 * backoff, and keeps serving the last good revision meanwhile).
 */
import { StewardError } from "../model/errors.js";

/** Base of every git-side error. */
export class RepoError extends StewardError {
  override readonly name: string = "RepoError";
  /** True when the same call may succeed later without anyone changing anything. */
  readonly transient: boolean;

  constructor(
    code: string,
    message: string,
    options: { transient?: boolean; data?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(code, message, options);
    this.transient = options.transient ?? false;
  }
}

/** The remote did not answer (DNS, refused connection, timeout, 5xx). */
export class RemoteUnreachableError extends RepoError {
  override readonly name = "RemoteUnreachableError";
  constructor(remote: string, reason: string, cause?: unknown) {
    super("E_REMOTE_UNREACHABLE", `cannot reach ${remote}: ${reason}; keeping the last good revision`, {
      transient: true,
      data: { remote },
      cause,
    });
  }
}

/** The remote refused the credentials (or asked for some and none were given). */
export class RemoteAuthError extends RepoError {
  override readonly name = "RemoteAuthError";
  constructor(remote: string, hadCredentials: boolean, cause?: unknown) {
    super(
      "E_REMOTE_AUTH",
      hadCredentials
        ? `${remote} refused the credentials from the environment: check STEWARD_GIT_TOKEN (or STEWARD_GIT_USERNAME/STEWARD_GIT_PASSWORD)`
        : `${remote} requires authentication: set STEWARD_GIT_TOKEN (or STEWARD_GIT_USERNAME and STEWARD_GIT_PASSWORD) in the environment`,
      { data: { remote }, cause },
    );
  }
}

/** An object the repository should have is missing or unreadable: a corrupt or partial cache. */
export class GitObjectMissingError extends RepoError {
  override readonly name = "GitObjectMissingError";
  constructor(oid: string, where: string, detail?: string) {
    super("E_GIT_OBJECT", `git object ${oid} in ${where}: ${detail ?? "missing"}`, {
      data: { oid, where },
    });
  }
}

/** The fleet source is given wrongly: a URL with credentials in it, a path that is no git repository. */
export class SourceError extends RepoError {
  override readonly name = "SourceError";
  constructor(message: string, data?: Record<string, unknown>) {
    super("E_SOURCE", message, data ? { data } : {});
  }
}

/** A commit-ish that names no commit of the repository. */
export class RevisionNotFoundError extends RepoError {
  override readonly name = "RevisionNotFoundError";
  constructor(revision: string, where: string) {
    super(
      "E_REVISION_NOT_FOUND",
      `"${revision}" names no commit in ${where}: give a branch, tag, commit id or REV~N`,
      { data: { revision, where } },
    );
  }
}

/** `steward rollback` refuses: uncommitted changes, the branch moved, or the revert conflicts. */
export class RollbackRefusedError extends RepoError {
  override readonly name = "RollbackRefusedError";
  constructor(
    reason: "dirty" | "moved" | "conflict" | "nothing" | "author" | "unpushed",
    message: string,
    data?: Record<string, unknown>,
  ) {
    super(`E_ROLLBACK_${reason.toUpperCase()}`, message, { data: { reason, ...data } });
  }
}

/**
 * `steward enrolments approve` cannot write the Node document: the repository or branch is not
 * as it must be (uncommitted changes, the branch moved, the proposal branch exists), or the fleet
 * with the document would be invalid.
 */
export class EnrolmentProposalError extends RepoError {
  override readonly name = "EnrolmentProposalError";
  constructor(
    reason: "dirty" | "moved" | "exists" | "invalid" | "author" | "unpushed" | "declared",
    message: string,
    data?: Record<string, unknown>,
  ) {
    super(`E_ENROLMENT_${reason.toUpperCase()}`, message, { data: { reason, ...data } });
  }
}
