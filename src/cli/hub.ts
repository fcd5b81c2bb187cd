/**
 * `steward hub`: the long-running hub — the syncer (interval, webhook, nudges), the reconciler, the
 * transports this hub runs, commit statuses, and the HTTP server (healthz, metrics, webhook,
 * revisions). `HubRuntime` wires those parts together; `steward up` runs the same runtime with the
 * embedded defaults. This file is the only place that knows all of them.
 */
import { join, resolve } from "node:path";
import { Command } from "commander";
import type { Logger } from "pino";
import type { StatusFlags } from "../status/settings.js";
import { NATS_HUB_FLAGS } from "../transport/nats/flags.js";
import { SSH_HUB_FLAGS } from "../transport/ssh/flags.js";
import { compactWhenIdle, keepHeapNearLive } from "./heap.js";
import type { HubFlags } from "./hub-flags.js";
import type { StatePaths } from "./hub-state.js";
import type { CliIo, GlobalOptions } from "./io.js";
import { addStatusFlags } from "./status-flags.js";

export interface HubRuntimeOptions {
  paths: StatePaths;
  /** The fleet repository: a local path or an http(s) URL. */
  repo: string;
  branch: string;
  /** Local nodes apply under `<root>/<node>/`; without it, to the real system. */
  root?: string;
  /** `HOST:PORT` for the HTTP server (port 0: any free port). */
  listen: string;
  syncIntervalMs: number;
  /** The webhook's shared secret (from the environment, never a flag). */
  webhookSecret?: string;
  statusFlags: StatusFlags;
  logger: Logger;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Attempt lease (how long a result may take before the attempt is ambiguous). */
  leaseMs?: number;
  /** How long a replica's leases last without renewal, when several hubs share a PostgreSQL store. */
  replicaLeaseMs?: number;
  /** Transports besides the local one (SSH, NATS), built by the command from its flags. */
  transports?: import("../hub/transport.js").Transport[];
  /** A bus for conditions and tasks (NATS: `hubBusOf` of the NATS transport). */
  bus?: import("../hub/bus.js").HubBus;
  /** `steward up --transport nats`: the local nodes run as agent processes on a local nats-server. */
  localFleet?: import("../transport/nats/runtime.js").LocalFleetSetup;
  /** Where the local fleet's agents' JSON log lines go as they are (the log `logger` writes to). */
  agentLog?: (line: string) => void;
  /** Who may act in the web view (`--operator-tokens`, read by the command); none: read-only. */
  operators?: ReadonlyMap<string, import("../hub/web/operators.js").Operator>;
  /**
   * Called with the declared nodes once the first sync recorded them, before any agent is started
   * or dispatched to (`steward up` installs the example's demo identities into its local agents).
   */
  beforeAgents?: (nodes: readonly import("../hub/records.js").NodeRecord[]) => Promise<void> | void;
}

/** Where replicas ask the one holding the sync lease to sync now. */
const SYNC_CHANNEL = "steward_sync";

/** Every part of a running hub, started in order and stopped in reverse. */
export class HubRuntime {
  store!: import("../hub/store/store.js").Store;
  hub!: import("../hub/hub.js").Hub;
  http!: import("../hub/http.js").HubHttp;
  syncer!: import("../repo/syncer.js").Syncer;
  private loop: import("../repo/loop.js").SyncLoop | undefined;
  private publisher: import("../status/publisher.js").StatusPublisher | undefined;
  private local: import("../transport/local.js").LocalTransport | undefined;
  private fleet: import("../transport/nats/runtime.js").LocalFleetRuntime | undefined;
  private readonly analyses: import("../model/load.js").AnalysisCache = new Map();
  /** The Node documents this process recorded last (served.ts): unchanged ones are not compared again. */
  private readonly recordedNodes: import("../hub/desired.js").RecordedNodes = { nodes: new Map() };
  /** This hub as one of several sharing a PostgreSQL store (none on SQLite). */
  replica: import("../hub/replicas/replica.js").Replica | undefined;
  private readonly declarationListeners = new Set<
    (changes: import("../hub/desired.js").DeclarationChanges) => void
  >();

  constructor(readonly options: HubRuntimeOptions) {}

  /** Transports this hub runs (the others' nodes are listed, never dispatched to). */
  get transports(): string[] {
    return this.hub.transportNames;
  }

