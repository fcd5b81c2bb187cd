/**
 * The enrolment tables (migrations 4xx): hosts' requests to join and the credentials the hub
 * issued. The store's `enrolments` port (store/sql/enrolments.ts) owns them.
 */
import type { Migration } from "../store/migrations.js";

/** The enrolment tables (4xx): listed with the hub database's other migrations. */
export const ENROLMENT_MIGRATIONS: readonly Migration[] = [
  {
    version: 401,
    name: "enrolment: requests to join, credentials issued",
    sql: `
      -- One host's request to join as a node with its public key (never a secret).
      CREATE TABLE enrolment_requests (
        node TEXT NOT NULL,
        nkey TEXT NOT NULL,
        age TEXT NOT NULL,
        labels TEXT NOT NULL,                  -- JSON: the labels the host asks for
        facts TEXT NOT NULL,                   -- JSON HostFacts: hostname, os, arch, agent version
        status TEXT NOT NULL CHECK (status IN ('queued', 'conflict', 'approved', 'denied', 'admitted')),
        requested_at TEXT NOT NULL,
        last_asked_at TEXT NOT NULL,
        condition_id TEXT,
        decided_by TEXT,
        decided_at TEXT,
        decision TEXT,
        proposal TEXT,                         -- JSON: where an approval wrote the Node document
        PRIMARY KEY (node, nkey)
      );
      CREATE INDEX enrolment_requests_by_status ON enrolment_requests (status);

      -- Every user JWT the hub issued, so a key Git no longer admits is revoked.
      CREATE TABLE issued_credentials (
        nkey TEXT NOT NULL,
        node TEXT NOT NULL,
        issued_at TEXT NOT NULL,
        PRIMARY KEY (nkey, node)
      );
    `,
  },
];
