/**
 * Writes desired state into the hub database the way the syncer does (revisions, generations,
 * instances), from a fleet repo directory loaded with the real loader. Until the Syncer lands this
 * stands in for it in tests; it follows the migration-101 contract exactly.
 */
import { createHash } from "node:crypto";
import { type DeclarationChanges, recordDeclaredFleet } from "../../../src/hub/desired.js";
import type { SqliteStore } from "../../../src/hub/store/sqlite.js";
import { canonicalJson } from "../../../src/model/canonical.js";
import { directorySource, loadRepo } from "../../../src/model/load.js";

export interface SyncedRevision {
  sha: string;
  changed: string[];
  retired: string[];
  declarations: DeclarationChanges;
}

let counter = 0;

export async function syncDirectory(
  store: SqliteStore,
  dir: string,
  at: Date,
  message = "change",
): Promise<SyncedRevision> {
  const loaded = await loadRepo(directorySource(dir));
  const db = store.db;
  const sha = createHash("sha1").update(`${dir}:${++counter}:${message}:${at.toISOString()}`).digest("hex");
  const seq =
    ((db.prepare("SELECT coalesce(max(seq), 0) AS s FROM revisions").get() as { s: number }).s ?? 0) + 1;
  const now = at.toISOString();
  if (!loaded.ok || !loaded.desired) {
    db.prepare(
      `INSERT INTO revisions (sha, seq, branch, author_name, author_email, message, committed_at, synced_at, outcome, diagnostics)
       VALUES (?, ?, 'main', 'Test', 'test@example.com', ?, ?, ?, 'invalid', ?)`,
    ).run(sha, seq, message, now, now, JSON.stringify(loaded.diagnostics));
    return { sha, changed: [], retired: [], declarations: { nodes: [], assignments: [] } };
  }
  const desired = loaded.desired;
  const changed: string[] = [];
  const retired: string[] = [];
  const assignments = new Set<string>();
  db.transaction(() => {
    db.prepare(
      `INSERT INTO revisions (sha, seq, branch, author_name, author_email, message, committed_at, synced_at, outcome)
       VALUES (?, ?, 'main', 'Test', 'test@example.com', ?, ?, ?, 'applied')`,
    ).run(sha, seq, message, now, now);
    for (const instance of desired.instances.values()) {
      const current = db
        .prepare("SELECT generation, hash, retired_at FROM instances WHERE instance_key = ?")
        .get(instance.key) as { generation: number; hash: string; retired_at: string | null } | undefined;
      if (current && current.hash === instance.hash && current.retired_at === null) continue;
      const last = (
        db
          .prepare("SELECT coalesce(max(generation), 0) AS g FROM generations WHERE instance_key = ?")
          .get(instance.key) as { g: number }
      ).g;
      const generation = last + 1;
      db.prepare(
        `INSERT INTO generations (instance_key, generation, assignment, node, hash, spec, rollout, budget, revision, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        instance.key,
        generation,
        instance.assignment,
        instance.node,
        instance.hash,
        canonicalJson(instance.spec),
        JSON.stringify(instance.rollout),
        JSON.stringify(instance.budget),
        sha,
        now,
      );
      db.prepare(
        `INSERT INTO instances (instance_key, assignment, node, generation, hash, revision) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (instance_key) DO UPDATE SET generation = excluded.generation, hash = excluded.hash,
           revision = excluded.revision, retired_at = NULL, retired_by = NULL`,
      ).run(instance.key, instance.assignment, instance.node, generation, instance.hash, sha);
      changed.push(instance.key);
      assignments.add(instance.assignment);
    }
    for (const row of db
      .prepare("SELECT instance_key, assignment FROM instances WHERE retired_at IS NULL")
      .all() as {
      instance_key: string;
      assignment: string;
    }[]) {
      if (desired.instances.has(row.instance_key)) continue;
      db.prepare("UPDATE instances SET retired_at = ?, retired_by = ? WHERE instance_key = ?").run(
        now,
        sha,
        row.instance_key,
      );
      retired.push(row.instance_key);
      assignments.add(row.assignment);
    }
    db.prepare("UPDATE revisions SET changed_assignments = ? WHERE sha = ?").run(
      JSON.stringify([...assignments].sort()),
      sha,
    );
  })();
  const declarations = recordDeclaredFleet(store, sha, desired, now);
  return { sha, changed, retired, declarations };
}