  /** Opens the state, syncs once, starts reconciling and serving. Returns the first sync's outcome. */
  async start(): Promise<import("../repo/syncer.js").SyncOutcome | Error> {
    const { paths, logger } = this.options;
    const { openStateStore } = await import("./hub-state.js");
    const { Syncer } = await import("../repo/syncer.js");
    const { parseLocation, credentialsFromEnv, describeLocation } = await import("../repo/git.js");
    const { LocalTransport } = await import("../transport/local.js");
    const { Agent } = await import("../agent/agent.js");
    const { Hub } = await import("../hub/hub.js");

    this.store = await openStateStore(paths);
    const store = this.store;
    // Replicas take their leases first: only the sync lease's holder syncs.
    const takeovers: import("../hub/replicas/replica.js").LeaseChange[] = [];
    if (store.signals) {
      const { Replica } = await import("../hub/replicas/replica.js");
      const { shardOf } = await import("../model/shards.js");
      const { systemClock } = await import("../hub/clock.js");
      this.replica = new Replica({
        store,
        clock: systemClock,
        log: logger.child({ component: "replica" }),
        leaseMs: this.options.replicaLeaseMs ?? 10_000,
      });
      store.useFencing(this.replica);
      const replica = this.replica;
      replica.countNodesWith(
        async (shards) =>
          (await store.nodes.list()).filter((n) => !n.removedAt && shards.has(shardOf(n.name))).length,
      );
      const early = replica.onChange((change) => {
        takeovers.push(change);
      });
      await replica.start();
      this.stopBuffering = early;
    }
    const credentials = credentialsFromEnv(this.options.env);
    this.syncer = new Syncer({
      store: store.generations,
      source: parseLocation(this.options.repo, this.options.cwd),
      branch: this.options.branch,
      cacheDir: paths.git,
      log: logger.child({ component: "syncer" }),
      ...(credentials ? { credentials } : {}),
    });
    this.local = new LocalTransport({
      ...(this.options.root ? { root: this.options.root } : {}),
      stateDir: paths.dir,
      agentFor: (node, agentPaths, clock) =>
        new Agent({
          node,
          stateDir: agentPaths.stateDir,
          clock: () => clock.now(),
          ...(agentPaths.root ? { root: agentPaths.root } : {}),
        }),
      heartbeatIntervalMs: () => this.heartbeatIntervalMs,
    });

    // The first sync comes before the hub starts, so statuses know the fleet's settings.
    let first: import("../repo/syncer.js").SyncOutcome | Error;
    try {
      first = this.syncs ? await this.syncer.sync() : new Error("another hub replica syncs the repository");
    } catch (error) {
      first = error as Error;
      logger.error({ err: error }, "the first sync failed; retrying in the background");
    }
    const declared = this.syncs ? await this.recordDeclarations() : undefined;
    await this.readFleetSettings();
    await this.options.beforeAgents?.(await store.nodes.list());
    this.publisher = await this.statusPublisher();
    if (this.options.localFleet) {
      const { startLocalFleetRuntime } = await import("../transport/nats/runtime.js");
      const root = this.options.root;
      this.fleet = await startLocalFleetRuntime(this.options.localFleet, {
        localNodes: (await store.nodes.list()).filter((n) => n.transport === "local").map((n) => n.name),
        rootOf: (node) => (root ? join(root, node) : undefined),
        stateDir: paths.dir,
        log: logger.child({ component: "nats" }),
        ...(this.options.agentLog ? { agentLog: this.options.agentLog } : {}),
        onTaskEvent: (event) => this.recordTaskEvent(event),
      });
    }
    const replica = this.replica;
    const forwarder =
      replica && store.signals
        ? new (await import("../hub/replicas/forward.js")).Forwarder(store.signals, logger)
        : undefined;
    this.hub = new Hub({
      store,
      ...(replica && forwarder
        ? {
            ownership: {
              owns: (node: string) => replica.owns(node),
              get leader() {
                return replica.leader;
              },
              forward: (keys: readonly string[]) => forwarder.forward(keys),
              fencedOut: () => replica.fencedOut(),
              shards: () => replica.heldShards,
              state: () => replica.state(),
            },
          }
        : {}),
      transports: [this.fleet?.transport ?? this.local, ...(this.options.transports ?? [])],
      logger: logger.child({ component: "hub" }),
      ...(this.options.leaseMs ? { timing: { leaseMs: this.options.leaseMs } } : {}),
      ...(this.publisher ? { statusSink: this.publisher } : {}),
      ...(this.options.bus || this.fleet ? { bus: this.options.bus ?? this.fleet?.bus } : {}),
    });
    await this.hub.start();
    if (declared) await this.hub.declarationsChanged(declared);
    if (replica && forwarder) {
      const hub = this.hub;
      await forwarder.listen((keys) =>
        hub.enqueue(keys.filter((key) => hub.owns(key.slice(key.lastIndexOf("@") + 1)))),
      );
      // What changed while the hub started is taken in first, then every change as it comes.
      this.stopBuffering?.();
      replica.onChange((change) => this.leasesChanged(change));
      for (const change of takeovers.splice(0)) await this.leasesChanged(change);
      // A webhook or nudge another replica received: the syncing one syncs.
      await store.signals!.listen(SYNC_CHANNEL, () => this.loop?.trigger());
    }

    const { startHubHttp } = await import("../hub/http.js");
    const { startSyncLoop } = await import("../repo/loop.js");
    const webhook = this.options.webhookSecret
      ? (await import("../repo/webhook.js")).createWebhookHandler({
          secret: this.options.webhookSecret,
          branch: this.options.branch,
          onPush: () => this.syncSoon(),
        })
      : undefined;
    const { listenAddress } = await import("./hub-flags.js");
    const { host, port } = listenAddress("--listen", this.options.listen);
    const { randomBytes } = await import("node:crypto");
    const operatorToken = randomBytes(32).toString("base64url");
    const { loadAgentArtifact } = await import("../transport/ssh/artifact.js");
    let agentFile: import("../transport/ssh/artifact.js").AgentArtifact | undefined;
    this.http = await startHubHttp({
      hub: this.hub,
      host,
      port,
      // Read on the first request, and kept: the file a running hub serves does not change under it.
      agentFile: () => {
        agentFile ??= loadAgentArtifact();
        return agentFile;
      },
      web: {
        ...(this.options.operators ? { operators: this.options.operators } : {}),
        rollout: (await import("../hub/web/rollout.js")).rolloutControlOf(this.hub),
      },
      ...(webhook ? { webhook } : {}),
      onNudge: (scope) => {
        if (scope.sync) this.syncSoon();
        // Another process (`steward sync`) may have written a revision: its declarations first.
        else void this.takeIn();
      },
      operatorToken,
      onSync: ({ acceptRewrite }) => {
        if (!this.syncs)
          return Promise.reject(
            new Error(
              "this hub replica does not sync the repository: the one holding the sync lease does (steward get replicas); ask it",
            ),
          );
        if (!this.loop) return Promise.reject(new Error("the hub is still starting: ask again"));
        return this.loop.syncNow({ acceptRewrite });
      },
    });
    this.startLoop = () => {
      this.loop ??= startSyncLoop({
        // A replica syncs only while it holds the sync lease (a paused one may not, once resumed).
        syncer: {
          sync: async (options) => {
            if (!this.syncs) await this.replica?.renewNow();
            if (!this.syncs) throw new Error("this hub replica no longer holds the sync lease");
            return this.syncer.sync(options);
          },
        },
        intervalMs: this.options.syncIntervalMs,
        // Up to date too: another process may have synced a revision, and a fetch that failed before
        // may work again (its condition resolves).
        onOutcome: () => void this.takeIn(),
        onError: (error, failures, retryInMs) => {
          logger.warn({ err: error, failures, retryInMs }, "sync failed; retrying in %d ms", retryInMs);
          // The syncer recorded a fetch-failed event: it becomes a condition now, not at the next success.
          this.hub
            .takeInRevisions()
            .catch((failure: unknown) =>
              logger.error({ err: failure }, "taking in the sync's failure failed"),
            );
        },
      });
    };
    if (this.syncs) this.startLoop();
    this.replica?.serveAt(this.http.url);
    // Recorded once everything answers, so a command that finds this file finds the hub ready.
    const { writeHubFile } = await import("./hub-state.js");
    writeHubFile(paths, {
      pid: process.pid,
      url: this.http.url,
      startedAt: new Date().toISOString(),
      transports: this.transports,
      token: operatorToken,
      repo: describeLocation(parseLocation(this.options.repo, this.options.cwd)),
      branch: this.options.branch,
      store: this.store.location,
    });
    return first;
  }

