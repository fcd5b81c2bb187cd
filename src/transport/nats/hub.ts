/**
 * The hub's side of the NATS transport: `createNatsTransport(options)` implements the Transport port
 * (src/hub/transport.ts) over JetStream.
 *
 * - dispatch posts the bundle to the node's mailbox (mailbox.ts): `steward.attempt.<node>.<assignment>`
 *   with the attempt id as `Nats-Msg-Id`, so re-publishing after a crash is de-duplicated by the
 *   stream, which keeps only the newest attempt per instance: an offline node later sees the
 *   current generation only;
 * - reports and results come from the durable consumers `hub-shard-<N>` of STEWARD_REPORTS, one per
 *   shard of nodes (a hub replica consumes the shards it holds: `consumeShards`), handled in order
 *   per node and acknowledged only after the hub's handler returned (a hub that dies before
 *   recording gets them again; one that no longer owns the node naks it for the owner);
 * - node heartbeats reach the hub as `heartbeat` events; besides, each sender (node, or instance with
 *   a running service) is watched with one timer reset by each beat (SilenceWatch): `silentSince`,
 *   `silent()` and `onSilence` say who is silent, and `heartbeat.asHealth` turns it into `health`
 *   events (reasons `NodeSilent`, `InstanceSilent`);
 * - advisories, client disconnects and the hub's own connection state arrive as `health` events;
 * - on start, the last report of every node is read from KV `steward-observed` and delivered as a
 *   `report`, so the last known state survives any restart of hub, agent or server.
 */
