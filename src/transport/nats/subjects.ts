/**
 * The names steward uses on the bus: streams, subjects, consumers and key-value buckets. Everything
 * that builds a subject goes through here, so the server configuration's permissions
 * (`permissions.ts`) and the code that publishes and subscribes cannot drift apart.
 *
 * Node and assignment names are DNS labels (schema `Name`), which are valid subject tokens as they are.
 */
import { shardOf } from "../../model/shards.js";

/**
 * Every node's mailbox: the newest attempt of each instance (one subject per instance, one message
 * per subject) and each node's list of the instances it holds (`subjects.mailbox`). Agents are
 * pushed attempts as they are published and read their mailbox with direct gets to catch up; no
 * consumer per node (see topology.ts for why).
 */
export const MAILBOX_STREAM = "STEWARD_MAILBOX";
/** The stream of steward 0.x (a work queue with one durable consumer per node); removed at start. */
export const LEGACY_ATTEMPTS_STREAM = "STEWARD_ATTEMPTS";
/** Stream of what agents send back: full reports and attempt results. */
export const REPORTS_STREAM = "STEWARD_REPORTS";
/** Stream of tasks (conditions that need judgement) and of their claims and resolutions. */
export const TASKS_STREAM = "STEWARD_TASKS";

/** Last full report per node (key = node). */
export const OBSERVED_BUCKET = "steward-observed";
/** Open conditions (key = condition id); a resolved condition is deleted. */
export const CONDITIONS_BUCKET = "steward-conditions";

/** The hub's durable consumer of one shard's reports and results (hub replicas each consume their own). */
export const HUB_REPORTS_CONSUMER_PREFIX = "hub-shard-";
export const hubReportsConsumer = (shard: number) => `${HUB_REPORTS_CONSUMER_PREFIX}${shard}`;
/** The single consumer of every report and result, of steward before sharded subjects; removed at start. */
export const LEGACY_HUB_REPORTS_CONSUMER = "hub";
/** The hub's durable consumer of task claims and resolutions. */
export const HUB_TASK_EVENTS_CONSUMER = "hub-task-events";
/** The durable push consumer that hands tasks to the task agents' queue group. */
export const TASK_AGENTS_CONSUMER = "task-agents";
/** The queue group every task agent joins; each task goes to one member. */
export const TASK_AGENTS_QUEUE = "steward-task-agents";
/** Where the task consumer pushes tasks (outside every stream's subjects). */
export const TASK_DELIVER_SUBJECT = "steward.deliver.tasks";
/** Where the hub publishes tasks. */
export const TASKS_SUBJECT = "steward.tasks";

/**
 * Who connects: the connection's name is `steward-<identity>` and its inbox prefix `_INBOX_<identity>`.
 * The role prefix keeps a node named "hub" apart from the hub (`_` never occurs in a DNS label).
 */
export const identities = {
  hub: "hub",
  node: (name: string) => `node_${name}`,
  taskAgent: (name: string) => `task_${name}`,
  viewer: "viewer",
  /**
   * A host asking to join (the shared enrolment credential): its replies come on `_INBOX_enrol`,
   * the only prefix that credential may subscribe to.
   */
  enrol: "enrol",
  /** The node behind a connection name, if it is a node's. */
  nodeOfConnection: (connectionName: string | undefined): string | undefined =>
    connectionName?.startsWith("steward-node_") ? connectionName.slice("steward-node_".length) : undefined,
} as const;

const TOKEN = /^[A-Za-z0-9_-]+$/;

/** Throws unless `name` can be one subject token (no dot, wildcard or space). */
export function assertToken(name: string, what: string): void {
  if (!TOKEN.test(name))
    throw new RangeError(
      `${what} "${name}" cannot be used on the bus: use letters, digits, "-" or "_" (a DNS label)`,
    );
}

export const subjects = {
  /** One instance's attempts. */
  attempt: (node: string, assignment: string) => `steward.attempt.${node}.${assignment}`,
  /** Every attempt for a node: what its agent subscribes to. */
  attemptsOf: (node: string) => `steward.attempt.${node}.*`,
  /** The node's mailbox list: the assignments whose newest attempt the mailbox holds. */
  mailbox: (node: string) => `steward.mailbox.${node}`,
  /** Every node's mailbox list: the stream's second subject. */
  mailboxes: "steward.mailbox.*",
  /** A direct get of the last message on `subject` (the form permissions can restrict to a node). */
  lastOf: (stream: string, subject: string) => `$JS.API.DIRECT.GET.${stream}.${subject}`,
  /**
   * A node's full reports, under what agents send back (`steward.agent.<shard>.<kind>.<node>`): the
   * shard first, so each hub replica consumes its own shards' (nats-server 2.9 takes one filter
   * per consumer, a subset of one of the stream's subjects).
   */
  report: (node: string) => `steward.agent.${shardOf(node)}.report.${node}`,
  /** A node's attempt results (as its reports). */
  result: (node: string) => `steward.agent.${shardOf(node)}.result.${node}`,
  /** Every report and result of every node: the stream's subject. */
  agentMessages: "steward.agent.*.*.*",
  /** Every report and result of one shard's nodes: the filter of that shard's hub consumer. */
  agentMessagesOf: (shard: number) => `steward.agent.${shard}.*.*`,
  /** Node beat (`steward.heartbeat.<node>`); an instance beat adds the assignment as a token. */
  heartbeat: (node: string, assignment?: string) =>
    assignment === undefined ? `steward.heartbeat.${node}` : `steward.heartbeat.${node}.${assignment}`,
  /** Hub → node: "send a fresh full report". */
  control: (node: string) => `steward.control.${node}`,
  taskClaimed: (taskId: string) => `steward.task.claimed.${taskId}`,
  taskResolved: (taskId: string) => `steward.task.resolved.${taskId}`,
  /** Every claim and resolution: the hub's filter. */
  taskEvents: "steward.task.*.*",
  /** A host asks to join the fleet (with the shared enrolment credential); the hub answers. */
  enrolRequest: "steward.enrol.request",
  /** Where each connection receives replies: one prefix per identity, so nobody reads another's. */
  inboxPrefix: (identity: string) => `_INBOX_${identity}`,
  kv: (bucket: string, key: string) => `$KV.${bucket}.${key}`,
} as const;
