/**
 * The local transport: the agent runs inside the hub's process (the embedded default behind
 * `steward up`). Each node gets its own agent, applying under `<root>/<node>/` with its state in
 * `<stateDir>/agents/<node>/`, so several local nodes on one machine never collide.
 *
 * Attempts and report requests run one at a time per node, in order; nodes run in parallel.
 * `dispatch` resolves as soon as the attempt is queued (accepted); the result and the fresh report
 * follow as events. Attempts that queue up for a node while it is busy are applied together, each
 * with its result, followed by one report (a burst of changes costs one look at the node). An agent that throws mid-apply loses the result: the hub hears `lost`.
 * `stopNode`/`startNode` stop and start a node's agent (its supervision and heartbeats), as a host
 * that goes down and comes back: while stopped, dispatches fail as transient and nothing is heard.
 */
import { join } from "node:path";
import { type Clock, systemClock } from "../hub/clock.js";
import { DispatchError, type Transport, type TransportEvents } from "../hub/transport.js";
import type { AgentReply, AttemptResult, Bundle, Node, Report } from "../model/generated.js";
import { refusedResult } from "./refused.js";

/** What the local transport needs of an agent (src/agent's Agent has this shape). */
export interface LocalAgent {
  apply(bundle: Bundle): Promise<AgentReply>;
  /**
   * Applies several attempts in order, then takes one report after all of them (src/agent's
   * Agent.applyAll). Each outcome is a result, or the error `apply` would have thrown for it alone.
   * Without it, the transport applies queued attempts one by one, with a report after each.
   */
  applyAll?(
    bundles: readonly Bundle[],
  ): Promise<{ outcomes: ({ result: AttemptResult } | { error: unknown })[]; report: Report }>;
  observe(): Promise<Report>;
  /** Long-running supervision: services, probes on their cadence, reports when something changes. */
  start?(onReport: (report: Report) => void | Promise<void>): void | Promise<void>;
  stop?(): void | Promise<void>;
}

export interface LocalTransportOptions {
  /** Each node applies under `<root>/<node>/`; without it, agents apply to the real system (one local node). */
  root?: string;
  /** Each node keeps its agent state in `<stateDir>/agents/<node>/`. */
  stateDir: string;
  /** Makes a node's agent; given the node's name, its root and its state directory. */
  agentFor: (node: string, paths: { root?: string; stateDir: string }, clock: Clock) => LocalAgent;
  clock?: Clock;
  /** How often each running node says it is alive (the fleet's heartbeat interval; read at each beat). */
  heartbeatIntervalMs?: number | (() => number);
}

interface LocalNode {
  name: string;
  agent: LocalAgent;
  /** The tail of this node's work chain: everything for a node runs in order. */
  tail: Promise<void>;
  /** Attempts dispatched and not yet taken up by the node's queue (`drainQueued`: a job will take them). */
  pending: Bundle[];
  drainQueued: boolean;
  running: boolean;
  cancelHeartbeat?: () => void;
}

export class LocalTransport implements Transport {
  readonly name = "local" as const;
  private events: TransportEvents | undefined;
  private readonly nodes = new Map<string, LocalNode>();
  private readonly stopped = new Set<string>();
  private readonly clock: Clock;
  private closing = false;

  constructor(private readonly options: LocalTransportOptions) {
    this.clock = options.clock ?? systemClock;
  }

  async start(events: TransportEvents): Promise<void> {
    this.events = events;
    this.closing = false;
  }

  async dispatch(bundle: Bundle, node: Node): Promise<void> {
    const local = await this.nodeFor(node, "dispatch");
    local.pending.push(bundle);
    if (local.drainQueued) return;
    local.drainQueued = true;
    this.enqueue(local, async (events) => {
      local.drainQueued = false;
      const bundles = local.pending.splice(0);
      if (local.agent.applyAll) {
        let applied: Awaited<ReturnType<NonNullable<LocalAgent["applyAll"]>>>;
        try {
          applied = await local.agent.applyAll(bundles);
        } catch (error) {
          // Nothing says what happened to any of them (the state lock, the report failed).
          for (const queued of bundles) await this.failed(local, queued, error, events, false);
          return;
        }
        const { outcomes, report } = applied;
        for (const [i, outcome] of outcomes.entries())
          if ("error" in outcome) await this.failed(local, bundles[i]!, outcome.error, events, false);
        // Handed over together (the hub records events in the order they come, see TransportEvents):
        // the results and the report are recorded in one go, and looked at once.
        await Promise.all([
          ...outcomes.flatMap((outcome) => ("result" in outcome ? [events.result(outcome.result)] : [])),
          events.report(report),
        ]);
        return;
      }
      for (const queued of bundles) {
        let reply: AgentReply;
        try {
          reply = await local.agent.apply(queued);
        } catch (error) {
          await this.failed(local, queued, error, events, true);
          continue;
        }
        await Promise.all([events.result(reply.result), events.report(reply.report)]);
      }
    });
  }