import { setTimeout as delay } from "node:timers/promises";
import {
  type ConsumerMessages,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import {
  ClosedConnectionError,
  type NatsConnection,
  NoRespondersError,
  PermissionViolationError,
  type Subscription,
  TimeoutError,
} from "@nats-io/transport-node";
import type { HubBus } from "../../hub/bus.js";
import {
  DispatchError,
  NotOwnedError,
  type Transport,
  type TransportEvents,
  type TransportHealth,
  type TransportName,
} from "../../hub/transport.js";
import type { AttemptResult, Bundle, Node, Report } from "../../model/generated.js";
import { everyShard, shardOf } from "../../model/shards.js";
import { ADVISORY_SUBJECTS, observeAdvisory } from "./advisories.js";
import { bucketEntries } from "./bucket.js";
import { ConditionMirror } from "./conditions.js";
import { causedBy, connectNats, type NatsTls, untilServerAnswers } from "./connect.js";
import { type HeartbeatKey, parseHeartbeat, SilenceWatch } from "./heartbeats.js";
import { HeldMessages } from "./held.js";
import { type NatsLog, silentLog } from "./log.js";
import { MailboxPoster, readMailbox } from "./mailbox.js";
import {
  HUB_TASK_EVENTS_CONSUMER,
  hubReportsConsumer,
  identities,
  MAILBOX_STREAM,
  OBSERVED_BUCKET,
  REPORTS_STREAM,
  subjects,
  TASKS_STREAM,
} from "./subjects.js";
import { publishTask, type TaskEvent, type TaskMessage } from "./tasks.js";
import { ensureTopology, SHARD_ACK_WAIT_MS, type TopologyOptions } from "./topology.js";

export interface NatsTransportOptions {
  /** Server URL(s); ignored when `connection` is given. */
  servers?: string | string[];
  /** The hub's credentials file (from `steward nats config`). */
  creds?: string;
  tls?: NatsTls;
  /** An open connection to use instead (not closed by `stop`). */
  connection?: NatsConnection;
  /** Nodes expected on the bus: their heartbeats are watched from start. */
  nodes?: string[];
  /**
   * The transport name the hub routes by: nodes declaring it are dispatched here, others are refused
   * as `WrongTransport`. Default `nats`; `steward up --transport nats` passes `local`, so the
   * example's local nodes run as agent processes on the bus.
   */
  name?: TransportName;
  heartbeat?: {
    /** Interval assumed for a node that has not beaten yet; default 5,000 ms (the agents' default). */
    intervalMs?: number;
    /** Beats a sender may miss before it is silent; default 3. */
    missedBeats?: number;
    /**
     * Also deliver silence and its end as `health` events (reasons `NodeSilent`, `InstanceSilent`).
     * Default false: the hub raises NodeSilent from `heartbeat` events itself, and `onSilence`
     * carries the transport's own signal.
     */
    asHealth?: boolean;
  };
  /** Called when a node, or an instance's service, falls silent and when it beats again. */
  onSilence?: (change: SilenceChange) => void;
  /** How long to wait for the stream to acknowledge a dispatch (tried 3 times); default 2,000 ms. */
  publishTimeoutMs?: number;
  /** How long `requestReport` waits for the agent to accept; default 2,000 ms. */
  requestTimeoutMs?: number;
  /** Claims and resolutions of tasks; without it the hub does not consume them (they wait in the stream). */
  onTaskEvent?: (event: TaskEvent) => void | Promise<void>;
  clock?: () => Date;
  log?: NatsLog;
  /** How long JetStream may stay silent at start before the server is taken to run without it. */
  jetStreamGraceMs?: number;
  /** Replicas of steward's streams and buckets; default 3 on a cluster, 1 on a single server (topology.ts). */
  replicas?: number;
  /** How long a dispatch waits for a stream without a leader (a cluster electing one); default 15,000 ms. */
  electionGraceMs?: number;
}

/** A node (or an instance's service, with `assignment`) fell silent or was heard again. */
export interface SilenceChange {
  status: "silent" | "heard";
  node: string;
  assignment?: string;
  /** Its last beat before the silence (or when watching began, if it never beat). */
  since: Date;
}

/** The NATS transport with what only the bus offers besides the Transport port. */
export interface NatsTransport extends Transport {
  /** Consumes the reports and results of these shards only (a hub replica's); by default every shard. */
  consumeShards(shards: ReadonlySet<number>): Promise<void>;
  /** The connection (after `start`). */
  readonly connection: NatsConnection;
  /** Open conditions mirrored into KV `steward-conditions` (after `start`). */
  readonly conditions: ConditionMirror;
  /** Since when a node (or an instance's service) has been silent; undefined while it beats. */
  silentSince(node: string, assignment?: string): Date | undefined;
  /** Every silent node and instance with its since. */
  silent(): { node: string; assignment?: string; since: Date }[];
  /** Publishes a task for the task agents' queue group. */
  publishTask(task: TaskMessage): Promise<void>;
  /** The last report of every node as KV `steward-observed` holds it. */
  lastReports(): Promise<Report[]>;
  /** Starts watching the node's heartbeat. */
  addNode(node: string): Promise<void>;
  /** What the server says about steward's streams and storage. */
  busState(): Promise<BusState>;
  /** What the node's mailbox holds: the newest attempt of each of its instances, oldest first. */
  mailbox(node: string): Promise<{ assignment: string; attemptId: string; generation: number }[]>;
}

/** The bus as the server sees it (JSON-serialisable): for `steward status`, metrics and the log. */
export interface BusState {
  streams: { name: string; messages: number; bytes: number }[];
  /** JetStream storage used by the account, and its limit (-1: none). */
  storage: { usedBytes: number; limitBytes: number };
}

/** How long one pull request of the hub's consumers waits on the server; bounds the pause after a server restart. */
const PULL_EXPIRES_MS = 3_000;

/** Messages one shard's consumer pulls at a time (a hub consuming all 64 holds at most 64 × this). */
const SHARD_PULL_BATCH = 128;

/** When a message of a shard this replica no longer holds comes again (to whichever holds it then). */
const NOT_OWNED_NAK_MS = 250;

/** Share of the account's storage limit past which the bus is degraded (`StorageNearLimit`). */
const STORAGE_WARNING_SHARE = 0.9;

/** How long a problem the client reports without an end (slow consumer, server error) must be absent. */
const QUIET_MS = 60_000;

/**
 * Never delivered again. Without a reason: nats-server 2.9.10 takes `+TERM <reason>` for no
 * acknowledgement at all and hands the message out again until its deliveries run out (tested).
 */
function terminate(msg: JsMsg): void {
  msg.term();
}

/** Creates the hub's NATS transport; nothing happens until `start`. */
export function createNatsTransport(options: NatsTransportOptions): NatsTransport {
  return new NatsHubTransport(options);
}

/**
 * The hub's bus (src/hub/bus.ts) on this transport: open conditions mirrored to KV
 * `steward-conditions`, tasks published on `steward.tasks`. Usable once the transport has started
 * (the hub starts its transports first); task events come back through `onTaskEvent`.
 */
export function hubBusOf(transport: NatsTransport): HubBus {
  return {
    conditions: {
      put: (condition) => transport.conditions.put({ ...condition }),
      resolve: (id) => transport.conditions.resolve(id),
      replaceAll: (open) => transport.conditions.replaceAll(open.map((condition) => ({ ...condition }))),
    },
    tasks: { publish: (task) => transport.publishTask(task) },
  };
}

const DEFAULT_INTERVAL_MS = 5_000;

class NatsHubTransport implements NatsTransport {
  readonly name: TransportName;
  private nc: NatsConnection | undefined;
  private js: JetStreamClient | undefined;
  private jsm: JetStreamManager | undefined;
  private poster: MailboxPoster | undefined;
  private mirror: ConditionMirror | undefined;
  private events: TransportEvents | undefined;
  /** Events handed to the hub and not yet recorded: `stop` waits for them. */
  private readonly handing = new Set<Promise<unknown>>();
  /** Agent messages being recorded, kept from redelivery meanwhile (see HeldMessages). */
  private readonly held = new HeldMessages(SHARD_ACK_WAIT_MS);
  private readonly subscriptions: Subscription[] = [];
  private readonly stoppers: (() => Promise<unknown> | unknown)[] = [];
  private readonly watch: SilenceWatch;
  private readonly clock: () => Date;
  private readonly log: NatsLog;
  /** The publish in progress per instance subject (see dispatch). */
  private readonly publishing = new Map<string, Promise<void>>();
  private repairing: Promise<void> | undefined;
  private readonly repairTriggers: TransportHealth[] = [];
  private readonly quietTimers = new Map<string, NodeJS.Timeout>();
  /** The hub's own consumer gave up on a message: recovered once it records one again. */
  private hubDeliveriesExhausted = false;
  private storageNearLimit = false;
  /** The shards whose reports and results this hub records (consumeShards), and their consumers. */
  private wantedShards: ReadonlySet<number> = everyShard();
  private readonly shardConsumers = new Map<number, ConsumerMessages>();
  private shardsSettled: Promise<void> = Promise.resolve();
  private consuming = false;
  private stopped = false;
  private starting: Promise<void> | undefined;

  constructor(private readonly options: NatsTransportOptions) {
    this.name = options.name ?? "nats";
    this.clock = options.clock ?? (() => new Date());
    this.log = options.log ?? silentLog;
    this.watch = new SilenceWatch({
      missedBeats: options.heartbeat?.missedBeats ?? 3,
      clock: this.clock,
      onSilent: (key, since) => this.onSilence("silent", key, since),
      onHeard: (key, since) => this.onSilence("heard", key, since),
    });
  }

  get connection(): NatsConnection {
    if (!this.nc) throw new Error("the NATS transport has not been started");
    return this.nc;
  }

  get conditions(): ConditionMirror {
    if (!this.mirror) throw new Error("the NATS transport has not been started");
    return this.mirror;
  }

  /** Starts listening; a dispatch that comes meanwhile (the hub reconciles as it starts) waits for it. */
  start(events: TransportEvents): Promise<void> {
    this.starting ??= this.open(events);
    return this.starting;
  }

  private async open(events: TransportEvents): Promise<void> {
    this.events = events;
    const grace = this.options.jetStreamGraceMs;
    const waiting = (error: Error, attempt: number, retryInMs: number) =>
      this.log.warn(
        { error: error.message, attempt, retryInMs },
        `waiting for the NATS server (attempt ${attempt}): ${error.message}; retrying in ${retryInMs} ms`,
      );
    const nc =
      this.options.connection ??
      (await connectNats({
        servers: this.options.servers ?? "nats://127.0.0.1:4222",
        identity: identities.hub,
        ...(this.options.creds ? { creds: this.options.creds } : {}),
        ...(this.options.tls ? { tls: this.options.tls } : {}),
        onWaitingForServer: waiting,
      }));
    this.nc = nc;
    if (!this.options.connection) this.stoppers.push(() => nc.close());
    this.js = jetstream(nc);
    // Each step asks the server; a server restarting meanwhile is waited for, never a failed start.
    const jsm = await untilServerAnswers(() => jetstreamManager(nc), waiting, grace);
    this.jsm = jsm;
    this.poster = new MailboxPoster({
      js: this.js,
      jsm,
      timeoutMs: this.options.publishTimeoutMs ?? 2_000,
      settleFailed: (subject, attemptId, error) =>
        this.log.warn(
          { subject, attemptId, error: String(error) },
          "could not take an answered attempt out of the mailbox",
        ),
    });
    await untilServerAnswers(() => ensureTopology(nc, jsm, this.topologyOptions()), waiting, grace);
    this.mirror = await untilServerAnswers(() => ConditionMirror.open(nc), waiting, grace);
    this.watchConnection(nc);
    for (const subject of ADVISORY_SUBJECTS)
      this.subscriptions.push(
        nc.subscribe(subject, { callback: (_, msg) => this.onAdvisory(msg.subject, msg.data) }),
      );
    this.subscriptions.push(
      nc.subscribe(subjects.heartbeat("*"), {
        callback: (_, msg) => this.onHeartbeat(msg.subject, msg.string()),
      }),
      nc.subscribe(subjects.heartbeat("*", "*"), {
        callback: (_, msg) => this.onHeartbeat(msg.subject, msg.string()),
      }),
    );
    const interval = this.options.heartbeat?.intervalMs ?? DEFAULT_INTERVAL_MS;
    const last = await untilServerAnswers(() => this.lastReports(), waiting, grace);
    for (const report of last) this.watch.expect({ node: report.node }, interval);
    // Best effort: what cannot be recorded now (another hub replica writing the same rows, say) is
    // asked for again — every node the hub reaches reports at its start.
    const replayed = await Promise.allSettled(last.map((report) => this.hand(() => events.report(report))));
    // Another replica's nodes are its own to replay.
    const unrecorded = replayed.filter(
      (outcome) => outcome.status === "rejected" && !(outcome.reason instanceof NotOwnedError),
    ).length;
    if (unrecorded > 0)
      this.log.warn(
        { reports: unrecorded },
        "last reports from the bucket not recorded at start; asked for again",
      );
    for (const node of this.options.nodes ?? [])
      await untilServerAnswers(() => this.addNode(node), waiting, grace);
    await untilServerAnswers(() => this.consumeAgentMessages(), waiting, grace);
    const onTaskEvent = this.options.onTaskEvent;
    if (onTaskEvent) await untilServerAnswers(() => this.consumeTaskEvents(onTaskEvent), waiting, grace);
    await this.observeStorage();
    await nc.flush();
  }

  async addNode(node: string): Promise<void> {
    this.watch.expect({ node }, this.options.heartbeat?.intervalMs ?? DEFAULT_INTERVAL_MS);
  }

  async dispatch(bundle: Bundle, node: Node): Promise<void> {
    const name = node.metadata.name;
    if (node.spec.transport !== this.name)
      throw new DispatchError(
        `node ${name} is reached over ${node.spec.transport}, not ${this.name}`,
        "permanent",
        "WrongTransport",
      );
    if (bundle.spec.node !== name)
      throw new DispatchError(
        `attempt ${bundle.attemptId} is for node ${bundle.spec.node}, not ${name}`,
        "permanent",
        "NodeMismatch",
      );
    await this.started();
    if (!this.poster || this.stopped)
      throw new DispatchError("the NATS transport is not running", "transient", "TransportStopped");
    const poster = this.poster;
    const subject = subjects.attempt(name, bundle.spec.assignment);
    // The stream keeps one attempt per instance subject, the last published: an older attempt
    // whose publish is still being retried (a server restarting) must not land after a newer one
    // and replace it. So an instance's publishes go one after another, in the order they were made.
    const before = this.publishing.get(subject) ?? Promise.resolve();
    const publish = before.then(async () => {
      if (this.stopped)
        throw new DispatchError("the NATS transport is stopping", "transient", "TransportStopped");
      try {
        const ack = await this.throughElection(() =>
          poster.post(name, bundle.spec.assignment, bundle.attemptId, JSON.stringify(bundle)),
        );
        if (ack.duplicate)
          this.log.info(
            { attemptId: bundle.attemptId, node: name },
            "attempt already on the stream; not queued twice",
          );
      } catch (error) {
        // No stream answers for the subject: it was deleted (its advisory can be lost when nats-server
        // 2.9 recreates a stream at once). The topology is repaired for the retry.
        if (causedBy(error, NoRespondersError)) void this.repair();
        throw dispatchError(error, bundle, name);
      }
    });
    const settled = publish.catch(() => undefined);
    this.publishing.set(subject, settled);
    settled.then(() => {
      if (this.publishing.get(subject) === settled) this.publishing.delete(subject);
    });
    return publish;
  }

  /**
   * Runs `publish` again while the stream has no leader or does not answer — a cluster server died
   * and the survivors are electing one, which takes seconds — for up to `electionGraceMs`. Failing at once would
   * spend the instance's retry budget in those seconds and leave it Stuck; publishing again is
   * safe (the attempt id de-duplicates).
   */
  private async throughElection<T>(publish: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + (this.options.electionGraceMs ?? 15_000);
    for (let waitMs = 250; ; waitMs = Math.min(2 * waitMs, 2_000)) {
      try {
        return await publish();
      } catch (error) {
        if (!leaderless(error) || this.stopped || Date.now() + waitMs > deadline) throw error;
        await delay(waitMs);
      }
    }
  }

  async requestReport(node: Node): Promise<void> {
    const name = node.metadata.name;
    await this.started();
    if (!this.nc || this.stopped)
      throw new DispatchError("the NATS transport is not running", "transient", "TransportStopped");
    try {
      await this.nc.request(
        subjects.control(name),
        JSON.stringify({ kind: "ReportRequest", at: this.clock().toISOString() }),
        { timeout: this.options.requestTimeoutMs ?? 2_000 },
      );
    } catch (error) {
      if (causedBy(error, NoRespondersError))
        throw new DispatchError(`the agent of ${name} is not connected`, "transient", "NodeNotConnected", {
          cause: error,
        });
      throw new DispatchError(
        `the agent of ${name} did not accept the report request: ${(error as Error).message}`,
        "transient",
        "NodeNotAnswering",
        { cause: error },
      );
    }
  }

  /** Waits for a start in progress; a failed start leaves the transport not running. */
  private async started(): Promise<void> {
    await this.starting?.catch(() => undefined);
  }

  silentSince(node: string, assignment?: string): Date | undefined {
    return this.watch.silentSince(assignment === undefined ? { node } : { node, assignment });
  }

  silent(): { node: string; assignment?: string; since: Date }[] {
    return this.watch.silent().map(({ key, since }) => ({ ...key, since }));
  }

  publishTask(task: TaskMessage): Promise<void> {
    return publishTask(this.connection, task);
  }

  async lastReports(): Promise<Report[]> {
    const reports: Report[] = [];
    for (const [key, entry] of await bucketEntries(this.connection, OBSERVED_BUCKET)) {
      try {
        reports.push(entry.json<Report>());
      } catch {
        this.log.warn({ node: key }, "unreadable last report in KV; ignored");
      }
    }
    return reports.sort((a, b) => (a.node < b.node ? -1 : 1));
  }

  async busState(): Promise<BusState> {
    const jsm = this.jsm;
    if (!jsm) throw new Error("the NATS transport has not been started");
    const streams: BusState["streams"] = [];
    for (const name of [MAILBOX_STREAM, REPORTS_STREAM, TASKS_STREAM]) {
      const info = await jsm.streams.info(name);
      streams.push({ name, messages: info.state.messages, bytes: info.state.bytes });
    }
    const account = await jsm.getAccountInfo();
    return {
      streams,
      storage: { usedBytes: account.storage, limitBytes: account.limits.max_storage },
    };
  }

  async mailbox(node: string): Promise<{ assignment: string; attemptId: string; generation: number }[]> {
    const jsm = this.jsm;
    if (!jsm) throw new Error("the NATS transport has not been started");
    const decoder = new TextDecoder();
    return (await readMailbox(jsm.direct, node)).map((entry) => {
      const bundle = JSON.parse(decoder.decode(entry.data)) as Bundle;
      return {
        assignment: bundle.spec.assignment,
        attemptId: bundle.attemptId,
        generation: bundle.generation,
      };
    });
  }

  /** Reads the account's storage against its limit (on start and after each reconnect, not on a timer). */
  private async observeStorage(): Promise<void> {
    try {
      const { storage } = await this.busState();
      if (storage.limitBytes <= 0) return;
      const near = storage.usedBytes >= storage.limitBytes * STORAGE_WARNING_SHARE;
      if (near === this.storageNearLimit) return;
      this.storageNearLimit = near;
      await this.emitHealth({
        status: near ? "degraded" : "recovered",
        reason: "StorageNearLimit",
        message: `JetStream storage ${storage.usedBytes} of ${storage.limitBytes} bytes used`,
      });
    } catch (error) {
      this.log.warn({ error: String(error) }, "could not read the bus state");
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    // Publishes already waiting their turn see `stopped` and fail as TransportStopped.
    await Promise.allSettled(this.publishing.values());
    this.watch.stop();
    for (const timer of this.quietTimers.values()) clearTimeout(timer);
    for (const sub of this.subscriptions) sub.unsubscribe();
    for (const stop of this.stoppers.splice(0).reverse()) await stop();
  }

  /**
   * Consumes the reports and results of `shards` only (a hub replica's, replicas/replica.ts), and
   * stops consuming the others: what a replica stops consuming comes to the one that takes the
   * shard over (unacknowledged, after the ack deadline). A hub alone consumes every shard.
   */
  consumeShards(shards: ReadonlySet<number>): Promise<void> {
    this.wantedShards = new Set(shards);
    if (!this.consuming) return Promise.resolve();
    // After the last round, failed or not: a round the server's restart failed must not fail every
    // round after it (the hub's start retries this until the server answers).
    const round = this.shardsSettled.catch(() => undefined).then(() => this.settleShardConsumers());
    this.shardsSettled = round;
    return round;
  }

  /** Starts and stops shard consumers until they match the wanted shards. */
  private async settleShardConsumers(): Promise<void> {
    for (const [shard, messages] of this.shardConsumers) {
      if (this.wantedShards.has(shard) && !this.stopped) continue;
      this.shardConsumers.delete(shard);
      await messages.close().catch(() => undefined);
    }
    if (this.stopped) return;
    for (const shard of this.wantedShards) {
      if (this.shardConsumers.has(shard)) continue;
      const consumer = await this.connectionJs().consumers.get(REPORTS_STREAM, hubReportsConsumer(shard));
      const messages = await consumer.consume({
        max_messages: SHARD_PULL_BATCH,
        expires: PULL_EXPIRES_MS,
        callback: (msg) => {
          void this.onAgentMessage(msg);
        },
      });
      this.shardConsumers.set(shard, messages);
    }
  }

  /** Reports and results of the wanted shards: parsed, handled in order per node, acknowledged once handled. */
  private async consumeAgentMessages(): Promise<void> {
    this.consuming = true;
    await this.consumeShards(this.wantedShards);
    this.stoppers.push(async () => {
      this.consuming = false;
      await this.shardsSettled.catch(() => undefined);
      await this.settleShardConsumers();
      while (this.handing.size > 0) await Promise.allSettled([...this.handing]);
      this.held.clear();
    });
  }

  private async onAgentMessage(msg: JsMsg): Promise<void> {
    const events = this.events as TransportEvents;
    const [, , shard, kind, node] = msg.subject.split(".");
    if (!node || (kind !== "report" && kind !== "result") || shard !== String(shardOf(node))) {
      this.log.warn({ subject: msg.subject }, "message on a subject steward does not send; dropped");
      return terminate(msg);
    }
    let body: Report | AttemptResult;
    try {
      body = msg.json<Report | AttemptResult>();
    } catch {
      this.log.warn({ node, subject: msg.subject }, "unreadable message from agent; dropped");
      return terminate(msg);
    }
    // The subject is what the server's permissions vouch for; a body naming another node is forged.
    if (body.node !== node) {
      this.log.warn({ node, claimed: body.node }, "message names another node than its subject; dropped");
      return terminate(msg);
    }
    this.held.hold(msg);
    try {
      // Handed over at once, in the stream's order, which the hub keeps (see TransportEvents): a
      // node's results and the report after them are recorded together.
      if (kind === "report") await this.hand(() => events.report(body as Report));
      else {
        const result = body as AttemptResult;
        await this.hand(() => events.result(result));
        this.poster?.settle(node, result.assignment, result.attemptId);
      }
      msg.ack();
      if (this.hubDeliveriesExhausted) {
        this.hubDeliveriesExhausted = false;
        void this.emitHealth({
          status: "recovered",
          reason: "MaxDeliveriesExceeded",
          message: "the hub records messages from agents again",
        });
      }
    } catch (error) {
      if (error instanceof NotOwnedError) {
        // Its shard moved to another replica meanwhile: that one takes it from the shard's consumer.
        msg.nak(NOT_OWNED_NAK_MS);
        return;
      }
      this.log.error(
        { node, kind, error: String(error) },
        "hub handler failed; the message will be redelivered",
      );
      msg.nak(1_000);
    } finally {
      this.held.release(msg);
    }
  }

  private async consumeTaskEvents(onTaskEvent: (event: TaskEvent) => void | Promise<void>): Promise<void> {
    const consumer = await this.connectionJs().consumers.get(TASKS_STREAM, HUB_TASK_EVENTS_CONSUMER);
    const messages = await consumer.consume({ max_messages: 100, expires: PULL_EXPIRES_MS });
    const done = (async () => {
      for await (const msg of messages) {
        let event: TaskEvent;
        try {
          event = msg.json<TaskEvent>();
        } catch {
          this.log.warn({ subject: msg.subject }, "unreadable task event; dropped");
          terminate(msg);
          continue;
        }
        try {
          await onTaskEvent(event);
          msg.ack();
        } catch (error) {
          this.log.error({ taskId: event.taskId, error: String(error) }, "recording a task event failed");
          msg.nak(1_000);
        }
      }
    })();
    this.stoppers.push(async () => {
      await messages.close();
      await done;
    });
  }

  /** A beat counts for the node and assignment its subject names: the server vouches for those. */
  private onHeartbeat(subject: string, data: string): void {
    const beat = parseHeartbeat(data);
    const [, , node, assignment] = subject.split(".");
    if (!beat || !node || beat.node !== node || beat.assignment !== assignment) return;
    const key: HeartbeatKey = assignment === undefined ? { node } : { node, assignment };
    if (assignment !== undefined && beat.state === "stopped") {
      this.watch.forget(key);
      return;
    }
    const at = this.clock();
    this.watch.beat(key, beat.intervalMs, at);
    const events = this.events;
    if (assignment === undefined && events)
      void this.hand(() => events.heartbeat(node, at)).catch(() => undefined);
  }

  private onSilence(status: SilenceChange["status"], key: HeartbeatKey, since: Date): void {
    this.log.warn({ ...key, since: since.toISOString() }, status === "silent" ? "silent" : "heard again");
    try {
      this.options.onSilence?.({ status, ...key, since });
    } catch (error) {
      this.log.error({ ...key, error: String(error) }, "the onSilence handler failed");
    }
    if (this.options.heartbeat?.asHealth)
      void this.emitHealth(silenceHealth(status === "silent" ? "degraded" : "recovered", key, since));
  }

  private onAdvisory(subject: string, data: Uint8Array): void {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(new TextDecoder().decode(data));
    } catch {
      return;
    }
    const observation = observeAdvisory(subject, body);
    if (!observation) return;
    this.log.warn({ subject, ...observation.health }, "bus advisory");
    void this.emitHealth(observation.health);
    if (observation.exhausted) void this.settleExhausted(observation.exhausted);
    if (observation.repair) void this.repair(observation.health);
  }

  /**
   * A message the server will not deliver again (to the hub's consumers: attempts have none) is
   * removed: left in a work-queue stream, it would be handed out again if the consumer were recreated.
   */
  private async settleExhausted(exhausted: { stream: string; seq: number }): Promise<void> {
    const jsm = this.jsm;
    if (!jsm) return;
    if (exhausted.stream === REPORTS_STREAM) this.hubDeliveriesExhausted = true;
    try {
      await jsm.streams.deleteMessage(exhausted.stream, exhausted.seq, false);
    } catch (error) {
      this.log.warn({ ...exhausted, error: String(error) }, "could not settle an exhausted message");
    }
  }

  /**
   * Runs the topology again (the ordinary path) after a stream or consumer of ours was deleted, or
   * the server came back; then each degraded observation that asked for it is recovered.
   */
  private repair(trigger?: TransportHealth): Promise<void> {
    if (trigger) this.repairTriggers.push(trigger);
    this.repairing ??= (async () => {
      try {
        // An advisory that comes while a round runs (a consumer's, after its stream's) gets a round
        // of its own: its observation is recovered only by a round that began after it.
        while ((await this.repairRound()) && this.repairTriggers.length > 0);
      } finally {
        this.repairing = undefined;
      }
    })();
    return this.repairing;
  }

  private topologyOptions(): TopologyOptions {
    return this.options.replicas !== undefined ? { replicas: this.options.replicas } : {};
  }

  /** One round of `repair`; false when it could not run (stopped) or failed (retried at the next trigger). */
  private async repairRound(): Promise<boolean> {
    // Let advisories that arrive together (a stream and its consumers) share one round.
    await delay(50);
    const triggers = this.repairTriggers.splice(0);
    try {
      const jsm = this.jsm;
      if (!jsm || this.stopped) return false;
      await ensureTopology(this.connection, jsm, this.topologyOptions());
      // A recreated mailbox stream holds no lists: each is read again before it is next written.
      this.poster?.forget();
      for (const degraded of triggers)
        await this.emitHealth({ ...degraded, status: "recovered", message: "recreated as declared" });
      return true;
    } catch (error) {
      this.repairTriggers.push(...triggers);
      this.log.error({ error: String(error) }, "repairing the JetStream topology failed");
      return false;
    }
  }

  /**
   * A problem the client reports once with no word when it ends (a slow consumer, a server error)
   * is recovered after a quiet minute without it.
   */
  private degradedUntilQuiet(reason: string, message: string): void {
    void this.emitHealth({ status: "degraded", reason, message });
    clearTimeout(this.quietTimers.get(reason));
    const timer = setTimeout(() => {
      this.quietTimers.delete(reason);
      void this.emitHealth({ status: "recovered", reason, message: `no ${reason} for ${QUIET_MS / 1000} s` });
    }, QUIET_MS);
    timer.unref();
    this.quietTimers.set(reason, timer);
  }

  private watchConnection(nc: NatsConnection): void {
    const statuses = nc.status();
    void (async () => {
      for await (const status of statuses) {
        if (this.stopped) break;
        switch (status.type) {
          case "disconnect":
            this.watch.suspend();
            void this.emitHealth({
              status: "degraded",
              reason: "ServerDisconnected",
              message: `lost the connection to NATS server ${status.server}; reconnecting`,
            });
            break;
          case "reconnect":
            this.watch.resume();
            void this.emitHealth({
              status: "recovered",
              reason: "ServerDisconnected",
              message: `reconnected to NATS server ${status.server}`,
            });
            void this.repair().then(() => this.observeStorage());
            break;
          case "slowConsumer":
            this.degradedUntilQuiet(
              "SlowConsumer",
              `the hub is not keeping up with ${status.sub.getSubject()} (${status.pending} pending)`,
            );
            break;
          case "error":
            this.degradedUntilQuiet("ServerError", status.error.message);
            break;
          default:
            break;
        }
      }
    })();
  }

  private connectionJs(): JetStreamClient {
    if (!this.js) throw new Error("the NATS transport has not been started");
    return this.js;
  }

  /** Hands an event to the hub now (so in order with its node's other events), tracked until recorded. */
  private hand(deliver: () => void | Promise<void>): Promise<void> {
    let handed: Promise<void>;
    try {
      handed = Promise.resolve(deliver());
    } catch (error) {
      handed = Promise.reject(error);
    }
    this.handing.add(handed);
    const done = () => this.handing.delete(handed);
    handed.then(done, done);
    return handed;
  }

  /** Delivers a health event in the order of its node's other events. */
  private async emitHealth(health: TransportHealth): Promise<void> {
    const events = this.events;
    if (!events || this.stopped) return;
    try {
      await this.hand(() => events.health(health));
    } catch (error) {
      this.log.error({ ...health, error: String(error) }, "the hub's health handler failed");
    }
  }
}

function silenceHealth(status: TransportHealth["status"], key: HeartbeatKey, since: Date): TransportHealth {
  const who = key.assignment === undefined ? `node ${key.node}` : `${key.assignment} on ${key.node}`;
  return {
    status,
    node: key.node,
    ...(key.assignment !== undefined ? { assignment: key.assignment } : {}),
    since,
    reason: key.assignment === undefined ? "NodeSilent" : "InstanceSilent",
    message:
      status === "degraded"
        ? `no heartbeat from ${who} since ${since.toISOString()}`
        : `${who} beats again (silent since ${since.toISOString()})`,
  };
}

/**
 * True when JetStream did not answer for want of a leader: no responders on the stream's subject,
 * or "JetStream system temporarily unavailable" (10008).
 */
function leaderless(error: unknown): boolean {
  // No answer in time: a stream whose leader just died answers nothing until the survivors elected
  // one (on a cluster with many groups to elect, past the publish timeout).
  if (causedBy(error, NoRespondersError) || causedBy(error, TimeoutError)) return true;
  let current: unknown = error;
  while (current instanceof Error) {
    if (current instanceof JetStreamApiError && current.code === 10_008) return true;
    current = current.cause;
  }
  return false;
}

function dispatchError(error: unknown, bundle: Bundle, node: string): DispatchError {
  if (error instanceof DispatchError) return error;
  const detail = `attempt ${bundle.attemptId} for ${bundle.spec.assignment} on ${node}`;
  const message = (error as Error).message;
  if (causedBy(error, PermissionViolationError))
    return new DispatchError(
      `${detail}: the hub may not publish attempts: ${message}`,
      "permanent",
      "PermissionDenied",
      {
        cause: error,
      },
    );
  if (error instanceof ClosedConnectionError)
    return new DispatchError(`${detail}: the connection is closed`, "transient", "ConnectionClosed", {
      cause: error,
    });
  // Not acknowledged: it may or may not be stored, but publishing the same attempt again is safe —
  // the stream drops a second copy with the same Nats-Msg-Id.
  if (causedBy(error, TimeoutError))
    return new DispatchError(
      `${detail}: the stream did not acknowledge it (publish the same attempt again; it is de-duplicated)`,
      "transient",
      "PublishNotAcknowledged",
      { cause: error },
    );
  if (causedBy(error, NoRespondersError))
    return new DispatchError(`${detail}: JetStream is not available`, "transient", "StreamUnavailable", {
      cause: error,
    });
  return new DispatchError(`${detail}: ${message}`, "transient", "PublishFailed", { cause: error });
}
