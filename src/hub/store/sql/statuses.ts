/**
 * The commit statuses port on SQL (table `commit_statuses`, migration 301): per destination, commit
 * and context, what should be shown and what the destination last acknowledged. The publisher posts
 * only where the two differ; `steward status --revision SHA` reads it back.
 */
import { type CommitState, type CommitStatus, sameStatus } from "../../status.js";
import type { Statuses, StatusRecord } from "../store.js";
import type { Row, Sql } from "./sql.js";

function status(sha: string, context: string, state: CommitState, description: string, url: unknown) {
  const result: CommitStatus = { sha, context, state, description };
  if (url) result.targetUrl = url as string;
  return result;
}

function toRecord(row: Row): StatusRecord {
  const sha = row.sha as string;
  const context = row.context as string;
  const record: StatusRecord = {
    provider: row.provider as string,
    desired: status(sha, context, row.state as CommitState, row.description as string, row.target_url),
    failures: Number(row.failures),
  };
  if (row.posted_state !== null && row.posted_state !== undefined)
    record.posted = status(
      sha,
      context,
      row.posted_state as CommitState,
      (row.posted_description as string | null) ?? "",
      row.posted_target_url,
    );
  if (row.posted_at) record.postedAt = row.posted_at as string;
  if (row.last_error) record.lastError = row.last_error as string;
  return record;
}

const UNPOSTED = `(posted_state IS NULL OR posted_state != state OR posted_description != description
  OR coalesce(posted_target_url, '') != coalesce(target_url, ''))`;

/** Whether the stored row's desired status is the one being acknowledged: its failures count no more. */
const SAME_AS_DESIRED = "state = ? AND description = ? AND coalesce(target_url, '') = coalesce(?, '')";

export class StatusesSql implements Statuses {
  constructor(private readonly sql: Sql) {}

  async get(provider: string, sha: string, context: string): Promise<StatusRecord | undefined> {
    const row = await this.sql.get(
      "SELECT * FROM commit_statuses WHERE provider = ? AND sha = ? AND context = ?",
      [provider, sha, context],
    );
    return row ? toRecord(row) : undefined;
  }

  async desire(provider: string, wanted: readonly CommitStatus[], at: Date): Promise<CommitStatus[]> {
    const unshown: CommitStatus[] = [];
    for (const s of wanted) {
      const before = await this.get(provider, s.sha, s.context);
      if (!sameStatus(before?.desired, s))
        await this.sql.run(
          `INSERT INTO commit_statuses (provider, sha, context, state, description, target_url, desired_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (provider, sha, context) DO UPDATE SET
             failures = CASE WHEN commit_statuses.state = excluded.state AND commit_statuses.description = excluded.description
               AND coalesce(commit_statuses.target_url, '') = coalesce(excluded.target_url, '')
               THEN commit_statuses.failures ELSE 0 END,
             state = excluded.state, description = excluded.description,
             target_url = excluded.target_url, desired_at = excluded.desired_at`,
          [provider, s.sha, s.context, s.state, s.description, s.targetUrl ?? null, at.toISOString()],
        );
      if (!sameStatus(before?.posted, s)) unshown.push(s);
    }
    return unshown;
  }

  async posted(provider: string, statuses: readonly CommitStatus[], at: Date): Promise<void> {
    for (const s of statuses) {
      const url = s.targetUrl ?? null;
      await this.sql.run(
        `UPDATE commit_statuses SET posted_state = ?, posted_description = ?, posted_target_url = ?, posted_at = ?,
           failures = CASE WHEN ${SAME_AS_DESIRED} THEN 0 ELSE failures END,
           last_error = CASE WHEN ${SAME_AS_DESIRED} THEN NULL ELSE last_error END
         WHERE provider = ? AND sha = ? AND context = ?`,
        [
          s.state,
          s.description,
          url,
          at.toISOString(),
          s.state,
          s.description,
          url,
          s.state,
          s.description,
          url,
          provider,
          s.sha,
          s.context,
        ],
      );
    }
  }

  async failed(provider: string, status: CommitStatus, error: string): Promise<void> {
    await this.sql.run(
      "UPDATE commit_statuses SET failures = failures + 1, last_error = ? WHERE provider = ? AND sha = ? AND context = ?",
      [error, provider, status.sha, status.context],
    );
  }

  async unposted(provider: string): Promise<CommitStatus[]> {
    return (
      await this.sql.all(
        `SELECT * FROM commit_statuses WHERE provider = ? AND ${UNPOSTED} ORDER BY desired_at, sha, context`,
        [provider],
      )
    ).map((row) => toRecord(row).desired);
  }

  async forRevision(sha: string): Promise<StatusRecord[]> {
    return (
      await this.sql.all(
        "SELECT * FROM commit_statuses WHERE sha = ? ORDER BY CASE WHEN context = 'steward/fleet' THEN 0 ELSE 1 END, context, provider",
        [sha],
      )
    ).map(toRecord);
  }
}
