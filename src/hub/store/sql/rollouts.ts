/**
 * The rollouts port on SQL: what a rollout's gate counts (from `instances`, `intents`, `nodes` and
 * the open conditions, each count one index range) and the operators' decisions, which this port
 * alone writes (`rollout_decisions`, `rollout_accepted_failures`).
 */
import type {
  HoldReason,
  IntentRecord,
  IntentStatus,
  RolloutDecisionRecord,
  SkipReason,
} from "../../records.js";
import type { Rollouts } from "../store.js";
import { INTENTS } from "./intents.js";
import { SKIP_REASON, SKIPPED_NODES } from "./nodes.js";
import { type ReadAhead, rolloutOf } from "./read-ahead.js";
import { defined, marks, nul, type Row, type Sql } from "./sql.js";

/** Intent statuses that hold one of a rollout's in-flight slots. */
const IN_FLIGHT = "'dispatched', 'verifying', 'ambiguous', 'backoff'";

/** The hold reasons that are the rollout's (a freed slot or a resume may release them). */
const ROLLOUT_HOLD_REASONS: readonly HoldReason[] = ["canary", "batch", "paused", "paused-by-operator"];
const ROLLOUT_HOLDS = ROLLOUT_HOLD_REASONS.map((reason) => `'${reason}'`).join(", ");

/** Failures not on a skipped node, nor accepted by a resume. */
const COUNTED_FAILURES = `FROM intents i LEFT JOIN nodes n ON n.name = i.node
  WHERE i.assignment = ? AND i.revision = ? AND i.status IN ('blocked', 'stuck') AND ${SKIP_REASON} IS NULL
    AND NOT EXISTS (SELECT 1 FROM rollout_accepted_failures a
                     WHERE a.assignment = i.assignment AND a.revision = i.revision AND a.instance_key = i.instance_key)`;

function decisionFrom(row: Row): RolloutDecisionRecord {
  return defined(
    {
      seq: Number(row.seq),
      assignment: row.assignment as string,
      revision: row.revision as string,
      decision: row.decision as RolloutDecisionRecord["decision"],
      by: row.decided_by as string,
      reason: row.reason as string,
      at: row.decided_at as string,
      accepted: JSON.parse(row.accepted as string) as string[],
    },
    { taskId: row.task_id },
  ) as RolloutDecisionRecord;
}

const count = (row: Row | undefined) => Number(row?.n ?? 0);

export class RolloutsSql implements Rollouts {
  constructor(
    private readonly sql: Sql,
    /** In a unit of work: what it found (read-ahead.ts). */
    private readonly ahead?: ReadAhead,
  ) {}

  async nodes(assignment: string, revision: string, limit?: number): Promise<string[]> {
    const text =
      "SELECT node FROM instances WHERE revision = ? AND assignment = ? AND retired_at IS NULL ORDER BY node";
    const rows =
      limit === undefined
        ? await this.sql.all(text, [revision, assignment])
        : await this.sql.all(`${text} LIMIT ?`, [revision, assignment, limit]);
    return rows.map((r) => r.node as string);
  }

  async size(assignment: string, revision: string): Promise<number> {
    return count(
      await this.sql.get(
        "SELECT count(*) AS n FROM instances WHERE revision = ? AND assignment = ? AND retired_at IS NULL",
        [revision, assignment],
      ),
    );
  }

  async countInFlight(assignment: string, revision: string): Promise<number> {
    // Every in-flight row is counted (index only), then those on skipped nodes are taken away, found
    // from the few skipped nodes: a gate with a large maxInFlight must not look up each row's node.
    const all = count(
      await this.sql.get(
        `SELECT count(*) AS n FROM intents WHERE assignment = ? AND revision = ? AND status IN (${IN_FLIGHT})`,
        [assignment, revision],
      ),
    );
    if (all === 0) return 0;
    // CROSS JOIN keeps the skipped nodes the outer loop: one key lookup each.
    const skipped = count(
      await this.sql.get(
        `SELECT count(*) AS n FROM (${SKIPPED_NODES}) s CROSS JOIN intents i
          WHERE i.instance_key = ? || '@' || s.node AND i.revision = ? AND i.status IN (${IN_FLIGHT})`,
        [assignment, revision],
      ),
    );
    return all - skipped;
  }

  async countFailed(assignment: string, revision: string): Promise<number> {
    // None failed stays so until an intent of the rollout is saved failed (intents.ts), or a node's
    // drain or conditions change which nodes are skipped (nodes.ts, conditions.ts).
    const rollout = rolloutOf(assignment, revision);
    if (this.ahead?.noneFailed.has(rollout)) return 0;
    // Failures are few: each row's node and acceptance is looked up.
    const failed = count(
      await this.sql.get(`SELECT count(*) AS n ${COUNTED_FAILURES}`, [assignment, revision]),
    );
    if (failed === 0) this.ahead?.noneFailed.add(rollout);
    return failed;
  }

  async countStarted(assignment: string, revision: string): Promise<number> {
    return count(
      await this.sql.get(
        `SELECT count(*) AS n FROM intents WHERE assignment = ? AND revision = ? AND last_attempt_id IS NOT NULL
           AND status NOT IN ('superseded', 'retired')`,
        [assignment, revision],
      ),
    );
  }

