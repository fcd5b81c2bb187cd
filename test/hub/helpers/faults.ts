/**
 * Fault injection around the real local transport, as a network would cause it: a partition drops
 * everything the node says (results, reports, heartbeats) and turns each result into a lost one
 * (the session dropped after the agent ran the attempt); `dropDispatches` loses attempts before
 * they reach the agent; `hangDispatches` stalls them. The agent and transport underneath are real.
 */

import type { Transport, TransportEvents } from "../../../src/hub/transport.js";
import type { Bundle, Node } from "../../../src/model/generated.js";
import type { LocalTransport } from "../../../src/transport/local.js";

export class FaultyTransport implements Transport {
  readonly name = "local" as const;
  partitioned = false;
  dropDispatches = false;
  /** Dispatches never complete (a stalled connection): the attempt stays in the outbox. */
  hangDispatches = false;
  /** The node sends no heartbeats; it still answers requests for reports (like an SSH node). */
  dropHeartbeats = false;
  /** Attempt ids whose dispatch was dropped. */
  readonly dropped: string[] = [];
  private events: TransportEvents | undefined;

  constructor(private readonly inner: LocalTransport) {}

  async start(events: TransportEvents): Promise<void> {
    this.events = events;
    await this.inner.start({
      report: (report) => (this.partitioned ? undefined : events.report(report)),
      result: (result) =>
        this.partitioned
          ? events.lost(result.attemptId, result.node, "session dropped")
          : events.result(result),
      heartbeat: (node, at) =>
        this.partitioned || this.dropHeartbeats ? undefined : events.heartbeat(node, at),
      lost: (id, node, reason) => events.lost(id, node, reason),
      health: (event) => events.health(event),
    });
  }

  async dispatch(bundle: Bundle, node: Node): Promise<void> {
    if (this.hangDispatches) return new Promise(() => undefined);
    if (!this.dropDispatches) return this.inner.dispatch(bundle, node);
    this.dropped.push(bundle.attemptId);
    setImmediate(
      () => void this.events?.lost(bundle.attemptId, node.metadata.name, "connection reset after send"),
    );
  }

  requestReport(node: Node): Promise<void> {
    return this.inner.requestReport(node);
  }

  stop(): Promise<void> {
    return this.inner.stop();
  }
}
