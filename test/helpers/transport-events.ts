/**
 * Records what a Transport tells the hub, with `until` to wait for a state without sleeping blindly.
 */
import type { TransportEvents, TransportHealth } from "../../src/hub/transport.js";
import type { AttemptResult, Report } from "../../src/model/generated.js";

/** Events that record everything; `onReport` and `onResult` let a test make the hub's handlers fail or stall. */
export function recordEvents(
  hooks: {
    onReport?: (report: Report) => void | Promise<void>;
    onResult?: (result: AttemptResult) => void | Promise<void>;
  } = {},
) {
  const recorded = {
    reports: [] as Report[],
    results: [] as AttemptResult[],
    heartbeats: [] as { node: string; at: Date }[],
    lost: [] as { attemptId: string; node: string; reason: string }[],
    healthEvents: [] as TransportHealth[],
  };
  const events: TransportEvents = {
    async report(report) {
      await hooks.onReport?.(report);
      recorded.reports.push(report);
    },
    async result(result) {
      await hooks.onResult?.(result);
      recorded.results.push(result);
    },
    heartbeat(node, at) {
      recorded.heartbeats.push({ node, at });
    },
    lost(attemptId, node, reason) {
      recorded.lost.push({ attemptId, node, reason });
    },
    health(event) {
      recorded.healthEvents.push(event);
    },
  };
  const until = async (check: () => boolean | Promise<boolean>, what: string, timeoutMs = 25_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { events, ...recorded, until };
}
