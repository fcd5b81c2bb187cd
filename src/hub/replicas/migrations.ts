/**
 * The replica tables (migrations 5xx): the hub replicas sharing a store, and the leases that divide
 * the work between them. The store's `replicas` port (store/sql/replicas.ts) owns them.
 */
import type { Migration } from "../store/migrations.js";

export const REPLICA_MIGRATIONS: readonly Migration[] = [
  {
    version: 501,
    name: "replicas: hub replicas and their leases",
    sql: `
      -- Each running hub replica, renewed while it lives; one whose lease ran out is gone.
      CREATE TABLE replicas (
        id TEXT PRIMARY KEY,
        address TEXT,                          -- where its HTTP endpoints answer, if it serves them
        started_at TEXT NOT NULL,
        renewed_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        shards INTEGER NOT NULL DEFAULT 0,     -- shard leases it holds (as of its last renewal)
        nodes INTEGER NOT NULL DEFAULT 0       -- nodes in them
      );

      -- A lease on a unit of work only one replica does at a time: a shard of the nodes
      -- ('shard:N') or the repository's sync ('sync'). The token grows each time the lease changes
      -- hands: a write made under a lease checks holder and token (fencing), so a replica that lost
      -- its lease writes nothing more under it.
      CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        token INTEGER NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX leases_by_holder ON leases (holder);
    `,
  },
  {
    version: 502,
    name: "replicas: a lease's token is a key",
    sql: `
      -- With the token in a unique index, PostgreSQL counts it a key column: a unit of work's fence
      -- (SELECT ... FOR KEY SHARE) then blocks a takeover, which changes the token, until the unit
      -- ends, and never a renewal, which changes only expires_at. A renewal that waited for the
      -- hub's long units of work let leases run out under load.
      CREATE UNIQUE INDEX leases_by_token ON leases (name, token);
    `,
  },
  {
    version: 503,
    name: "replicas: the database session that says a replica lives",
    sql: `
      -- The name of a connection the replica keeps open while its process lives (PostgreSQL's
      -- application_name): once the server no longer has it, the replica is gone, and the others
      -- take its leases at once rather than wait them out. NULL: none (SQLite, an older replica).
      ALTER TABLE replicas ADD COLUMN session TEXT;
    `,
  },
];
