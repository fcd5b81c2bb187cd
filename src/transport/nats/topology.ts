/**
 * The JetStream objects steward needs, created or brought back to their declared configuration by
 * the hub (nodes and task agents may not create anything). `ensure*` is level-based: it reads what
 * the server has and adds or updates to match, so running it again after a stream or consumer was
 * deleted behind our back is the repair.
 *
 * Stays within nats-server 2.9: one filter subject per consumer, `backoff` with `max_deliver`, no
 * per-message TTL, no consumer pause.
 *
 * Streams and buckets are kept in 3 replicas on a cluster and 1 on a single server (`replicasOn`);
 * consumers take their stream's. JetStream (2.9 too) changes a stream's replicas on update, so a
 * single server's streams grow to 3 once it joins a cluster, and shrink back.
 */
import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  ReplayPolicy,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { type NatsConnection, nanos, type ServerInfo } from "@nats-io/transport-node";
import { EnvironmentError } from "../../model/errors.js";
import {
  ATTEMPTS_STREAM,
  attemptConsumer,
  CONDITIONS_BUCKET,
  HUB_REPORTS_CONSUMER,
  HUB_TASK_EVENTS_CONSUMER,
  OBSERVED_BUCKET,
  REPORTS_STREAM,
  subjects,
  TASK_AGENTS_CONSUMER,
  TASK_AGENTS_QUEUE,
  TASK_DELIVER_SUBJECT,
  TASKS_STREAM,
  TASKS_SUBJECT,
} from "./subjects.js";

/** How attempts are redelivered when an agent takes one and never acknowledges it. */
export interface AttemptDelivery {
  /** Deliveries before the server gives up and raises a max-deliveries advisory; default 5. */
  maxDeliver: number;
  /**
   * Wait before each redelivery, in ms (the first entry is also the ack deadline; agents extend it
   * while they work). Must have fewer entries than `maxDeliver`. Default 2 s, 10 s, 30 s, 60 s.
   */
  backoffMs: number[];
}

export const DEFAULT_ATTEMPT_DELIVERY: AttemptDelivery = {
  maxDeliver: 5,
  backoffMs: [2_000, 10_000, 30_000, 60_000],
};

const MINUTE_NS = nanos(60_000);
const DAY_NS = nanos(86_400_000);

type StreamDeclaration = Partial<StreamConfig> & { name: string };

/** How many copies of each stream and bucket a cluster keeps: one server can die, two cannot. */
export const CLUSTER_REPLICAS = 3;

/**
 * The replicas for streams and buckets on the server `info` describes: `override` when given, else 3
 * when it is in a cluster (its INFO names one) and 1 on a single server.
 */
export function replicasOn(info: Pick<ServerInfo, "cluster"> | undefined, override?: number): number {
  if (override !== undefined) return override;
  return info?.cluster ? CLUSTER_REPLICAS : 1;
}

function streamConfigs(replicas: number): StreamDeclaration[] {
  return [
    {
      name: ATTEMPTS_STREAM,
      description: "steward: attempts per instance; only the newest attempt of an instance is kept",
      subjects: [subjects.attempt("*", "*")],
      retention: RetentionPolicy.Workqueue,
      // One subject per instance and one message per subject: a newer attempt replaces one the node
      // has not taken yet, so a node that was offline converges the current generation only.
      max_msgs_per_subject: 1,
      discard: DiscardPolicy.Old,
      // Attempt ids are Nats-Msg-Id: a hub that re-publishes after a crash is de-duplicated here.
      duplicate_window: 10 * MINUTE_NS,
      storage: StorageType.File,
      num_replicas: replicas,
    },
    {
      name: REPORTS_STREAM,
      description: "steward: full reports and attempt results from agents, consumed by the hub",
      subjects: [subjects.report("*"), subjects.result("*")],
      retention: RetentionPolicy.Workqueue,
      // Bounds what piles up for a hub that is down for long; a report is a full observation, so
      // only the newest matter, and 1,000 results per node outlasts any sane outage.
      max_msgs_per_subject: 1_000,
      max_age: 7 * DAY_NS,
      discard: DiscardPolicy.Old,
      duplicate_window: 2 * MINUTE_NS,
      storage: StorageType.File,
      num_replicas: replicas,
    },
    {
      name: TASKS_STREAM,
      description: "steward: tasks for task agents, and their claims and resolutions for the hub",
      subjects: [TASKS_SUBJECT, subjects.taskClaimed("*"), subjects.taskResolved("*")],
      retention: RetentionPolicy.Workqueue,
      duplicate_window: 10 * MINUTE_NS,
      storage: StorageType.File,
      num_replicas: replicas,
    },
  ];
}

function consumerBase(): Pick<ConsumerConfig, "ack_policy" | "deliver_policy" | "replay_policy"> {
  return {
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    replay_policy: ReplayPolicy.Instant,
  };
}

/** The durable pull consumer that carries `node`'s attempts. */
export function attemptConsumerConfig(node: string, delivery: AttemptDelivery): ConsumerConfig {
  if (delivery.backoffMs.length >= delivery.maxDeliver)
    throw new RangeError("attempt backoff must have fewer entries than maxDeliver");
  return {
    ...consumerBase(),
    durable_name: attemptConsumer(node),
    description: `steward: attempts for node ${node}`,
    filter_subject: subjects.attemptsOf(node),
    max_deliver: delivery.maxDeliver,
    backoff: delivery.backoffMs.map((ms) => nanos(ms)),
    ack_wait: nanos(delivery.backoffMs[0] ?? 30_000),
    max_ack_pending: 64,
  };
}

