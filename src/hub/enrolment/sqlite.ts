/**
 * The EnrolmentStore on the hub's SQLite database (migrations 4xx): hosts' requests to join and the
 * credentials the hub issued. It shares the database, and so the transactions, of the hub's Store:
 * a request and the condition it raises commit together.
 */
import type { Db } from "../store/database.js";
import type { Migration } from "../store/migrations.js";
import type {
  EnrolmentRecord,
  EnrolmentStatus,
  EnrolmentStore,
  HostFacts,
  IssuedCredential,
} from "./records.js";

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

interface RequestRow {
  node: string;
  nkey: string;
  age: string;
  labels: string;
  facts: string;
  status: EnrolmentStatus;
  requested_at: string;
  last_asked_at: string;
  condition_id: string | null;
  decided_by: string | null;
  decided_at: string | null;
  decision: string | null;
  proposal: string | null;
}

function toRecord(row: RequestRow): EnrolmentRecord {
  const record: EnrolmentRecord = {
    node: row.node,
    nkey: row.nkey,
    age: row.age,
    labels: JSON.parse(row.labels) as Record<string, string>,
    facts: JSON.parse(row.facts) as HostFacts,
    status: row.status,
    requestedAt: row.requested_at,
    lastAskedAt: row.last_asked_at,
  };
  if (row.condition_id) record.conditionId = row.condition_id;
  if (row.decided_by) record.decidedBy = row.decided_by;
  if (row.decided_at) record.decidedAt = row.decided_at;
  if (row.decision) record.decision = row.decision;
  if (row.proposal) record.proposal = JSON.parse(row.proposal) as EnrolmentRecord["proposal"];
  return record;
}

/** The EnrolmentStore on SQLite; the database must have had ENROLMENT_MIGRATIONS applied. */
export class SqliteEnrolmentStore implements EnrolmentStore {
  constructor(private readonly db: Db) {}

  request(node: string, nkey: string): EnrolmentRecord | undefined {
    const row = this.db
      .prepare("SELECT * FROM enrolment_requests WHERE node = ? AND nkey = ?")
      .get(node, nkey) as RequestRow | undefined;
    return row ? toRecord(row) : undefined;
  }

  requestsOf(node: string): EnrolmentRecord[] {
    return (
      this.db
        .prepare("SELECT * FROM enrolment_requests WHERE node = ? ORDER BY requested_at, nkey")
        .all(node) as RequestRow[]
    ).map(toRecord);
  }

  requests(statuses?: readonly EnrolmentStatus[]): EnrolmentRecord[] {
    const rows = (
      statuses
        ? this.db
            .prepare(
              `SELECT * FROM enrolment_requests WHERE status IN (${statuses.map(() => "?").join(", ")}) ORDER BY requested_at, node, nkey`,
            )
            .all(...statuses)
        : this.db.prepare("SELECT * FROM enrolment_requests ORDER BY requested_at, node, nkey").all()
    ) as RequestRow[];
    return rows.map(toRecord);
  }

  saveRequest(record: EnrolmentRecord): void {
    this.db
      .prepare(
        `INSERT INTO enrolment_requests (node, nkey, age, labels, facts, status, requested_at, last_asked_at, condition_id, decided_by, decided_at, decision, proposal)
         VALUES (@node, @nkey, @age, @labels, @facts, @status, @requested_at, @last_asked_at, @condition_id, @decided_by, @decided_at, @decision, @proposal)
         ON CONFLICT (node, nkey) DO UPDATE SET age = excluded.age, labels = excluded.labels, facts = excluded.facts,
           status = excluded.status, requested_at = excluded.requested_at, last_asked_at = excluded.last_asked_at,
           condition_id = excluded.condition_id, decided_by = excluded.decided_by, decided_at = excluded.decided_at,
           decision = excluded.decision, proposal = excluded.proposal`,
      )
      .run({
        node: record.node,
        nkey: record.nkey,
        age: record.age,
        labels: JSON.stringify(record.labels),
        facts: JSON.stringify(record.facts),
        status: record.status,
        requested_at: record.requestedAt,
        last_asked_at: record.lastAskedAt,
        condition_id: record.conditionId ?? null,
        decided_by: record.decidedBy ?? null,
        decided_at: record.decidedAt ?? null,
        decision: record.decision ?? null,
        proposal: record.proposal ? JSON.stringify(record.proposal) : null,
      });
  }

  countUndecided(): number {
    return (
      this.db
        .prepare("SELECT count(*) AS n FROM enrolment_requests WHERE status IN ('queued', 'conflict')")
        .get() as { n: number }
    ).n;
  }

  recordIssued(credential: IssuedCredential): void {
    this.db
      .prepare(
        "INSERT INTO issued_credentials (nkey, node, issued_at) VALUES (?, ?, ?) ON CONFLICT (nkey, node) DO UPDATE SET issued_at = excluded.issued_at",
      )
      .run(credential.nkey, credential.node, credential.issuedAt);
  }

  issued(): IssuedCredential[] {
    return (
      this.db.prepare("SELECT nkey, node, issued_at FROM issued_credentials ORDER BY node, nkey").all() as {
        nkey: string;
        node: string;
        issued_at: string;
      }[]
    ).map((row) => ({ nkey: row.nkey, node: row.node, issuedAt: row.issued_at }));
  }
}
