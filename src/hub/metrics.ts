/**
 * The hub's Prometheus metrics (prom-client), on a registry of its own so several hubs in one
 * process (tests) do not collide. Counts of intents, attempts and open conditions are read from the
 * store when scraped, so they are right after a restart; reconcile latency is measured in process.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { StoreReads } from "./store/store.js";

/** What a hub replica holds, as /healthz and /metrics say it. */
export interface ReplicaState {
  id: string;
  shards: number;
  nodes: number;
  leader: boolean;
  fenced: number;
}

export class HubMetrics {
  readonly registry = new Registry();
  readonly reconcileSeconds: Histogram<"outcome">;
  readonly reportsTotal: Counter;
  readonly dispatchesTotal: Counter<"transport" | "result">;

  constructor(store: StoreReads) {
    const registry = this.registry;
    new Gauge({
      name: "steward_intents",
      help: "Intents by state",
      labelNames: ["state"],
      registers: [registry],
      async collect() {
        const counts = await store.intents.countsByStatus();
        this.reset();
        for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
      },
    });
    new Gauge({
      name: "steward_attempts",
      help: "Attempts by outcome (queued, dispatched, succeeded, failed, ambiguous, lost, cancelled)",
      labelNames: ["outcome"],
      registers: [registry],
      async collect() {
        const counts = await store.attempts.countsByStatus();
        this.reset();
        for (const [outcome, n] of Object.entries(counts)) this.set({ outcome }, n);
      },
    });
    new Gauge({
      name: "steward_conditions_open",
      help: "Open conditions by type",
      labelNames: ["type"],
      registers: [registry],
      async collect() {
        const counts = await store.conditions.openCountsByType();
        this.reset();
        for (const [type, n] of Object.entries(counts)) this.set({ type }, n);
      },
    });
    this.reconcileSeconds = new Histogram({
      name: "steward_reconcile_duration_seconds",
      help: "Time to reconcile one instance, by the outcome decided",
      labelNames: ["outcome"],
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
      registers: [registry],
    });
    this.reportsTotal = new Counter({
      name: "steward_reports_total",
      help: "Full reports taken in",
      registers: [registry],
    });
    this.dispatchesTotal = new Counter({
      name: "steward_dispatches_total",
      help: "Attempts handed to a transport, by transport and result (accepted, transient, permanent, ambiguous)",
      labelNames: ["transport", "result"],
      registers: [registry],
    });
  }

  /** Gauges of what this replica holds (counts, never lists: a replica may own 100,000 nodes). */
  watchReplica(state: () => ReplicaState): void {
    const gauge = (name: string, help: string, value: (s: ReplicaState) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(value(state()));
        },
      });
    gauge("steward_replica_nodes", "Nodes this hub replica owns", (s) => s.nodes);
    gauge("steward_replica_shards", "Node shards whose lease this hub replica holds", (s) => s.shards);
    gauge("steward_replica_leader", "1 while this hub replica holds the sync lease", (s) =>
      s.leader ? 1 : 0,
    );
    gauge(
      "steward_replica_fenced_total",
      "Units of work refused because this replica no longer held their nodes' leases",
      (s) => s.fenced,
    );
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