  async failures(assignment: string, revision: string, limit: number): Promise<IntentRecord[]> {
    return (
      await this.sql.all(`SELECT i.* ${COUNTED_FAILURES} ORDER BY i.node LIMIT ?`, [
        assignment,
        revision,
        limit,
      ])
    ).map((r) => INTENTS.from(r));
  }

  async skipped(
    assignment: string,
    revision: string,
    limit: number,
  ): Promise<{ instanceKey: string; node: string; status: IntentStatus; skip: SkipReason }[]> {
    return (
      await this.sql.all(
        `SELECT * FROM (
           SELECT i.instance_key, i.node, i.status, ${SKIP_REASON} AS skip FROM intents i JOIN nodes n ON n.name = i.node
            WHERE i.assignment = ? AND i.revision = ? AND i.status NOT IN ('converged', 'superseded', 'retired')) s
          WHERE skip IS NOT NULL ORDER BY node LIMIT ?`,
        [assignment, revision, limit],
      )
    ).map((r) => ({
      instanceKey: r.instance_key as string,
      node: r.node as string,
      status: r.status as IntentStatus,
      skip: r.skip as SkipReason,
    }));
  }

  async ofNode(node: string): Promise<{ assignment: string; revision: string }[]> {
    return (
      await this.sql.all(
        `SELECT DISTINCT assignment, revision FROM intents
          WHERE node = ? AND status NOT IN ('converged', 'superseded', 'retired') ORDER BY assignment, revision`,
        [node],
      )
    ).map((r) => ({ assignment: r.assignment as string, revision: r.revision as string }));
  }

  async held(assignment: string, revision: string, limit: number): Promise<string[]> {
    return (
      await this.sql.all(
        `SELECT instance_key FROM intents WHERE assignment = ? AND revision = ? AND status = 'held'
           AND hold_reason IN (${ROLLOUT_HOLDS}) ORDER BY node LIMIT ?`,
        [assignment, revision, limit],
      )
    ).map((r) => r.instance_key as string);
  }

  async anyHeld(assignment: string, revision: string, reasons?: readonly HoldReason[]): Promise<boolean> {
    // None held for any of the rollout's reasons is none held for some of them, until an intent of
    // the rollout is saved held (intents.ts).
    const rollout = rolloutOf(assignment, revision);
    const ofRollout = reasons === undefined || reasons.every((r) => ROLLOUT_HOLD_REASONS.includes(r));
    if (ofRollout && this.ahead?.noneHeld.has(rollout)) return false;
    const wanted = reasons ? marks(reasons.length) : ROLLOUT_HOLDS;
    const held =
      (await this.sql.get(
        `SELECT 1 AS held FROM intents WHERE assignment = ? AND revision = ? AND status = 'held'
           AND hold_reason IN (${wanted}) LIMIT 1`,
        [assignment, revision, ...(reasons ?? [])],
      )) !== undefined;
    if (!held && reasons === undefined) this.ahead?.noneHeld.add(rollout);
    return held;
  }

  async decision(assignment: string, revision: string): Promise<RolloutDecisionRecord | undefined> {
    const rollout = rolloutOf(assignment, revision);
    const known = this.ahead?.decisions.get(rollout);
    if (known !== undefined) return known === null ? undefined : { ...known };
    const row = await this.sql.get(
      "SELECT * FROM rollout_decisions WHERE assignment = ? AND revision = ? ORDER BY seq DESC LIMIT 1",
      [assignment, revision],
    );
    const decision = row ? decisionFrom(row) : undefined;
    this.ahead?.decisions.set(rollout, decision ?? null);
    return decision;
  }

  async recordDecision(
    decision: Omit<RolloutDecisionRecord, "seq" | "accepted">,
  ): Promise<RolloutDecisionRecord> {
    this.ahead?.decisions.delete(rolloutOf(decision.assignment, decision.revision));
    const inserted = await this.sql.get(
      `INSERT INTO rollout_decisions (assignment, revision, decision, decided_by, reason, decided_at, task_id)
       VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
      [
        decision.assignment,
        decision.revision,
        decision.decision,
        decision.by,
        decision.reason,
        decision.at,
        nul(decision.taskId),
      ],
    );
    const seq = Number(inserted!.seq);
    if (decision.decision === "resume") {
      await this.sql.run(
        `INSERT INTO rollout_accepted_failures (assignment, revision, instance_key, decision_seq)
         SELECT assignment, revision, instance_key, CAST(? AS INTEGER) FROM intents
          WHERE assignment = ? AND revision = ? AND status IN ('blocked', 'stuck')
         ON CONFLICT DO NOTHING`,
        [seq, decision.assignment, decision.revision],
      );
      const accepted = (
        await this.sql.all(
          "SELECT instance_key FROM rollout_accepted_failures WHERE assignment = ? AND revision = ? ORDER BY instance_key",
          [decision.assignment, decision.revision],
        )
      ).map((r) => r.instance_key as string);
      await this.sql.run("UPDATE rollout_decisions SET accepted = ? WHERE seq = ?", [
        JSON.stringify(accepted),
        seq,
      ]);
    }
    return decisionFrom((await this.sql.get("SELECT * FROM rollout_decisions WHERE seq = ?", [seq]))!);
  }
}
