/**
 * The declarations of the revision the syncer serves (its last good one): nodes, assignment
 * policies and fleet settings. The syncer keeps generations only; the hub needs these too (how to
 * reach a node, whether an assignment is observe-only), so after each sync the wiring reads them
 * from the same git tree and records them, once per revision.
 */
import type { DeclarationChanges } from "../hub/desired.js";
import type { SqliteStore } from "../hub/store/sqlite.js";
import type { AnalysisCache } from "../model/load.js";
import type { Syncer } from "../repo/syncer.js";

/** Records the served revision's declarations if not done yet; returns what changed (undefined: nothing to do). */
export async function recordServedRevision(
  store: SqliteStore,
  syncer: Syncer,
  cache: AnalysisCache,
  now: Date,
): Promise<DeclarationChanges | undefined> {
  const state = store.db.prepare("SELECT last_good FROM sync_state WHERE branch = ?").get(syncer.branch) as
    | { last_good: string | null }
    | undefined;
  const revision = state?.last_good;
  const { declaredRevision, recordDeclaredFleet } = await import("../hub/desired.js");
  if (!revision || declaredRevision(store) === revision) return undefined;
  const { treeSource } = await import("../repo/tree.js");
  const { loadRepo } = await import("../model/load.js");
  const repository = syncer.repository;
  const commit = repository.commit(revision);
  const loaded = await loadRepo(treeSource(repository.reader, repository.trees, commit.tree), { cache });
  if (!loaded.desired) return undefined;
  return recordDeclaredFleet(store, revision, loaded.desired, now.toISOString());
}
