/**
 * A node's mailbox on the bus (stream STEWARD_MAILBOX, see topology.ts): the newest unanswered
 * attempt of each of its instances, one subject per instance, and its list — the assignments whose
 * attempts it may hold, on `steward.mailbox.<node>`. The hub posts (`MailboxPoster`) and takes an
 * attempt out once its result is recorded (`settle`), as a work queue would on acknowledgement; the
 * node's agent is pushed each attempt as it is stored and reads its mailbox (`readMailbox`) to
 * catch up, with direct gets of its own subjects, the only ones its permissions allow.
 *
 * The list is written with the sequence of the list it replaces expected (optimistic concurrency):
 * two writers — a replica that lost a node and the one that took it, say — cannot drop each other's
 * assignments; the one refused reads the list again and adds to it.
 */
import {
  type DirectStreamAPI,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type PubAck,
} from "@nats-io/jetstream";
import { InFlight } from "./in-flight.js";
import { MAILBOX_STREAM, subjects } from "./subjects.js";

/** The body of `steward.mailbox.<node>`. */
export interface MailboxList {
  node: string;
  assignments: string[];
}

/** An attempt as the mailbox holds it. */
export interface MailboxEntry {
  subject: string;
  seq: number;
  data: Uint8Array;
}

/** JetStream's "wrong last sequence" (a publish expecting another list than the stored one). */
const WRONG_LAST_SEQUENCE = 10_071;

/** How often a refused list is read and written again before the dispatch fails (transient). */
const LIST_TRIES = 5;

/** An attempt posted to an instance's subject, by this process (`seq` its stream sequence) or not (-1). */
interface Posted {
  node: string;
  assignment: string;
  attemptId: string;
  seq: number;
}

interface Known {
  /** The list's assignments: an array, a tenth of a set's memory for the few a node has (10,000 nodes). */
  assignments: readonly string[];
  /** Stream sequence of the list these were read from or written as; 0 when there is none. */
  seq: number;
}

export interface MailboxPosterOptions {
  js: JetStreamClient;
  jsm: Pick<JetStreamManager, "direct" | "streams">;
  /** Publish timeout, ms (tried 3 times). */
  timeoutMs: number;
  /** Posts (attempts and lists) outstanding at once; default 512. */
  inFlight?: number;
  /**
   * Settles outstanding at once; default 32. Fewer than posts, and apart from them: taking answered
   * attempts out is housekeeping that must never make a dispatch wait (a rollout of 100,000
   * instances leaves 100,000 of them behind it).
   */
  settlesInFlight?: number;
  /** Told of an answered attempt that could not be taken out (it stays until replaced). */
  settleFailed?: (subject: string, attemptId: string, error: unknown) => void;
}

/**
 * The hub's side: posts an attempt, then makes sure the node's list names its assignment. The list
 * is read once per node and process, then kept; writes for one node go one after another, and
 * assignments that arrive while one is written share the next.
 */
export class MailboxPoster {
  private readonly known = new Map<string, Known>();
  private readonly waiting = new Map<string, { assignments: Set<string>; written: Promise<void> }>();
  private readonly writing = new Map<string, Promise<void>>();
  /**
   * By node and assignment, the attempt this process posted there last and its stream sequence:
   * one entry per instance at most, however many attempts are never answered. Keyed by node, then
   * assignment, not by subject: a rollout of 100,000 instances holds 100,000 of these until their
   * answers are taken out, and a subject string and an entry of its own per instance were 390
   * bytes each (34 MiB of the hub, `npm run bench:scale`); this way an entry is about a hundred.
   */
  private readonly posted = new Map<string, Map<string, Posted>>();
  private readonly requests: InFlight;
  /**
   * Answered attempts still to take out, oldest answer first: the entry this process posted (it
   * knows its sequence; answered twice, it is here once), or one posted elsewhere (a replica, or
   * before a restart: `seq` -1, found by reading the instance's subject). An entry replaced by a
   * newer post before its turn is skipped: the newer attempt replaced it on the subject already.
   */
  private readonly answered = new Set<Posted>();
  private settling = 0;
  private readonly maxSettling: number;

  constructor(private readonly options: MailboxPosterOptions) {
    this.requests = new InFlight(options.inFlight ?? 512);
    this.maxSettling = options.settlesInFlight ?? 32;
  }

  /** Publishes `data` as the newest attempt of the instance, de-duplicated by `attemptId`. */
  async post(node: string, assignment: string, attemptId: string, data: string): Promise<PubAck> {
    const ack = await this.requests.run(() =>
      this.options.js.publish(subjects.attempt(node, assignment), data, {
        msgID: attemptId,
        timeout: this.options.timeoutMs,
        // A retry after a lost acknowledgement is safe: the stream drops the second copy by its id.
        retries: 3,
        expect: { streamName: MAILBOX_STREAM },
      }),
    );
    let ofNode = this.posted.get(node);
    if (!ofNode) {
      ofNode = new Map();
      this.posted.set(node, ofNode);
    }
    ofNode.set(assignment, { node, assignment, attemptId, seq: ack.seq });
    // After the attempt is stored: a node that reads the list finds the attempt it names.
    await this.list(node, assignment);
    return ack;
  }

  /**
   * Takes an answered attempt out of the mailbox, so that an agent reading it later (restarted, or
   * a host installed afresh under the same name) does not take it again. Only that attempt: a newer
   * one posted meanwhile stays. Posted by another process (a replica, or before a restart), it is
   * found by reading the instance's subject.
   */
  settle(node: string, assignment: string, attemptId: string): void {
    const mine = this.posted.get(node)?.get(assignment);
    this.answered.add(mine?.attemptId === attemptId ? mine : { node, assignment, attemptId, seq: -1 });
    this.settleNext();
  }

