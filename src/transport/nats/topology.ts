/**
 * The JetStream objects steward needs, created or brought back to their declared configuration by
 * the hub (nodes and task agents may not create anything). `ensure*` is level-based: it reads what
 * the server has and adds or updates to match, so running it again after a stream or consumer was
 * deleted behind our back is the repair.
 *
 * Stays within nats-server 2.9: one filter subject per consumer, `backoff` with `max_deliver`, no
 * per-message TTL, no consumer pause, direct gets of one subject's last message only.
 *
 * Attempts reach nodes without a consumer per node. Measured on nats-server 2.9.10 (2 cores, one
 * stream, durable pull consumers each filtered to one node, 10 messages per node): 1,000 consumers
 * cost the server 0.61 ms of CPU per message and 104 ms per second idle (their pulls and
 * heartbeats); 4,000 cost 1.23 ms per message and 282 ms per second idle — the price of a message
 * grows with the number of consumers on its stream, so a rollout's cost grows with the square of
 * the fleet, and 5,000 nodes did not converge. The same messages published to the subjects of a
 * stream without consumers, with each node subscribed to its own: 0.04 and 0.03 ms per message,
 * nothing idle. So the mailbox stream keeps the newest attempt of each instance and each node's
 * list of them, its agent is pushed each attempt as it is stored (a plain subscription to its own
 * subjects), and it reads its mailbox with direct gets — permitted for its own subjects only — when
 * it starts, after every reconnect and when it may have missed one (see agent.ts).
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
import { SHARDS } from "../../model/shards.js";
import {
  CONDITIONS_BUCKET,
  HUB_TASK_EVENTS_CONSUMER,
  hubReportsConsumer,
  LEGACY_ATTEMPTS_STREAM,
  LEGACY_HUB_REPORTS_CONSUMER,
  MAILBOX_STREAM,
  OBSERVED_BUCKET,
  REPORTS_STREAM,
  subjects,
  TASK_AGENTS_CONSUMER,
  TASK_AGENTS_QUEUE,
  TASK_DELIVER_SUBJECT,
  TASKS_STREAM,
  TASKS_SUBJECT,
} from "./subjects.js";

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
      name: MAILBOX_STREAM,
      description: "steward: each node's mailbox: the newest attempt of each instance, and their list",
      subjects: [subjects.attempt("*", "*"), subjects.mailboxes],
      // Kept until replaced, not until taken: an agent that restarts or missed the push reads its
      // mailbox again; its own record of attempt ids keeps it from applying one twice.
      retention: RetentionPolicy.Limits,
      // One subject per instance and one message per subject: a newer attempt replaces the one
      // before, so a node that was offline converges the current generation only.
      max_msgs_per_subject: 1,
      discard: DiscardPolicy.Old,
      // Attempt ids are Nats-Msg-Id: a hub that re-publishes after a crash is de-duplicated here.
      duplicate_window: 10 * MINUTE_NS,
      allow_direct: true,
      storage: StorageType.File,
      num_replicas: replicas,
    },
    {
      name: REPORTS_STREAM,
      description: "steward: full reports and attempt results from agents, consumed by the hub",
      subjects: [subjects.agentMessages],
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

/**
 * How many messages of one shard the hub holds unacknowledged at most: it awaits each message's
 * handler before acknowledging it, so this bounds what it holds (and its memory) when it falls
 * behind — 64 shards × 256 = 16,384 for a hub that consumes them all.
 */
export const SHARD_ACK_PENDING = 256;

/**
 * How long the server waits for the hub's acknowledgement of a report or result before it delivers
 * it again: short, so a dead replica's messages come back soon; a live one keeps the messages it is
 * still recording by marking them in progress (src/transport/nats/held.ts).
 */
export const SHARD_ACK_WAIT_MS = 5_000;

/**
 * One consumer per shard of reports and results (`hub-shard-N`, filtered to `steward.*.N.*`): each
 * hub replica consumes the shards it holds, so a node's messages are recorded by the replica that
 * owns the node and replicas never write the same node's rows. 64 consumers cost the server little
 * (the cost that grows is per consumer, see above, and 64 is fixed whatever the fleet).
 */
