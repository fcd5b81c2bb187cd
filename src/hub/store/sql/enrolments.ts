/**
 * The enrolments port on SQL (tables `enrolment_requests` and `issued_credentials`, migration 401):
 * hosts' requests to join and the credentials the hub issued. It shares the unit of work of the
 * other ports: a request and the condition it raises commit together.
 */
import type { EnrolmentRecord, EnrolmentStatus, IssuedCredential } from "../../enrolment/records.js";
import type { Enrolments } from "../store.js";
import { marks, RecordMap, type Sql } from "./sql.js";

const REQUESTS = new RecordMap<EnrolmentRecord>([
  "node",
  "nkey",
  "age",
  ["labels", "json"],
  ["facts", "json"],
  "status",
  "requestedAt",
  "lastAskedAt",
  "conditionId",
  "decidedBy",
  "decidedAt",
  "decision",
  ["proposal", "json"],
]);

const UPSERT_REQUEST = REQUESTS.upsertSql("enrolment_requests", ["node", "nkey"]);
const CREDENTIALS = new RecordMap<IssuedCredential>(["nkey", "node", "issuedAt"]);
const UPSERT_CREDENTIAL = CREDENTIALS.upsertSql("issued_credentials", ["nkey", "node"]);

export class EnrolmentsSql implements Enrolments {
  constructor(private readonly sql: Sql) {}

  async request(node: string, nkey: string): Promise<EnrolmentRecord | undefined> {
    const row = await this.sql.get("SELECT * FROM enrolment_requests WHERE node = ? AND nkey = ?", [
      node,
      nkey,
    ]);
    return row ? REQUESTS.from(row) : undefined;
  }

  async requestsOf(node: string): Promise<EnrolmentRecord[]> {
    return (
      await this.sql.all("SELECT * FROM enrolment_requests WHERE node = ? ORDER BY requested_at, nkey", [
        node,
      ])
    ).map((row) => REQUESTS.from(row));
  }

  async requests(statuses?: readonly EnrolmentStatus[]): Promise<EnrolmentRecord[]> {
    const rows = statuses
      ? await this.sql.all(
          `SELECT * FROM enrolment_requests WHERE status IN (${marks(statuses.length)}) ORDER BY requested_at, node, nkey`,
          statuses,
        )
      : await this.sql.all("SELECT * FROM enrolment_requests ORDER BY requested_at, node, nkey");
    return rows.map((row) => REQUESTS.from(row));
  }

  async countUndecided(): Promise<number> {
    const row = await this.sql.get(
      "SELECT count(*) AS n FROM enrolment_requests WHERE status IN ('queued', 'conflict')",
    );
    return Number(row?.n ?? 0);
  }

  async issued(): Promise<IssuedCredential[]> {
    return (await this.sql.all("SELECT * FROM issued_credentials ORDER BY node, nkey")).map((row) =>
      CREDENTIALS.from(row),
    );
  }

  async saveRequest(record: EnrolmentRecord): Promise<void> {
    await this.sql.run(UPSERT_REQUEST, REQUESTS.to(record));
  }

  async recordIssued(credential: IssuedCredential): Promise<void> {
    await this.sql.run(UPSERT_CREDENTIAL, CREDENTIALS.to(credential));
  }
}