  /**
   * An attempt the agent did not apply: refused before anything was applied (a permanent failure,
   * with a report when `observe` says so), or lost mid-apply (the hub hears `lost`).
   */
  private async failed(
    local: LocalNode,
    bundle: Bundle,
    error: unknown,
    events: TransportEvents,
    observe: boolean,
  ): Promise<void> {
    if (!isRefusal(error)) {
      await events.lost(
        bundle.attemptId,
        local.name,
        `the local agent failed mid-apply: ${(error as Error).message}`,
      );
      return;
    }
    // The agent refused the bundle before applying anything: a permanent failure, not a lost result.
    await events.result(
      refusedResult(
        bundle,
        local.name,
        {
          reason: error.name && error.name !== "Error" ? error.name : "BundleRefused",
          message: error.message,
        },
        this.clock.now(),
      ),
    );
    if (observe) await events.report(await local.agent.observe());
  }

  async requestReport(node: Node): Promise<void> {
    const local = await this.nodeFor(node, "report");
    this.enqueue(local, async (events) => {
      await events.report(await local.agent.observe());
    });
  }

  /** Stops a node's agent, as a host going down: nothing is heard from it and dispatches fail. */
  async stopNode(name: string): Promise<void> {
    this.stopped.add(name);
    const local = this.nodes.get(name);
    if (!local) return;
    await this.halt(local);
  }

  /** Starts a stopped node's agent again: it registers with a heartbeat and a fresh report. */
  async startNode(node: Node): Promise<void> {
    this.stopped.delete(node.metadata.name);
    await this.requestReport(node);
  }

  /** Resolves when every node has finished the work queued so far. */
  async settled(): Promise<void> {
    await Promise.all([...this.nodes.values()].map((n) => n.tail));
  }

  async stop(): Promise<void> {
    this.closing = true;
    await Promise.all([...this.nodes.values()].map((local) => this.halt(local)));
    this.nodes.clear();
    this.events = undefined;
  }

  private async halt(local: LocalNode): Promise<void> {
    local.running = false;
    local.cancelHeartbeat?.();
    delete local.cancelHeartbeat;
    await local.tail;
    await local.agent.stop?.();
    this.nodes.delete(local.name);
  }

  private async nodeFor(node: Node, what: string): Promise<LocalNode> {
    const name = node.metadata.name;
    if (node.spec.transport !== "local")
      throw new DispatchError(
        `node ${name} uses transport ${node.spec.transport}, not local`,
        "permanent",
        "WrongTransport",
      );
    if (this.closing || !this.events)
      throw new DispatchError(
        `the local transport is not running (${what} for ${name})`,
        "transient",
        "TransportStopped",
      );
    if (this.stopped.has(name))
      throw new DispatchError(`node ${name} is stopped`, "transient", "NodeStopped");
    const existing = this.nodes.get(name);
    if (existing) return existing;
    const paths: { root?: string; stateDir: string } = {
      stateDir: agentStateDir(this.options.stateDir, name),
    };
    if (this.options.root !== undefined) paths.root = join(this.options.root, name);
    const local: LocalNode = {
      name,
      agent: this.options.agentFor(name, paths, this.clock),
      tail: Promise.resolve(),
      pending: [],
      drainQueued: false,
      running: true,
    };
    this.nodes.set(name, local);
    const events = this.events;
    await local.agent.start?.((report) => {
      if (local.running) this.enqueue(local, async (e) => e.report(report));
    });
    this.beat(local, events);
    return local;
  }

  /** Heartbeats: the agent runs in this process, so it is alive while the transport runs it. */
  private beat(local: LocalNode, events: TransportEvents): void {
    if (!local.running) return;
    void events.heartbeat(local.name, this.clock.now());
    const option = this.options.heartbeatIntervalMs ?? 15_000;
    const interval = typeof option === "function" ? option() : option;
    local.cancelHeartbeat = this.clock.schedule(interval, () => this.beat(local, events));
  }

  private enqueue(local: LocalNode, work: (events: TransportEvents) => Promise<void>): void {
    const events = this.events;
    if (!events) return;
    local.tail = local.tail.then(async () => {
      if (!local.running) return;
      try {
        await work(events);
      } catch (error) {
        // A handler that throws must not stop this node's queue.
        process.emitWarning(`local transport: ${local.name}: ${(error as Error).message}`);
      }
    });
  }
}

/**
 * Where a local node's agent keeps its state under the hub's state directory: `<stateDir>/agents/<node>`.
 * The in-process agent and `steward up --transport nats`'s agent processes share it, so either
 * finds the services the other started and the one-shots it ran.
 */
export function agentStateDir(stateDir: string, node: string): string {
  return join(stateDir, "agents", node);
}

/** An error the agent raises on purpose before it applies anything (an invalid bundle, the wrong node). */
function isRefusal(error: unknown): error is Error & { code: string } {
  const code = (error as { code?: unknown } | undefined)?.code;
  return error instanceof Error && typeof code === "string" && code.startsWith("E_");
}
