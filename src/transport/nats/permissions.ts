/**
 * What each identity may publish and subscribe to, as nats-server permissions. A node may receive
 * and read only its own attempts and mailbox list and publish only its own reports, results and
 * heartbeats; a task agent only takes tasks and answers them; a viewer only reads the key-value
 * buckets. Built from the same subject helpers the code publishes with.
 */
import {
  assertToken,
  CONDITIONS_BUCKET,
  identities,
  MAILBOX_STREAM,
  OBSERVED_BUCKET,
  subjects,
  TASK_AGENTS_CONSUMER,
  TASK_DELIVER_SUBJECT,
  TASKS_STREAM,
} from "./subjects.js";

export interface Permissions {
  publish: string[];
  subscribe: string[];
  /** May answer requests it received (the hub's "send a report" request). */
  allowResponses?: boolean;
}

/** The hub administers the account: streams, consumers, buckets, every subject. */
export function hubPermissions(): Permissions {
  return { publish: [">"], subscribe: [">"] };
}

/**
 * A node: its own attempts in (pushed, and read from its mailbox by direct gets of its own subjects:
 * the subject a direct get names is the one permissions see), its own reports, results and
 * heartbeats out.
 */
export function nodePermissions(node: string, identity: string): Permissions {
  assertToken(node, "node name");
  return {
    publish: [
      subjects.lastOf(MAILBOX_STREAM, subjects.mailbox(node)),
      subjects.lastOf(MAILBOX_STREAM, subjects.attemptsOf(node)),
      subjects.report(node),
      subjects.result(node),
      subjects.heartbeat(node),
      subjects.heartbeat(node, "*"),
      subjects.kv(OBSERVED_BUCKET, node),
    ],
    subscribe: [
      `${subjects.inboxPrefix(identity)}.>`,
      subjects.control(node),
      subjects.attemptsOf(node),
      subjects.mailbox(node),
    ],
    allowResponses: true,
  };
}

/** A task agent: takes tasks from the queue group and publishes claims and resolutions. */
export function taskAgentPermissions(identity: string): Permissions {
  return {
    publish: [
      `$JS.API.CONSUMER.INFO.${TASKS_STREAM}.${TASK_AGENTS_CONSUMER}`,
      `$JS.ACK.${TASKS_STREAM}.${TASK_AGENTS_CONSUMER}.>`,
      subjects.taskClaimed("*"),
      subjects.taskResolved("*"),
      ...readBucketPublish(CONDITIONS_BUCKET),
    ],
    subscribe: [`${subjects.inboxPrefix(identity)}.>`, TASK_DELIVER_SUBJECT],
  };
}

/** A viewer (`steward status --watch` elsewhere, a dashboard): reads both buckets, changes nothing. */
export function viewerPermissions(identity: string): Permissions {
  return {
    publish: [...readBucketPublish(CONDITIONS_BUCKET), ...readBucketPublish(OBSERVED_BUCKET)],
    subscribe: [`${subjects.inboxPrefix(identity)}.>`],
  };
}

/**
 * The shared enrolment credential (operator mode): it may ask to join and hear the answer on the
 * enrolment inbox, nothing else. Every host that asks holds the same credential, so the answers
 * carry nothing secret: a user JWT is useless without the host's private key, which never leaves it.
 */
export function enrolmentPermissions(): Permissions {
  return {
    publish: [subjects.enrolRequest],
    subscribe: [`${subjects.inboxPrefix(identities.enrol)}.>`],
  };
}

/** What reading and watching a bucket needs: stream info, gets, and an ordered consumer of its own. */
function readBucketPublish(bucket: string): string[] {
  const stream = `KV_${bucket}`;
  return [
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    `$JS.API.CONSUMER.CREATE.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.DELETE.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.>`,
    `$JS.FC.${stream}.>`,
  ];
}
