/**
 * The hub database's schema, as numbered migrations. Never edit a released migration: add a new one.
 * Each area owns its migrations: 1xx revisions and generations (the syncer), 2xx hub (intents,
 * attempts, outbox, reports, conditions, tasks, nodes), 3xx commit statuses, 4xx enrolment (hosts'
 * requests to join, credentials issued).
 */
import { ENROLMENT_MIGRATIONS } from "../enrolment/migrations.js";
import { REPLICA_MIGRATIONS } from "../replicas/migrations.js";
import { HUB_MIGRATIONS } from "./hub-migrations.js";

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 101,
    name: "revisions and generations",
    sql: `
      -- Every commit of the tracked branch the syncer has seen, in the order it saw them.
      CREATE TABLE revisions (
        sha TEXT PRIMARY KEY,
        seq INTEGER NOT NULL UNIQUE,           -- order of sync; increases
        branch TEXT NOT NULL,
        author_name TEXT NOT NULL,
        author_email TEXT NOT NULL,
        message TEXT NOT NULL,
        committed_at TEXT NOT NULL,            -- ISO 8601
        synced_at TEXT NOT NULL,
        -- applied: valid, generations recorded. invalid: nothing advanced (see diagnostics).
        -- superseded: skipped because a later commit arrived in the same fetch (see superseded_by).
        outcome TEXT NOT NULL CHECK (outcome IN ('applied', 'invalid', 'superseded')),
        diagnostics TEXT,                      -- JSON list of Diagnostic, for invalid revisions
        superseded_by TEXT,
        changed_assignments TEXT NOT NULL DEFAULT '[]' -- JSON list of assignment names whose instances changed
      );

      -- Generation G of an instance: the rendered spec it must reach. Never reused, never lowered.
      CREATE TABLE generations (
        instance_key TEXT NOT NULL,            -- assignment@node
        generation INTEGER NOT NULL CHECK (generation >= 1),
        assignment TEXT NOT NULL,
        node TEXT NOT NULL,
        hash TEXT NOT NULL,
        spec TEXT NOT NULL,                    -- JSON InstanceSpec
        rollout TEXT NOT NULL,                 -- JSON Rollout
        budget TEXT NOT NULL,                  -- JSON EffectiveBudget
        revision TEXT NOT NULL REFERENCES revisions(sha),
        created_at TEXT NOT NULL,
        PRIMARY KEY (instance_key, generation)
      );
      CREATE INDEX generations_by_revision ON generations (revision);
      CREATE INDEX generations_by_assignment ON generations (assignment, node, generation);

      -- The desired generation of every instance; retired ones are kept (no longer managed, nothing deleted).
      CREATE TABLE instances (
        instance_key TEXT PRIMARY KEY,
        assignment TEXT NOT NULL,
        node TEXT NOT NULL,
        generation INTEGER NOT NULL,
        hash TEXT NOT NULL,
        revision TEXT NOT NULL REFERENCES revisions(sha),
        retired_at TEXT,
        retired_by TEXT REFERENCES revisions(sha),
        FOREIGN KEY (instance_key, generation) REFERENCES generations(instance_key, generation)
      );
      CREATE INDEX instances_by_node ON instances (node);

      -- Where the syncer stands on each tracked branch.
      CREATE TABLE sync_state (
        branch TEXT PRIMARY KEY,
        head TEXT,                             -- last commit seen
        last_good TEXT,                        -- last applied revision (what the hub serves)
        updated_at TEXT NOT NULL
      );
    `,
  },
  {
    version: 102,
    name: "sync events and the tracked source",
    sql: `
      -- Facts about the sync itself that the hub raises as conditions. kind: 'force-push' (the branch
      -- was rewritten; the last good revision is still served), 'fetch-failed' (remote unreachable,
      -- credentials refused, corrupt cache). At most one open event per branch and kind.
      CREATE TABLE sync_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        branch TEXT NOT NULL,
        kind TEXT NOT NULL,
        head TEXT,                             -- the refused head (force-push)
        last_good TEXT,                        -- the revision still served
        message TEXT NOT NULL,
        opened_at TEXT NOT NULL,
        last_seen_at TEXT NOT NULL,
        resolved_at TEXT
      );
      CREATE UNIQUE INDEX sync_events_open ON sync_events (branch, kind) WHERE resolved_at IS NULL;

      -- The fleet repository a branch is tracked from (a path or URL, never with credentials).
      ALTER TABLE sync_state ADD COLUMN source TEXT;
    `,
  },
  {
    version: 301,
    name: "commit statuses",
    sql: `
      -- Per status destination (StatusWriter.name), commit and context: the latest status the hub
      -- wants shown and the last one the destination acknowledged. A row whose desired state differs
      -- from its posted state is still to be written, also after a restart; equal ones are never
      -- written again.
      CREATE TABLE commit_statuses (
        provider TEXT NOT NULL,
        sha TEXT NOT NULL,
        context TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'success', 'failure', 'error')),
        description TEXT NOT NULL,             -- already cut to the destination's limit
        target_url TEXT,
        desired_at TEXT NOT NULL,
        posted_state TEXT CHECK (posted_state IN ('pending', 'success', 'failure', 'error')),
        posted_description TEXT,
        posted_target_url TEXT,
        posted_at TEXT,
        failures INTEGER NOT NULL DEFAULT 0,   -- failed writes of the desired state since it was set
        last_error TEXT,
        PRIMARY KEY (provider, sha, context)
      );
      CREATE INDEX commit_statuses_by_sha ON commit_statuses (sha);
    `,
  },
  ...HUB_MIGRATIONS,
  ...ENROLMENT_MIGRATIONS,
  ...REPLICA_MIGRATIONS,
];