  /** Whether this hub syncs the repository: the only hub, or the replica holding the sync lease. */
  private get syncs(): boolean {
    return this.replica?.leader ?? true;
  }

  private startLoop: (() => void) | undefined;
  /** Ends the buffering of lease changes made while the hub was starting. */
  private stopBuffering: (() => void) | undefined;

  /** Syncs soon: here, or (another replica syncing) by asking the one that does. */
  private syncSoon(): void {
    if (this.syncs || !this.store.signals) this.loop?.trigger();
    else
      this.store.signals
        .send(SYNC_CHANNEL, "")
        .catch((error: unknown) =>
          this.options.logger.warn({ err: error }, "asking the syncing replica failed"),
        );
  }

  /**
   * What this replica holds changed: nodes taken over (from a replica gone or giving them up) are
   * registered and reconciled; the sync lease taken starts the sync loop, lost stops it.
   */
  private async leasesChanged(change: import("../hub/replicas/replica.js").LeaseChange): Promise<void> {
    const { shardOf } = await import("../model/shards.js");
    await this.hub.shardsChanged();
    if (change.gained.length > 0) {
      const from = new Map<number, string | undefined>(change.gained.map((g) => [g.shard, g.from]));
      const byFrom = new Map<string, string[]>();
      for (const node of await this.store.nodes.list()) {
        const shard = shardOf(node.name);
        if (node.removedAt || !from.has(shard)) continue;
        const key = from.get(shard) ?? "";
        byFrom.set(key, [...(byFrom.get(key) ?? []), node.name]);
      }
      for (const [previous, names] of byFrom)
        await this.hub.nodesGained(names, previous ? { from: previous } : {});
    }
    if (change.leader === true) {
      this.startLoop?.();
      void this.takeIn();
    } else if (change.leader === false) {
      const loop = this.loop;
      this.loop = undefined;
      await loop?.stop();
    }
  }