function reportsConsumerConfigs(): { stream: string; config: ConsumerConfig }[] {
  return Array.from({ length: SHARDS }, (_, shard) => ({
    stream: REPORTS_STREAM,
    config: {
      ...consumerBase(),
      durable_name: hubReportsConsumer(shard),
      description: `steward: the hub replica holding shard ${shard} records its nodes' reports and results`,
      filter_subject: subjects.agentMessagesOf(shard),
      max_deliver: 10,
      // The first entry is the ack deadline of a message the hub holds: long enough for a full
      // prefetch to be handled, short enough that a dead replica's messages come back soon.
      backoff: [SHARD_ACK_WAIT_MS, 10_000, 30_000, 60_000, 120_000].map((ms) => nanos(ms)),
      ack_wait: nanos(SHARD_ACK_WAIT_MS),
      max_ack_pending: SHARD_ACK_PENDING,
    },
  }));
}

function hubConsumerConfigs(): { stream: string; config: ConsumerConfig }[] {
  return [
    ...reportsConsumerConfigs(),
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

/**
 * The work-queue stream of earlier versions, with its consumer per node, is deleted: an attempt it
 * still held is the seed's ambiguous case for the hub (its lease runs out, a fresh report is asked
 * for), never replayed.
 */
async function removeLegacyAttempts(jsm: JetStreamManager): Promise<void> {
  try {
    await jsm.streams.delete(LEGACY_ATTEMPTS_STREAM);
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
}

/**
 * Reports and results of earlier versions (`steward.report.<node>`, one consumer `hub` for all) are
 * removed before the stream takes the sharded subjects (a work queue refuses a filtered consumer
 * beside an unfiltered one). What they held is not lost to the hub: every agent reports afresh when
 * asked, and an attempt whose result was among them is settled as ambiguous (from a fresh report).
 */
async function removeLegacyReports(jsm: JetStreamManager): Promise<void> {
  try {
    await jsm.consumers.delete(REPORTS_STREAM, LEGACY_HUB_REPORTS_CONSUMER);
  } catch (error) {
    if (!isNotFound(error)) throw error;
    return;
  }
  await jsm.streams.purge(REPORTS_STREAM);
}

export interface TopologyOptions {
  /** Replicas of every stream and bucket; default `replicasOn(nc.info)`: 3 on a cluster, 1 on a single server. */
  replicas?: number;
}

/** How many times the topology is ensured when another hub is creating it at the same moment. */
const TOPOLOGY_TRIES = 5;

/**
 * Ensures every stream, the hub's and task agents' consumers and both key-value buckets exist as
 * declared, in as many replicas as the server warrants. Safe to run any number of times and
 * concurrently with traffic, and by several hub replicas at once: two creating the same stream or
 * bucket together may see the server refuse one of them (2.9.10 answers "subjects overlap with an
 * existing stream" to the second create of a stream the first has just made); every step reads
 * before it writes, so the refused one runs again and finds what the other made.
 */
export async function ensureTopology(
  nc: NatsConnection,
  jsm: JetStreamManager,
  options: TopologyOptions = {},
): Promise<void> {
  for (let tries = 1; ; tries++) {
    try {
      return await ensureTopologyOnce(nc, jsm, options);
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || tries >= TOPOLOGY_TRIES) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 150 * tries));
    }
  }
}

async function ensureTopologyOnce(
  nc: NatsConnection,
  jsm: JetStreamManager,
  options: TopologyOptions,
): Promise<void> {
  const replicas = replicasOn(nc.info, options.replicas);
  await removeLegacyAttempts(jsm);
  await removeLegacyReports(jsm);
  for (const config of streamConfigs(replicas)) await ensureStream(jsm, config);
  // Together: on a cluster each consumer is a group that elects its leader, one after another 0.5 s each.
  await Promise.all(hubConsumerConfigs().map(({ stream, config }) => ensureConsumer(jsm, stream, config)));
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
