/**
 * The declarations of the revision the syncer serves (its last good one): nodes, assignment
 * policies and fleet settings. The syncer keeps generations only; the hub needs these too (how to
 * reach a node, whether an assignment is observe-only), so after each sync the wiring reads them
 * from the same git tree and records them, once per revision.
 */
import type { DeclarationChanges, RecordedNodes } from "../hub/desired.js";
import type { Store } from "../hub/store/store.js";
import type { AnalysisCache } from "../model/load.js";
import type { Syncer } from "../repo/syncer.js";

/**
 * Records the served revision's declarations if not done yet; returns what changed (undefined:
 * nothing to do). `recorded`: the nodes recorded last (see recordDeclaredFleet), kept by the caller.
 */
export async function recordServedRevision(
  store: Store,
  syncer: Syncer,
  cache: AnalysisCache,
  now: Date,
  recorded?: RecordedNodes,
): Promise<DeclarationChanges | undefined> {
  const revision = (await store.desired.syncState(syncer.branch))?.lastGood;
  const { declaredRevision, recordDeclaredFleet } = await import("../hub/desired.js");
  if (!revision || (await declaredRevision(store)) === revision) return undefined;
  // The syncer in this process applied it a moment ago, most often: its load is reused. Loading
  // again renders every instance of the fleet (500 ms at 100,000) for declarations that need none.
  let desired = syncer.appliedState(revision);
  if (!desired) {
    const { treeSource } = await import("../repo/tree.js");
    const { loadRepo } = await import("../model/load.js");
    const repository = syncer.repository;
    const commit = repository.commit(revision);
    desired = (await loadRepo(treeSource(repository.reader, repository.trees, commit.tree), { cache }))
      .desired;
  }
  if (!desired) return undefined;
  return recordDeclaredFleet(store, revision, desired, now.toISOString(), recorded);
}
