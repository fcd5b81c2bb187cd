/**
 * The bus observed: JetStream advisories and the server's client connect/disconnect events become
 * observations the hub hears as `TransportHealth`. `observeAdvisory` is pure (subject and body in,
 * observation out); the transport acts on what it returns. Every degraded reason has a way back to
 * recovered under the same reason and node: a later completed delivery, a reconnect, a repair.
 */
import type { TransportHealth } from "../../hub/transport.js";
import {
  HUB_REPORTS_CONSUMER_PREFIX,
  identities,
  LEGACY_HUB_REPORTS_CONSUMER,
  MAILBOX_STREAM,
  REPORTS_STREAM,
  TASKS_STREAM,
} from "./subjects.js";

/** Subjects the hub subscribes to for advisories and client events. */
export const ADVISORY_SUBJECTS = [
  "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>",
  "$JS.EVENT.ADVISORY.CONSUMER.DELETED.>",
  "$JS.EVENT.ADVISORY.STREAM.DELETED.>",
  "$SYS.ACCOUNT.*.CONNECT",
  "$SYS.ACCOUNT.*.DISCONNECT",
] as const;

const OURS = new Set([MAILBOX_STREAM, REPORTS_STREAM, TASKS_STREAM]);

/** What an advisory means for steward. */
export interface AdvisoryObservation {
  health: TransportHealth;
  /** A message that will never be delivered again. */
  exhausted?: { stream: string; seq: number };
  /** A stream or consumer of ours is gone: run the topology again, then recover `health`'s reason. */
  repair?: boolean;
}

interface AdvisoryBody {
  stream?: string;
  consumer?: string;
  stream_seq?: number;
  deliveries?: number;
  reason?: string;
  client?: { name?: string; user?: string; host?: string };
}

/** Maps one advisory to an observation, or undefined when it concerns nothing of ours. */
export function observeAdvisory(subject: string, body: AdvisoryBody): AdvisoryObservation | undefined {
  const tokens = subject.split(".");
  if (subject.startsWith("$SYS.ACCOUNT.")) return observeClient(tokens[3], body);
  const kind = tokens.slice(3, 5).join(".");
  const stream = body.stream ?? tokens[5] ?? "";
  if (!OURS.has(stream)) return undefined;
  const consumer = body.consumer ?? tokens[6];
  switch (kind) {
    case "CONSUMER.MAX_DELIVERIES": {
      const seq = body.stream_seq ?? 0;
      const what =
        consumer?.startsWith(HUB_REPORTS_CONSUMER_PREFIX) === true
          ? `a message from an agent (stream sequence ${seq}) was delivered to the hub ${body.deliveries} times and never recorded`
          : `message ${seq} of ${stream} was delivered to ${consumer} ${body.deliveries} times and never acknowledged`;
      return {
        health: {
          status: "degraded",
          reason: "MaxDeliveriesExceeded",
          message: `${what}; it will not be delivered again`,
        },
        exhausted: { stream, seq },
      };
    }
    case "CONSUMER.DELETED":
      // The hub deletes the single consumer of earlier versions itself (topology.ts).
      if (stream === REPORTS_STREAM && consumer === LEGACY_HUB_REPORTS_CONSUMER) return undefined;
      return {
        health: {
          status: "degraded",
          reason: "ConsumerDeleted",
          message: `consumer ${consumer} of ${stream} was deleted; recreating it`,
        },
        repair: true,
      };
    case "STREAM.DELETED":
      return {
        health: {
          status: "degraded",
          reason: "StreamDeleted",
          message: `stream ${stream} was deleted; recreating it (messages it held are gone)`,
        },
        repair: true,
      };
    default:
      return undefined;
  }
}

function observeClient(event: string | undefined, body: AdvisoryBody): AdvisoryObservation | undefined {
  const node = identities.nodeOfConnection(body.client?.name);
  if (node === undefined) return undefined;
  if (event === "CONNECT")
    return {
      health: {
        status: "recovered",
        node,
        reason: "AgentDisconnected",
        message: `agent of ${node} connected`,
      },
    };
  if (event !== "DISCONNECT") return undefined;
  // The server's reason says why ("Client Closed", "Slow Consumer (Write Deadline)", "Stale Connection").
  return {
    health: {
      status: "degraded",
      node,
      reason: "AgentDisconnected",
      message: `agent of ${node} disconnected from the server${body.reason ? `: ${body.reason}` : ""}`,
    },
  };
}
