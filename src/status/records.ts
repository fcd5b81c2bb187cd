/**
 * The hub's record of commit statuses (table `commit_statuses`, migration 301): per destination,
 * commit and context, what should be shown and what the destination last acknowledged. The
 * publisher posts only where the two differ; `steward status --revision SHA` reads it back.
 */

import type { CommitState, CommitStatus } from "../hub/status.js";
import type { Db } from "../hub/store/database.js";

/** One row: the desired status of a context on a commit at one destination, and what it last got. */
export interface StatusRecord {
  provider: string;
  desired: CommitStatus;
  posted?: CommitStatus;
  postedAt?: string;
  /** Failed writes of the desired status since it was set. */
  failures: number;
  lastError?: string;
}

interface Row {
  provider: string;
  sha: string;
  context: string;
  state: CommitState;
  description: string;
  target_url: string | null;
  posted_state: CommitState | null;
  posted_description: string | null;
  posted_target_url: string | null;
  posted_at: string | null;
  failures: number;
  last_error: string | null;
}

function status(sha: string, context: string, state: CommitState, description: string, url: string | null) {
  const result: CommitStatus = { sha, context, state, description };
  if (url) result.targetUrl = url;
  return result;
}

function toRecord(row: Row): StatusRecord {
  const record: StatusRecord = {
    provider: row.provider,
    desired: status(row.sha, row.context, row.state, row.description, row.target_url),
    failures: row.failures,
  };
  if (row.posted_state !== null) {
    record.posted = status(
      row.sha,
      row.context,
      row.posted_state,
      row.posted_description ?? "",
      row.posted_target_url,
    );
  }
  if (row.posted_at) record.postedAt = row.posted_at;
  if (row.last_error) record.lastError = row.last_error;
  return record;
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

const UNPOSTED = `(posted_state IS NULL OR posted_state != state OR posted_description != description
  OR IFNULL(posted_target_url, '') != IFNULL(target_url, ''))`;

/** Reads and writes `commit_statuses`. Every method is one statement or one transaction. */
export class StatusRecords {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /** The row of one context on one commit at one destination. */
  get(provider: string, sha: string, context: string): StatusRecord | undefined {
    const row = this.#db
      .prepare("SELECT * FROM commit_statuses WHERE provider = ? AND sha = ? AND context = ?")
      .get(provider, sha, context) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  /**
   * Records `wanted` as what each status should show at `provider` and returns those the
   * destination does not show yet (statuses equal to the posted ones are dropped).
   */
  desire(provider: string, wanted: readonly CommitStatus[], at: Date): CommitStatus[] {
    const upsert = this.#db.prepare(`
      INSERT INTO commit_statuses (provider, sha, context, state, description, target_url, desired_at)
      VALUES (@provider, @sha, @context, @state, @description, @targetUrl, @at)
      ON CONFLICT (provider, sha, context) DO UPDATE SET
        failures = CASE WHEN state = excluded.state AND description = excluded.description
          AND IFNULL(target_url, '') = IFNULL(excluded.target_url, '') THEN failures ELSE 0 END,
        state = excluded.state, description = excluded.description,
        target_url = excluded.target_url, desired_at = excluded.desired_at`);
    return this.#db.transaction(() =>
      wanted.filter((s) => {
        const before = this.get(provider, s.sha, s.context);
        if (!sameStatus(before?.desired, s))
          upsert.run({ provider, ...s, targetUrl: s.targetUrl ?? null, at: at.toISOString() });
        return !sameStatus(before?.posted, s);
      }),
    )();
  }

  /** The destination acknowledged these statuses. */
  posted(provider: string, statuses: readonly CommitStatus[], at: Date): void {
    const update = this.#db.prepare(`
      UPDATE commit_statuses SET posted_state = @state, posted_description = @description,
        posted_target_url = @targetUrl, posted_at = @at,
        failures = CASE WHEN state = @state AND description = @description
          AND IFNULL(target_url, '') = IFNULL(@targetUrl, '') THEN 0 ELSE failures END,
        last_error = CASE WHEN state = @state AND description = @description
          AND IFNULL(target_url, '') = IFNULL(@targetUrl, '') THEN NULL ELSE last_error END
      WHERE provider = @provider AND sha = @sha AND context = @context`);
    this.#db.transaction(() => {
      for (const s of statuses)
        update.run({ provider, ...s, targetUrl: s.targetUrl ?? null, at: at.toISOString() });
    })();
  }

  /** A write of `status` failed with `error` (already free of secrets). */
  failed(provider: string, status: CommitStatus, error: string): void {
    this.#db
      .prepare(
        "UPDATE commit_statuses SET failures = failures + 1, last_error = ? WHERE provider = ? AND sha = ? AND context = ?",
      )
      .run(error, provider, status.sha, status.context);
  }

  /** Statuses `provider` should show and does not yet: the work left over from before a restart. */
  unposted(provider: string): CommitStatus[] {
    const rows = this.#db
      .prepare(
        `SELECT * FROM commit_statuses WHERE provider = ? AND ${UNPOSTED} ORDER BY desired_at, sha, context`,
      )
      .all(provider) as Row[];
    return rows.map((row) => toRecord(row).desired);
  }

  /** Every row of a commit, for `steward status --revision SHA`. */
  forRevision(sha: string): StatusRecord[] {
    const rows = this.#db
      .prepare(
        "SELECT * FROM commit_statuses WHERE sha = ? ORDER BY context = 'steward/fleet' DESC, context, provider",
      )
      .all(sha) as Row[];
    return rows.map(toRecord);
  }
}
