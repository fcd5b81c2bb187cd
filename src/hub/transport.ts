/**
 * The Transport port: how the hub hands attempts to nodes and hears back from them. Adapters live in
 * src/transport/ (`local`, `nats`, `ssh`); only the CLI wires one in. The hub never assumes a result
 * arrives: a result that does not arrive before the attempt's deadline, or a transport that says it
 * was lost, makes the attempt ambiguous, and only a full report taken after the dispatch settles it.
 */
import type { AttemptResult, Bundle, Node, Report } from "../model/generated.js";

export type TransportName = "local" | "nats" | "ssh";

/**
 * What the hub hears from a transport. Each handler's promise settles once the event is recorded (a
 * transport that acknowledges, like NATS, acknowledges only then). Events are recorded in the order
 * the handlers are called, so a transport need not wait for one event's promise before handing over
 * the next: a node's results and the report that follows them, handed over together, are recorded
 * together and looked at once.
 */
export interface TransportEvents {
  /** A full report from a node: an observation, never a desired target. */
  report(report: Report): void | Promise<void>;
  /** The outcome of an attempt, as the agent saw it. */
  result(result: AttemptResult): void | Promise<void>;
  /** The node said it is alive (NATS heartbeats; a successful SSH observation counts too). */
  heartbeat(node: string, at: Date): void | Promise<void>;
  /**
   * The attempt's result is lost: the session dropped after the command started, the agent died
   * mid-apply. The hub marks it ambiguous and never replays it blindly.
   */
  lost(attemptId: string, node: string, reason: string): void | Promise<void>;
  /** Something about the transport itself: degraded (with a reason) or recovered. */
  health(event: TransportHealth): void | Promise<void>;
  /**
   * The host's public identity (`steward agent identity`), as the transport collected it (SSH on
   * first contact): compared with the Node document's `spec.identity`. Optional for transports
   * that learn none.
   */
  identity?(node: string, identity: { nkey: string; age: string }): void | Promise<void>;
}

export interface TransportHealth {
  status: "degraded" | "recovered";
  /** The node concerned, or undefined for the transport as a whole (the NATS server, say). */
  node?: string;
  /** The instance's assignment, when the signal is about one instance (a silent service heartbeat). */
  assignment?: string;
  /** When the problem began, if earlier than the event (a silent node: its last heartbeat). */
  since?: Date;
  /**
   * Stable CamelCase reason, e.g. `HostKeyMismatch`, `ServerDisconnected`, `MaxDeliveriesExceeded`,
   * `NodeSilent` (the hub's NodeSilent condition rather than TransportDegraded).
   */
  reason: string;
  message: string;
}

/** Raised by `dispatch` when the attempt could not be handed over; `failureClass` says what the hub should do. */
export class DispatchError extends Error {
  override readonly name = "DispatchError";
  constructor(
    message: string,
    /** `transient`: not handed over, retry with backoff. `permanent`: will never work as configured. `ambiguous`: may have started. */
    readonly failureClass: "transient" | "permanent" | "ambiguous",
    /** Stable CamelCase reason, e.g. `ConnectionRefused`, `HostKeyUnknown`, `NoNodeRuntime`. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A report, result or loss about a node another hub replica owns now: not recorded here. A transport
 * whose replicas share what they receive (NATS) hands it back, so the owner gets it.
 */
export class NotOwnedError extends Error {
  override readonly name = "NotOwnedError";
  constructor(readonly node: string) {
    super(`node ${node} is another hub replica's now`);
  }
}

export interface Transport {
  readonly name: TransportName;
  /** Starts listening; events flow until `stop`. */
  start(events: TransportEvents): Promise<void>;
  /**
   * Among hub replicas: the shards (model/shards.ts) whose nodes this replica owns now, so a
   * transport that shares what agents send between replicas (NATS) hands this one only its own.
   * Called before `start` and whenever they change; a transport without it hears every node.
   */
  consumeShards?(shards: ReadonlySet<number>): Promise<void>;
  /**
   * Hands one attempt to a node. Resolves once the transport has accepted it (for NATS: the stream
   * acknowledged it); the result arrives later through `events.result`. Rejects with DispatchError.
   */
  dispatch(bundle: Bundle, node: Node): Promise<void>;
  /** Asks a node for a fresh full report (to settle an ambiguous attempt, or to observe an SSH node). */
  requestReport(node: Node): Promise<void>;
  stop(): Promise<void>;
}
