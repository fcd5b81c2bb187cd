/**
 * The hub's own tables (migrations 2xx): nodes with their drain and liveness state, intents, attempts
 * and their outbox, the latest observation of every node and instance, conditions with history, and
 * tasks. The desired side (revisions, generations, instances) is the syncer's (1xx); the hub only
 * reads it, and adds indexes it needs to find the instances a revision changed without a scan.
 */
import type { Migration } from "./migrations.js";

export const HUB_MIGRATIONS: readonly Migration[] = [
  {
    version: 201,
    name: "hub: nodes, intents, attempts, outbox",
    sql: `
      CREATE INDEX IF NOT EXISTS instances_by_revision ON instances (revision, assignment, node);
      CREATE INDEX IF NOT EXISTS instances_by_retirement ON instances (retired_by);
      CREATE INDEX IF NOT EXISTS instances_by_assignment ON instances (assignment);

      -- Key/value state of the hub itself (e.g. the last revision it has taken in).
      CREATE TABLE hub_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

      -- Nodes as last declared in the fleet repo, with what the hub knows of their availability.
      CREATE TABLE nodes (
        name TEXT PRIMARY KEY,
        transport TEXT NOT NULL,
        spec TEXT NOT NULL,                    -- JSON Node document (nodes carry no secrets)
        revision TEXT,                         -- revision that last declared it
        removed_at TEXT,                       -- no longer declared (kept: its history stays readable)
        draining INTEGER NOT NULL DEFAULT 0,
        drain_reason TEXT,
        drained_at TEXT,
        drained_by TEXT,
        last_heartbeat_at TEXT,
        last_report_at TEXT
      );

      -- The rollout policy and budget each assignment declares now (stage resolved against the
      -- fleet mode). A policy change is not a new generation (the spec did not change), yet it takes
      -- effect at once: switching observe to apply starts dispatching.
      CREATE TABLE assignment_policies (
        assignment TEXT PRIMARY KEY,
        revision TEXT NOT NULL,
        rollout TEXT NOT NULL,                 -- JSON Rollout, stage always set
        budget TEXT NOT NULL                   -- JSON EffectiveBudget
      );

      -- Fleet settings (steward.yaml) of the revision the hub serves.
      CREATE TABLE fleet_settings (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        revision TEXT,
        settings TEXT NOT NULL
      );

      -- The hub's durable promise that an instance reaches a generation and state.
      CREATE TABLE intents (
        instance_key TEXT NOT NULL,
        generation INTEGER NOT NULL,
        assignment TEXT NOT NULL,
        node TEXT NOT NULL,
        revision TEXT NOT NULL,
        hash TEXT NOT NULL,
        state TEXT NOT NULL,
        version TEXT,
        status TEXT NOT NULL,                  -- see IntentStatus
        hold_reason TEXT,
        outcome TEXT,                          -- last known outcome, kept when superseded
        failure_class TEXT,
        reason TEXT,
        message TEXT,
        failures INTEGER NOT NULL DEFAULT 0,
        first_failure_at TEXT,
        next_attempt_at TEXT,
        deadline_at TEXT,                      -- when the current wait (lease, probe grace, ambiguity) ends
        last_attempt_id TEXT,
        accounted_attempt_id TEXT,             -- last attempt whose outcome the counters include
        ever_converged INTEGER NOT NULL DEFAULT 0,
        converged_at TEXT,
        superseded_by INTEGER,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (instance_key, generation)
      );
      CREATE INDEX intents_by_rollout ON intents (assignment, revision, status);
      CREATE INDEX intents_by_node ON intents (node, status);

      -- One dispatch of an intent; its ULID is the correlation id of everything it causes.
      CREATE TABLE attempts (
        id TEXT PRIMARY KEY,
        instance_key TEXT NOT NULL,
        generation INTEGER NOT NULL,
        assignment TEXT NOT NULL,
        node TEXT NOT NULL,
        status TEXT NOT NULL,                  -- see AttemptStatus
        failure_class TEXT,
        reason TEXT,
        message TEXT,
        evidence TEXT,                         -- JSON: failed resources as the agent reported them
        created_at TEXT NOT NULL,
        dispatched_at TEXT,
        lease_expires_at TEXT,
        finished_at TEXT,
        settled_by TEXT,                       -- result | report | dispatch | superseded
        settle_after TEXT                      -- ambiguous: only a report taken after this settles it
      );
      CREATE INDEX attempts_by_intent ON attempts (instance_key, generation);
      CREATE INDEX attempts_by_node_status ON attempts (node, status);

      -- Attempts not yet handed to their transport. Written in the attempt's transaction; deleted once
      -- the transport accepted it. A row left after a crash is handed again with the same attempt id,
      -- which the agent de-duplicates.
      CREATE TABLE outbox (
        attempt_id TEXT PRIMARY KEY REFERENCES attempts(id),
        node TEXT NOT NULL,
        bundle TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
    `,
  },
  {
    version: 202,
    name: "hub: observations",
    sql: `
      -- The latest full report of each node (its instances are in observations).
      CREATE TABLE reports (
        node TEXT PRIMARY KEY,
        taken_at TEXT NOT NULL,
        seq INTEGER,
        received_at TEXT NOT NULL,
        agent TEXT NOT NULL                    -- JSON: the report's agent facts
      );

      -- The latest observation of each instance: what the node read from the system.
      CREATE TABLE observations (
        instance_key TEXT PRIMARY KEY,
        node TEXT NOT NULL,
        assignment TEXT NOT NULL,
        generation INTEGER NOT NULL,
        hash TEXT,
        state TEXT NOT NULL,
        version TEXT,
        converged INTEGER NOT NULL,
        taken_at TEXT NOT NULL,
        body TEXT NOT NULL                     -- JSON InstanceReport
      );
      CREATE INDEX observations_by_node ON observations (node);
    `,
  },
  {
    version: 203,
    name: "hub: conditions and tasks",
    sql: `
      CREATE TABLE conditions (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        subject_kind TEXT NOT NULL,            -- node | instance | revision | rollout | transport | status
        subject TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('open', 'resolved')),
        since TEXT NOT NULL,                   -- last change of status or reason
        last_observed TEXT NOT NULL,
        reason TEXT NOT NULL,
        message TEXT NOT NULL,
        evidence TEXT NOT NULL DEFAULT '{}',
        tried TEXT NOT NULL DEFAULT '[]',      -- attempt ids
        resolver TEXT NOT NULL,                -- operator | agent | steward
        procedure TEXT,
        assignment TEXT,
        node TEXT,
        revision TEXT,
        generation INTEGER,
        attempt_id TEXT,                       -- the attempt that last caused it (correlation id)
        opened_at TEXT NOT NULL,
        resolved_at TEXT,
        resolution TEXT
      );
      CREATE UNIQUE INDEX conditions_open ON conditions (type, subject_kind, subject) WHERE status = 'open';
      CREATE INDEX conditions_by_status ON conditions (status, type);
      CREATE INDEX conditions_open_by_subject ON conditions (subject_kind, subject) WHERE status = 'open';
      CREATE INDEX conditions_by_revision ON conditions (revision);

      CREATE TABLE condition_history (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        condition_id TEXT NOT NULL REFERENCES conditions(id),
        at TEXT NOT NULL,
        event TEXT NOT NULL CHECK (event IN ('opened', 'updated', 'resolved')),
        reason TEXT NOT NULL,
        message TEXT NOT NULL,
        attempt_id TEXT
      );
      CREATE INDEX condition_history_by_condition ON condition_history (condition_id, seq);

      -- Conditions that need judgement, as work for an agent (a person or a program).
      CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        condition_id TEXT NOT NULL UNIQUE REFERENCES conditions(id),
        type TEXT NOT NULL,
        subject_kind TEXT NOT NULL,
        subject TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('open', 'claimed', 'resolved', 'closed')),
        created_at TEXT NOT NULL,
        claimed_by TEXT,
        claimed_at TEXT,
        resolved_by TEXT,
        resolved_at TEXT,
        action TEXT,                           -- what the agent did, in its words
        closed_reason TEXT                     -- closed without an action: the condition resolved by observation
      );
      CREATE INDEX tasks_by_status ON tasks (status);
    `,
  },
  {
    version: 204,
    name: "hub: transport problems keyed by reason; tasks published on a bus",
    sql: `
      -- A subject may have several independent transport problems at once (its agent disconnected
      -- while its attempts exhaust their deliveries): TransportDegraded is one condition per subject
      -- and reason, so one recovery resolves only what it recovers (KEYED_BY_REASON in conditions.ts).
      DROP INDEX conditions_open;
      CREATE UNIQUE INDEX conditions_open ON conditions
        (type, subject_kind, subject, (CASE WHEN type = 'TransportDegraded' THEN reason ELSE '' END))
        WHERE status = 'open';

      -- When the task was handed to the bus's task queue (NULL: not yet; the hub publishes it).
      ALTER TABLE tasks ADD COLUMN published_at TEXT;
      CREATE INDEX tasks_unpublished ON tasks (created_at) WHERE published_at IS NULL AND status = 'open';
    `,
  },
  {
    version: 205,
    name: "hub: live intents indexed apart from history",
    sql: `
      -- Intents are kept for every generation; a reconcile and a hub's start look only at the live
      -- ones (at most a few per instance), so what they read does not grow with the history.
      CREATE INDEX intents_live ON intents (instance_key, generation) WHERE status NOT IN ('superseded', 'retired');
    `,
  },
  {
    version: 206,
    name: "hub: superseded attempts; interrupted one-shots per generation; task outcomes",
    sql: `
      -- An attempt whose generation was superseded while it was queued, in flight or ambiguous ends
      -- as superseded, naming the generation that took over; earlier hubs left such rows dispatched.
      ALTER TABLE attempts ADD COLUMN superseded_by INTEGER;
      ALTER TABLE attempts ADD COLUMN late_result TEXT;  -- JSON: a result that came after it was superseded
      UPDATE attempts SET status = 'superseded', settled_by = 'superseded',
          finished_at = COALESCE(finished_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
          superseded_by = (SELECT i.generation FROM instances i WHERE i.instance_key = attempts.instance_key)
        WHERE status IN ('queued', 'dispatched', 'ambiguous')
          AND generation < (SELECT i.generation FROM instances i WHERE i.instance_key = attempts.instance_key);
      DELETE FROM outbox WHERE attempt_id IN (SELECT id FROM attempts WHERE status = 'superseded');

      -- An interrupted one-shot asks a person about one generation's run: a newer generation's
      -- interruption is a question of its own (KEYED_BY_GENERATION in conditions.ts).
      DROP INDEX conditions_open;
      CREATE UNIQUE INDEX conditions_open ON conditions
        (type, subject_kind, subject,
         (CASE WHEN type = 'TransportDegraded' THEN reason
               WHEN type = 'OneShotInterrupted' THEN CAST(generation AS TEXT) ELSE '' END))
        WHERE status = 'open';

      -- The decision a person's answer carries (ran | rerun for an interrupted one-shot).
      ALTER TABLE tasks ADD COLUMN outcome TEXT;
      -- Answered questions are looked up by instance whatever their status (reconcile.ts).
      CREATE INDEX conditions_by_subject ON conditions (subject_kind, subject, type);
    `,
  },
  {
    version: 207,
    name: "hub: operators' rollout decisions",
    sql: `
      -- An operator's decisions about a rollout (one assignment at one revision): pause it, or resume
      -- it past the failures it has seen. Every decision is kept; the latest of a rollout is in force.
      CREATE TABLE rollout_decisions (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        assignment TEXT NOT NULL,
        revision TEXT NOT NULL,
        decision TEXT NOT NULL CHECK (decision IN ('pause', 'resume')),
        decided_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        decided_at TEXT NOT NULL,
        task_id TEXT,                          -- the RolloutPaused task it answered, if any
        accepted TEXT NOT NULL DEFAULT '[]'    -- JSON: for resume, the failed instances it went on past
      );
      CREATE INDEX rollout_decisions_by_rollout ON rollout_decisions (assignment, revision, seq);

      -- Failed instances a resume let their rollout go on past: they no longer count against
      -- maxFailures (a failure seen after the resume still does). Kept apart from the decisions so
      -- the rollout's failure count stays one indexed lookup per failed instance.
      CREATE TABLE rollout_accepted_failures (
        assignment TEXT NOT NULL,
        revision TEXT NOT NULL,
        instance_key TEXT NOT NULL,
        decision_seq INTEGER NOT NULL REFERENCES rollout_decisions(seq),
        PRIMARY KEY (assignment, revision, instance_key)
      );

      -- Drained nodes (few), found without reading every node: rollouts go on around them.
      CREATE INDEX nodes_draining ON nodes (name) WHERE draining = 1;
    `,
  },
  {
    version: 208,
    name: "hub: when a result was recorded",
    sql: `
      -- The hub's own time it recorded an attempt's result: the wait for the confirming report
      -- starts there (finished_at is the agent's clock, and a busy hub reads a result late).
      ALTER TABLE attempts ADD COLUMN recorded_at TEXT;
    `,
  },
];