function hubConsumerConfigs(): { stream: string; config: ConsumerConfig }[] {
  return [
    {
      stream: REPORTS_STREAM,
      config: {
        ...consumerBase(),
        durable_name: HUB_REPORTS_CONSUMER,
        description: "steward: the hub records reports and results",
        max_deliver: 10,
        // The first entry is the ack deadline of a message the hub holds: long enough for a full
        // prefetch to be handled, short enough that a dead hub's messages come back soon.
        backoff: [5_000, 10_000, 30_000, 60_000, 120_000].map((ms) => nanos(ms)),
        ack_wait: nanos(5_000),
        // The hub awaits each message's handler before acknowledging it; this bounds how many it
        // holds at once (and so its memory) when it falls behind.
        max_ack_pending: 4_096,
      },
    },
    {
      stream: TASKS_STREAM,
      config: {
        ...consumerBase(),
        durable_name: HUB_TASK_EVENTS_CONSUMER,
        description: "steward: the hub records task claims and resolutions",
        filter_subject: subjects.taskEvents,
        max_deliver: 10,
        ack_wait: nanos(30_000),
      },
    },
    {
      stream: TASKS_STREAM,
      config: {
        ...consumerBase(),
        durable_name: TASK_AGENTS_CONSUMER,
        description: "steward: tasks pushed to the task agents' queue group",
        filter_subject: TASKS_SUBJECT,
        deliver_subject: TASK_DELIVER_SUBJECT,
        deliver_group: TASK_AGENTS_QUEUE,
        // A task agent acknowledges once it has resolved the task; a long judgement is fine.
        ack_wait: nanos(5 * 60_000),
        max_deliver: 20,
      },
    },
  ];
}

function isNotFound(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamNotFound || error.code === JetStreamApiCodes.ConsumerNotFound)
  );
}

/** Adds the stream, or updates it when its configuration differs from ours. */
async function ensureStream(jsm: JetStreamManager, config: StreamDeclaration): Promise<void> {
  const name = config.name;
  try {
    try {
      const info = await jsm.streams.info(name);
      const current = info.config as unknown as Record<string, unknown>;
      const differs = Object.entries(config).some(
        ([key, value]) => JSON.stringify(current[key]) !== JSON.stringify(value),
      );
      // Only the fields declared are compared and changed: a bucket's stream (KV_...) is declared
      // by its replicas alone, the rest is the KV client's.
      if (differs) await jsm.streams.update(name, config);
    } catch (error) {
      if (!isNotFound(error)) throw error;
      await jsm.streams.add(config);
    }
  } catch (error) {
    throw replicasRefused(error, name, config.num_replicas) ?? error;
  }
}

/**
 * What a server answers when it cannot place a stream's replicas: no suitable peers (10005),
 * insufficient resources (10023), replicas > 1 on a single server (10074).
 */
const REPLICA_REFUSALS = new Set([10_005, 10_023, 10_074]);

/** The error for a stream the server cannot keep in as many replicas as declared; undefined for others. */
function replicasRefused(error: unknown, stream: string, replicas: number | undefined): Error | undefined {
  if (!(error instanceof JetStreamApiError) || replicas === undefined || replicas < 2) return undefined;
  if (!REPLICA_REFUSALS.has(error.code)) return undefined;
  return new EnvironmentError(
    `JetStream cannot keep stream ${stream} in ${replicas} replicas (${error.message}): the cluster needs at least ${replicas} servers with JetStream up — start the missing ones, or give the hub --nats-replicas with how many it has`,
    { cause: error },
  );
}

/** Adds the durable consumer, or updates it when its configuration differs from ours. */
export async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  config: ConsumerConfig,
): Promise<void> {
  const name = config.durable_name as string;
  try {
    const info = await jsm.consumers.info(stream, name);
    const current = info.config as unknown as Record<string, unknown>;
    const differs = Object.entries(config).some(
      ([key, value]) => JSON.stringify(current[key]) !== JSON.stringify(value),
    );
    if (differs) await jsm.consumers.update(stream, name, config);
  } catch (error) {
    if (!isNotFound(error)) throw error;
    await jsm.consumers.add(stream, config);
  }
}

/** Ensures the durable pull consumer of `node`'s attempts exists as configured. */
export function ensureNodeConsumer(
  jsm: JetStreamManager,
  node: string,
  delivery: AttemptDelivery = DEFAULT_ATTEMPT_DELIVERY,
): Promise<void> {
  return ensureConsumer(jsm, ATTEMPTS_STREAM, attemptConsumerConfig(node, delivery));
}

export interface TopologyOptions {
  /** Replicas of every stream and bucket; default `replicasOn(nc.info)`: 3 on a cluster, 1 on a single server. */
  replicas?: number;
}

/**
 * Ensures every stream, the hub's and task agents' consumers and both key-value buckets exist as
 * declared, in as many replicas as the server warrants. Safe to run any number of times and
 * concurrently with traffic.
 */
export async function ensureTopology(
  nc: NatsConnection,
  jsm: JetStreamManager,
  options: TopologyOptions = {},
): Promise<void> {
  const replicas = replicasOn(nc.info, options.replicas);
  for (const config of streamConfigs(replicas)) await ensureStream(jsm, config);
  for (const { stream, config } of hubConsumerConfigs()) await ensureConsumer(jsm, stream, config);
  const kvm = new Kvm(nc);
  const buckets = [
    { name: OBSERVED_BUCKET, description: "steward: last full report per node" },
    { name: CONDITIONS_BUCKET, description: "steward: open conditions" },
  ];
  for (const { name, description } of buckets) {
    // `create` leaves an existing bucket as it is; its stream's replicas are brought level below.
    await kvm.create(name, { history: 1, description, replicas });
    await ensureStream(jsm, { name: `KV_${name}`, num_replicas: replicas });
  }
}