  /** Starts taking answered attempts out, `settlesInFlight` at a time, oldest answer first. */
  private settleNext(): void {
    while (this.settling < this.maxSettling && this.answered.size > 0) {
      const entry = this.answered.values().next().value as Posted;
      this.answered.delete(entry);
      this.settling++;
      void this.takeOut(entry)
        .catch((error: unknown) =>
          this.options.settleFailed?.(subjects.attempt(entry.node, entry.assignment), entry.attemptId, error),
        )
        .finally(() => {
          this.settling--;
          this.settleNext();
        });
    }
  }

  private async takeOut(entry: Posted): Promise<void> {
    const { jsm } = this.options;
    let seq = entry.seq;
    if (seq >= 0) {
      // Replaced by a newer post (which replaced it on the subject), or taken out already.
      const ofNode = this.posted.get(entry.node);
      if (ofNode?.get(entry.assignment) !== entry) return;
      ofNode.delete(entry.assignment);
      if (ofNode.size === 0) this.posted.delete(entry.node);
    } else {
      const stored = await jsm.direct.getMessage(MAILBOX_STREAM, {
        last_by_subj: subjects.attempt(entry.node, entry.assignment),
      });
      if (!stored || attemptIdOf(stored.data) !== entry.attemptId) return;
      seq = stored.seq;
    }
    try {
      await jsm.streams.deleteMessage(MAILBOX_STREAM, seq, false);
    } catch (error) {
      // Replaced by a newer attempt already, or settled before (a result delivered twice).
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.NoMessageFound))
        throw error;
    }
  }

  /** Forgets what was read (after the stream was recreated, say): the next post reads it again. */
  forget(): void {
    this.known.clear();
  }

  private list(node: string, assignment: string): Promise<void> {
    if (this.known.get(node)?.assignments.includes(assignment)) return Promise.resolve();
    const waiting = this.waiting.get(node);
    if (waiting) {
      waiting.assignments.add(assignment);
      return waiting.written;
    }
    const assignments = new Set([assignment]);
    const before = this.writing.get(node) ?? Promise.resolve();
    const written = before.then(() => {
      this.waiting.delete(node);
      return this.write(node, assignments);
    });
    this.waiting.set(node, { assignments, written });
    const settled = written.catch(() => undefined);
    this.writing.set(node, settled);
    void settled.then(() => {
      if (this.writing.get(node) === settled) this.writing.delete(node);
    });
    return written;
  }

  private async write(node: string, adding: ReadonlySet<string>): Promise<void> {
    for (let tries = 1; ; tries++) {
      const known = this.known.get(node) ?? (await this.read(node));
      const missing = [...adding].filter((a) => !known.assignments.includes(a));
      if (missing.length === 0) {
        this.known.set(node, known);
        return;
      }
      const list: MailboxList = { node, assignments: [...known.assignments, ...missing].sort() };
      try {
        const ack = await this.requests.run(() =>
          this.options.js.publish(subjects.mailbox(node), JSON.stringify(list), {
            timeout: this.options.timeoutMs,
            retries: 3,
            expect: { streamName: MAILBOX_STREAM, lastSubjectSequence: known.seq },
          }),
        );
        this.known.set(node, { assignments: list.assignments, seq: ack.seq });
        return;
      } catch (error) {
        // Another writer (or our own retried publish, stored before its acknowledgement was lost).
        this.known.delete(node);
        if (
          !(error instanceof JetStreamApiError && error.code === WRONG_LAST_SEQUENCE) ||
          tries >= LIST_TRIES
        )
          throw error;
      }
    }
  }

  private async read(node: string): Promise<Known> {
    const stored = await this.requests.run(() =>
      this.options.jsm.direct.getMessage(MAILBOX_STREAM, { last_by_subj: subjects.mailbox(node) }),
    );
    if (!stored) return { assignments: [], seq: 0 };
    return { assignments: [...new Set(parseList(stored.data, node))], seq: stored.seq };
  }
}

function attemptIdOf(data: Uint8Array): string | undefined {
  try {
    return (JSON.parse(new TextDecoder().decode(data)) as { attemptId?: string }).attemptId;
  } catch {
    return undefined;
  }
}

/** The assignments a stored list names; none when it is not a list for `node`. */
function parseList(data: Uint8Array, node: string): string[] {
  try {
    const list = JSON.parse(new TextDecoder().decode(data)) as Partial<MailboxList>;
    if (list.node !== node || !Array.isArray(list.assignments)) return [];
    return list.assignments.filter((a): a is string => typeof a === "string");
  } catch {
    return [];
  }
}

/** Every attempt `node`'s mailbox holds, read with direct gets of the node's own subjects. */
export async function readMailbox(direct: DirectStreamAPI, node: string): Promise<MailboxEntry[]> {
  const list = await direct.getMessage(MAILBOX_STREAM, { last_by_subj: subjects.mailbox(node) });
  if (!list) return [];
  const stored = await Promise.all(
    parseList(list.data, node).map((assignment) =>
      direct.getMessage(MAILBOX_STREAM, { last_by_subj: subjects.attempt(node, assignment) }),
    ),
  );
  return stored
    .filter((m) => m !== null)
    .map((m) => ({ subject: m.subject, seq: m.seq, data: m.data }))
    .sort((a, b) => a.seq - b.seq);
}