  /** Calls `listener` whenever the served revision's declarations changed after start (nodes, policies). */
  onDeclarations(listener: (changes: import("../hub/desired.js").DeclarationChanges) => void): () => void {
    this.declarationListeners.add(listener);
    return () => this.declarationListeners.delete(listener);
  }

  /**
   * A task agent's claim or resolution from the bus, recorded by the hub. The bus delivers none
   * before the hub starts its transports; one that comes anyway is not acknowledged and comes again.
   */
  recordTaskEvent(event: import("../hub/bus.js").TaskEvent): Promise<void> {
    if (!this.hub) return Promise.reject(new Error("the hub has not started yet"));
    return this.hub.recordTaskEvent(event);
  }

  /**
   * What the syncer recorded, taken in by the hub: the served revision's declarations first, then
   * its generations (the hub takes in no generation before its revision's declarations), then what
   * the declarations changed. Whoever synced it: this hub's loop or `steward sync`.
   */
  private async takeIn(): Promise<void> {
    // The replica that syncs records the declarations and takes revisions in, once for all.
    if (!this.syncs) return;
    try {
      const changes = await this.recordDeclarations();
      if (changes) await this.readFleetSettings();
      await this.hub.takeInRevisions();
      if (changes) {
        await this.hub.declarationsChanged(changes);
        for (const listener of this.declarationListeners) listener(changes);
      }
    } catch (error) {
      this.options.logger.error({ err: error }, "recording the revision's declarations failed");
    }
  }

  /** Records the served revision's declarations (nodes, policies, fleet settings) when it changed. */
  private async recordDeclarations(): Promise<import("../hub/desired.js").DeclarationChanges | undefined> {
    const { recordServedRevision } = await import("./served.js");
    return recordServedRevision(this.store, this.syncer, this.analyses, new Date(), this.recordedNodes);
  }

