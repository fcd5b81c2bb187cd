/**
 * Revision intake: what the syncer recorded since the hub last looked — invalid revisions become
 * `InvalidRevision`, applied ones resolve it and queue the instances whose generation they changed,
 * and the syncer's own troubles (a refused force-push, a failing fetch) become conditions. A
 * cursor in the hub's meta table says how far it has read, so a restart takes in only what is new.
 */
import type { Logger } from "pino";
import { markOpen, markResolved } from "./conditions.js";
import { declaredRevision } from "./desired.js";
import type { RevisionRecord } from "./records.js";
import type { Store, UnitOfWork } from "./store/store.js";

const REVISION_CURSOR = "revision_seq";

/** Orders instance keys (`assignment@node`) by node, then assignment. */
function byNode(a: string, b: string): number {
  const nodeA = a.slice(a.lastIndexOf("@") + 1);
  const nodeB = b.slice(b.lastIndexOf("@") + 1);
  if (nodeA !== nodeB) return nodeA < nodeB ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

export interface IntakeOptions {
  store: Store;
  log: Logger;
  now: () => string;
  newId: () => string;
  /** Revisions whose commit statuses may have changed. */
  statusesChanged: (shas: readonly string[]) => void;
  /** Queues instance keys for a reconcile, in this order. */
  enqueue: (keys: readonly string[]) => void;
}

/** Takes in what the syncer recorded (see the module comment). */
export class RevisionIntake {
  /** The intake now running: one at a time, so a revision is taken in once. */
  private running: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: IntakeOptions) {}

  /**
   * Takes in what the syncer recorded since the last call: invalid revisions and changed instances.
   * An applied revision waits until its declarations (or a later revision's) are recorded
   * (desired.ts): its generations must go out with the Node documents it declares — a revision
   * synced by another process is not dispatched with the host keys of the revision before.
   */
  takeIn(): Promise<RevisionRecord[]> {
    const next = this.running.then(
      () => this.takeInNow(),
      () => this.takeInNow(),
    );
    this.running = next;
    return next;
  }

  private async takeInNow(): Promise<RevisionRecord[]> {
    const { store, log } = this.options;
    await this.takeInSyncEvents();
    const cursor = Number((await store.meta.get(REVISION_CURSOR)) ?? "0");
    const declared = await declaredRevision(store);
    const declaredSeq = (declared ? (await store.desired.revision(declared))?.seq : undefined) ?? 0;
    const after = await store.desired.revisionsAfter(cursor);
    const waiting = after.findIndex((r) => r.outcome === "applied" && r.seq > declaredSeq);
    const revisions = waiting < 0 ? after : after.slice(0, waiting);
    if (waiting >= 0)
      log.debug(
        { revision: after[waiting]!.sha, declared },
        "revision %s waits for its declarations",
        after[waiting]!.sha.slice(0, 12),
      );
    if (revisions.length === 0) return [];
    const now = this.options.now();
    const changed = new Set<string>();
    await store.transaction(async (tx) => {
      for (const revision of revisions) {
        if (revision.outcome === "invalid") await this.openInvalidRevision(tx, revision, now);
        else if (revision.outcome === "applied") {
          // A refused rewrite is the syncer's to resolve (takeInSyncEvents), not a valid commit's.
          for (const condition of await tx.conditions.list({ status: "open", type: "InvalidRevision" }))
            if (condition.reason !== "HistoryRewritten")
              await markResolved(
                tx,
                "InvalidRevision",
                condition.subjectKind,
                condition.subject,
                now,
                `revision ${revision.sha.slice(0, 12)} on ${revision.branch} is valid and applied`,
              );
          for (const key of await tx.desired.keysChangedBy(revision.sha)) changed.add(key);
        }
      }
      await tx.meta.set(REVISION_CURSOR, String(revisions.at(-1)!.seq));
    });
    // The revision that was newest until now is carried forward: its pending statuses end.
    const carried = revisions.some((r) => r.outcome === "applied")
      ? await store.desired.previousAppliedRevision(revisions[0]!.seq)
      : undefined;
    this.options.statusesChanged([...revisions.map((r) => r.sha), ...(carried ? [carried.sha] : [])]);
    log.info(
      { revisions: revisions.map((r) => r.sha.slice(0, 12)), instances: changed.size },
      "took in %d revisions; %d instances changed",
      revisions.length,
      changed.size,
    );
    // Node by node: a node's instances are reconciled, and their attempts sent, together.
    this.options.enqueue([...changed].sort(byNode));
    return revisions;
  }

  /**
   * The syncer's own troubles as conditions, level-based: a refused force-push is `InvalidRevision`
   * on the refused head (the last good revision is still served), a failing fetch is
   * `TransportDegraded` on the repository. Each resolves once the syncer resolved its event.
   */
  private async takeInSyncEvents(): Promise<void> {
    const { store } = this.options;
    const now = this.options.now();
    const open = new Set<string>();
    await store.transaction(async (tx) => {
      for (const event of await tx.desired.openSyncEvents()) {
        const refused = event.kind === "force-push";
        const subject = refused ? (event.head ?? event.branch) : `git:${event.branch}`;
        open.add(`${refused ? "InvalidRevision" : "TransportDegraded"}|${subject}`);
        await markOpen(
          tx,
          {
            type: refused ? "InvalidRevision" : "TransportDegraded",
            subjectKind: refused ? "revision" : "transport",
            subject,
            reason: refused ? "HistoryRewritten" : "FetchFailed",
            message: event.message,
            evidence: { branch: event.branch, since: event.openedAt, lastGood: event.lastGood },
            resolver: "operator",
            ...(refused && event.head ? { revision: event.head } : {}),
          },
          now,
          this.options.newId,
        );
      }
      const raised = [
        ...(await tx.conditions.list({ status: "open", type: "InvalidRevision", subjectKind: "revision" })),
        ...(await tx.conditions.list({
          status: "open",
          type: "TransportDegraded",
          subjectKind: "transport",
        })),
      ];
      for (const condition of raised) {
        if (condition.reason !== "HistoryRewritten" && condition.reason !== "FetchFailed") continue;
        if (open.has(`${condition.type}|${condition.subject}`)) continue;
        await markResolved(
          tx,
          condition.type,
          condition.subjectKind,
          condition.subject,
          now,
          "the syncer reports it resolved",
          condition.reason,
        );
      }
    });
  }

  private async openInvalidRevision(tx: UnitOfWork, revision: RevisionRecord, now: string): Promise<void> {
    const diagnostics = revision.diagnostics ?? [];
    const where = diagnostics
      .slice(0, 3)
      .map((d) => `${d.file}:${d.line}:${d.column}: ${d.message}`)
      .join("; ");
    await markOpen(
      tx,
      {
        type: "InvalidRevision",
        subjectKind: "revision",
        subject: revision.sha,
        reason: "ValidationFailed",
        message: `revision ${revision.sha.slice(0, 12)} is invalid (${diagnostics.length} problems), nothing changed: ${where}`,
        evidence: {
          diagnostics: diagnostics.slice(0, 20),
          author: revision.authorName,
          message: revision.message,
        },
        resolver: "operator",
        revision: revision.sha,
      },
      now,
      this.options.newId,
    );
  }
}