  /** The commit status publisher for the fleet's status settings (git notes by default). */
  private async statusPublisher(): Promise<import("../status/publisher.js").StatusPublisher | undefined> {
    const { effectiveStatusSettings, createStatusWriters } = await import("../status/settings.js");
    const { StatusPublisher } = await import("../status/publisher.js");
    const fs = await import("node:fs");
    const settings = effectiveStatusSettings(
      (await this.store.desired.fleetSettings())?.status,
      this.options.statusFlags,
    );
    const writers = createStatusWriters(settings, {
      env: this.options.env,
      gitnotes: { fs, gitdir: this.syncer.repository.gitdir },
    });
    if (writers.length === 0) return undefined;
    const logger = this.options.logger;
    return new StatusPublisher({
      store: this.store,
      writers,
      onHealth: (health) => {
        this.hub
          ?.statusHealth(health)
          .catch((error: unknown) =>
            logger.error({ err: error }, "recording a status destination's health failed"),
          );
      },
      onError: (error) => logger.error({ err: error }, "commit statuses: unexpected error"),
    });
  }

  /** Stops everything, in reverse order; durable state stays for the next start. */
  async stop(): Promise<void> {
    await this.loop?.stop();
    await this.http?.close();
    await this.hub?.stop();
    await this.replica?.stop();
    await this.fleet?.stop();
    if (this.publisher) {
      // The last statuses (a converged `steward up --once`, say) are worth a short wait; a forge that
      // is down keeps them as desired, posted at the next start.
      const publisher = this.publisher;
      await Promise.race([
        publisher.flushNow(),
        new Promise((resolve) => setTimeout(resolve, 5_000).unref()),
      ]);
      publisher.close();
    }
    const { removeHubFile } = await import("./hub-state.js");
    removeHubFile(this.options.paths, process.pid);
    this.syncer?.close();
    await this.store?.close();
  }

  /** How often local agents send a heartbeat: the fleet's setting (read when the declarations change). */
  private heartbeatIntervalMs = 15_000;

  private async readFleetSettings(): Promise<void> {
    this.heartbeatIntervalMs = (await this.store.desired.fleetSettings())?.heartbeat.intervalMs ?? 15_000;
  }
}

/** The operators of `--operator-tokens FILE` (none without the flag); refuses a file others can read. */
export async function operatorsFlag(
  file: string | undefined,
  cwd: string,
): Promise<ReadonlyMap<string, import("../hub/web/operators.js").Operator> | undefined> {
  if (!file) return undefined;
  const { readOperatorTokens } = await import("../hub/web/operators.js");
  return readOperatorTokens(resolve(cwd, file));
}

/** Help of `--operator-tokens`, shared by `steward hub` and `steward up`. */
export const OPERATOR_TOKENS_HELP =
  "who may act in the web view: a file of `name token` lines, mode 0600 (without it the view is read-only)";

/** Waits for SIGINT or SIGTERM. */
export function untilSignal(): Promise<string> {
  return new Promise((resolveSignal) => {
    const done = (signal: string) => {
      process.off("SIGINT", done);
      process.off("SIGTERM", done);
      resolveSignal(signal);
    };
    process.on("SIGINT", done);
    process.on("SIGTERM", done);
  });
}

/**
 * `steward hub`: checks every flag (hub-flags.ts) and that no hub runs on the state directory
 * yet, then runs the hub until SIGINT or SIGTERM.
 */
export function hubCommand(io: CliIo, globals: () => GlobalOptions, _exit: (code: number) => void): Command {
  const command = new Command("hub")
    .description(
      "run the hub: sync the fleet repo, reconcile, dispatch, serve the web view, /healthz, /metrics and /webhook",
    )
    .option(
      "--repo <path|url>",
      "the fleet repository: a local clone or an http(s) URL (default: this directory, which must be one)",
    )
    .option("--branch <name>", "the tracked branch", "main")
    .option("--root <dir>", "local nodes apply under <dir>/<node>/ (default: the real system)")
    .option(
      "--listen <host:port>",
      "HTTP address for healthz, metrics, webhook and revisions",
      "127.0.0.1:7117",
    )
    .option("--sync-interval <duration>", "how often to fetch the fleet repo", "1m")
    .option("--webhook-secret-env <name>", "environment variable holding the webhook's shared secret")
    .option("--lease <duration>", "how long an attempt's result may take before it is ambiguous", "10m")
    .option(
      "--replica-lease <duration>",
      "with several hubs on one PostgreSQL store: how long a hub's hold on its nodes lasts unrenewed; the others take them over after it",
      "10s",
    )
    .option("--operator-tokens <file>", OPERATOR_TOKENS_HELP);
  for (const [flag, help] of SSH_HUB_FLAGS) command.option(flag, help);
  for (const [flag, help] of NATS_HUB_FLAGS) command.option(flag, help);
  addStatusFlags(command);
  return command.action(async (options: HubFlags) => {
    keepHeapNearLive();
    const { statePaths, findRunningHub, HubAlreadyRunningError } = await import("./hub-state.js");
    const { hubSettings } = await import("./hub-flags.js");
    const paths = statePaths(io, globals());
    // A token file others can read is refused first: it is a secret, whatever else is wrong.
    const operators = await operatorsFlag(options.operatorTokens, io.cwd);
    const settings = await hubSettings(options, { cwd: io.cwd, env: io.env });
    const running = await findRunningHub(paths);
    if (running.kind === "running") throw new HubAlreadyRunningError(paths, running.hub);
    const pino = (await import("pino")).default;
    const { createSshTransport } = await import("../transport/ssh/index.js");
    const logger = pino({ level: io.env.STEWARD_LOG_LEVEL ?? "info" });
    const ssh = createSshTransport({ ...settings.ssh, logger: logger.child({ component: "ssh" }) });
    const natsHub = settings.nats ? await import("../transport/nats/hub.js") : undefined;
    let runtime: HubRuntime | undefined;
    const nats =
      natsHub && settings.nats
        ? natsHub.createNatsTransport({
            ...settings.nats,
            log: logger.child({ component: "nats" }),
            onTaskEvent: (event) =>
              runtime ? runtime.recordTaskEvent(event) : Promise.reject(new Error("the hub is not running")),
          })
        : undefined;
    runtime = new HubRuntime({
      paths,
      repo: settings.repo,
      branch: settings.branch,
      ...(settings.root ? { root: settings.root } : {}),
      listen: `${settings.listen.host.includes(":") ? `[${settings.listen.host}]` : settings.listen.host}:${settings.listen.port}`,
      syncIntervalMs: settings.syncIntervalMs,
      statusFlags: options,
      logger,
      env: io.env,
      cwd: io.cwd,
      leaseMs: settings.leaseMs,
      replicaLeaseMs: settings.replicaLeaseMs,
      transports: [ssh, ...(nats ? [nats] : [])],
      ...(natsHub && nats ? { bus: natsHub.hubBusOf(nats) } : {}),
      ...(settings.webhookSecret ? { webhookSecret: settings.webhookSecret } : {}),
      ...(operators ? { operators } : {}),
    });
    let enrolment: import("./hub-enrolment.js").HubEnrolment | undefined;
    let stopCompacting: (() => void) | undefined;
    try {
      await runtime.start();
      const hub = runtime.hub;
      stopCompacting = compactWhenIdle({
        idle: () => hub.activity.queued === 0 && hub.activity.relaying === 0 && hub.activity.handling === 0,
      });
      // The process's own figures beside steward's (resident memory, heap, CPU, event-loop lag,
      // garbage collection), as an operator of any Node service expects on /metrics.
      const { collectDefaultMetrics } = await import("prom-client");
      collectDefaultMetrics({ register: runtime.hub.metrics.registry });
      if (settings.natsIssuer && nats && settings.nats) {
        const { HubEnrolment } = await import("./hub-enrolment.js");
        enrolment = new HubEnrolment({
          hub: runtime.hub,
          store: runtime.store,
          transport: nats,
          issuer: settings.natsIssuer,
          servers: settings.nats.servers ?? "nats://127.0.0.1:4222",
          ...(settings.nats.tls ? { tls: settings.nats.tls } : {}),
          logger: logger.child({ component: "enrolment" }),
        });
        await enrolment.start();
        const admitted = enrolment;
        runtime.onDeclarations((changes) => admitted.declarationsChanged(changes));
      }
      io.stderr(
        `steward hub: serving ${runtime.http.url} (transports: ${runtime.transports.join(", ")}${enrolment ? "; admitting the hosts Git declares" : ""}); the fleet: ${runtime.http.url}/ (${operators ? `${operators.size} operator${operators.size === 1 ? "" : "s"} may act` : "read-only"})\n`,
      );
      await untilSignal();
    } finally {
      stopCompacting?.();
      await enrolment?.stop();
      await runtime.stop();
    }
  });
}
