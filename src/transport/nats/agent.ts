/**
 * The agent's side of the NATS transport: the loop `steward agent --nats URL --creds FILE --node NAME`
 * runs. It keeps a pull open on the node's durable consumer, applies the attempts that arrived
 * together with the Agent, publishes each result and one fresh full report (also kept in KV
 * `steward-observed`), and only then acknowledges. A crash anywhere before the acknowledgement means
 * redelivery, and the Agent's local record of attempt ids turns a redelivered attempt into a replay
 * of its earlier result.
 *
 * Alongside: a heartbeat per node and per instance with a running service, and answers to the hub's
 * "send a fresh report" requests.
 */
import { setTimeout as delay } from "node:timers/promises";
import {
  type Consumer,
  type ConsumerMessages,
  type JetStreamClient,
  type JsMsg,
  jetstream,
} from "@nats-io/jetstream";
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { AgentReply, AttemptResult, Bundle, Report } from "../../model/generated.js";
import type { LocalAgent } from "../local.js";
import {
  connectNats,
  identityLabel,
  type NatsCredentials,
  type NatsTls,
  readNatsCredentials,
  wrongCredentials,
} from "./connect.js";
import type { HeartbeatMessage } from "./heartbeats.js";
import { type NatsLog, silentLog } from "./log.js";
import { ATTEMPTS_STREAM, attemptConsumer, identities, OBSERVED_BUCKET, subjects } from "./subjects.js";

/** What the loop needs of the Agent (src/agent/agent.ts): the same as the local transport does. */
export type AgentRuntime = LocalAgent;

export interface NatsAgentOptions {
  node: string;
  agent: AgentRuntime;
  /** Server URL(s); ignored when `connection` is given. */
  servers?: string | string[];
  /** The node's credentials file (from `steward nats config`). */
  creds?: string;
  /** The node's credentials, already read (`readNatsCredentials`); wins over `creds`. */
  credentials?: NatsCredentials;
  tls?: NatsTls;
  /** An open connection to use (several agents in one process); not closed by `stop`. */
  connection?: NatsConnection;
  /** Heartbeat interval; default 5,000 ms. */
  heartbeatIntervalMs?: number;
  /** How often to tell the server an attempt is still being worked on; default 1,000 ms. */
  progressIntervalMs?: number;
  clock?: () => Date;
  log?: NatsLog;
}

export interface NatsAgent {
  readonly node: string;
  readonly connection: NatsConnection;
  /** Stops pulling, beating and answering; waits for the attempt in hand to finish. */
  stop(): Promise<void>;
}

/** What `steward agent --nats` logs once its loop runs (a local fleet waits for it). */
export const AGENT_RUNNING = "agent running over NATS";

/** How long one pull request waits on the server; bounds the pause after a server restart. */
export const PULL_EXPIRES_MS = 3_000;

/** Attempts applied together at most, and delivered ahead of being handled (see `take`). */
const MAX_BATCH = 16;

/**
 * A publish whose acknowledgement is lost (the server went down as it was sent) is retried soon
 * rather than after the client's 5 s default; ids make the retries harmless.
 */
const PUBLISH_RETRY = { timeout: 2_000, retries: 5 };

/** Service-like resources: an instance having one is watched by its own heartbeat while it runs. */
const SERVICE_KINDS = new Set(["service", "container", "systemd-unit"]);

/**
 * Connects as the node and runs its loop until `stop`. Resolves once the loop is running; rejects
 * with NatsAuthorizationError when the server refuses the credentials (or their absence), and
 * NatsWrongCredentialsError when they are another identity's, having closed the connection.
 */
export async function runNatsAgent(options: NatsAgentOptions): Promise<NatsAgent> {
  const credentials = options.credentials ?? (options.creds ? readNatsCredentials(options.creds) : undefined);
  const nc =
    options.connection ??
    (await connectNats({
      servers: options.servers ?? "nats://127.0.0.1:4222",
      identity: identities.node(options.node),
      waitOnFirstConnect: true,
      ...(credentials ? { credentials } : {}),
      ...(options.tls ? { tls: options.tls } : {}),
    }));
  const loop = new AgentLoop(nc, options);
  try {
    await loop.start();
  } catch (error) {
    await loop.stop().catch(() => undefined);
    if (!options.connection) await nc.close().catch(() => undefined);
    if (error instanceof RefusedSubjects)
      throw wrongCredentials(identityLabel(identities.node(options.node)), credentials, error.message);
    throw error;
  }
  return {
    node: options.node,
    connection: nc,
    stop: async () => {
      await loop.stop();
      if (!options.connection) await nc.close();
    },
  };
}

/** The server refused the node's own subjects to this connection (see `AgentLoop.start`). */
class RefusedSubjects extends Error {}

class AgentLoop {
  private readonly js: JetStreamClient;
  private readonly node: string;
  private readonly clock: () => Date;
  private readonly log: NatsLog;
  private readonly intervalMs: number;
  /** Highest generation applied per assignment: an older attempt arriving later is superseded. */
  private readonly applied = new Map<string, number>();
  /** Instances whose service beats; one that stops gets a last `stopped` beat. */
  private beating = new Set<string>();
  private handling: Promise<void> | undefined;
  /** Attempts delivered and not yet handled, in order (see `take`). */
  private readonly inHand: JsMsg[] = [];
  private taking = false;
  private messages: ConsumerMessages | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private control: Subscription | undefined;
  private reportChain: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: NatsAgentOptions,
  ) {
    this.js = jetstream(nc);
    this.node = options.node;
    attemptConsumer(this.node);
    this.clock = options.clock ?? (() => new Date());
    this.log = options.log ?? silentLog;
    this.intervalMs = options.heartbeatIntervalMs ?? 5_000;
  }

  /**
   * Starts beating, answering and pulling. The node's control subject is subscribed first and a
   * round trip made: the server refuses that subscription, before its answer to the round trip,
   * to credentials that are not the node's — which then throw RefusedSubjects, before anything
   * else is sent.
   */
  async start(): Promise<void> {
    let refused: Error | undefined;
    let checked = false;
    this.control = this.nc.subscribe(subjects.control(this.node), {
      callback: (error, msg) => {
        if (error) {
          // A later refusal (the server's permissions changed under a running agent) is logged.
          if (checked)
            this.log.error(
              { node: this.node, error: error.message },
              "the server refuses this node's control subject",
            );
          else refused = error;
          return;
        }
        msg.respond(JSON.stringify({ accepted: true }));
        void this.observeAndPublish();
      },
    });
    await this.nc.flush();
    checked = true;
    if (refused) throw new RefusedSubjects(refused.message);
    this.beat();
    this.heartbeatTimer = setInterval(() => this.beat(), this.intervalMs);
    const report = await this.options.agent.observe();
    this.learn(report);
    void this.publishReport(report);
    await this.options.agent.start?.((fresh) => this.publishReport(fresh));
    void this.pull();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.control?.unsubscribe();
    // Attempts not started go back at once rather than after their deadline; one being applied is waited for.
    for (const msg of this.inHand.splice(0)) msg.nak();
    await this.messages?.close().catch(() => undefined);
    await this.handling;
    await this.options.agent.stop?.();
    await this.reportChain;
  }

  /**
   * Waits for the hub to have created this node's consumer, then keeps one pull open on it
   * (renewed by the client; heartbeats end a pull a restarted server forgot). Attempts go to `inHand`
   * as they arrive and are taken from there together, so the attempts of one commit, dispatched
   * at the same moment, are applied together and answered by one report.
   */
  private async pull(): Promise<void> {
    const consumer = await this.consumer();
    if (!consumer || this.stopped) return;
    try {
      this.messages = await consumer.consume({
        max_messages: MAX_BATCH,
        expires: PULL_EXPIRES_MS,
        callback: (msg) => {
          if (this.stopped) msg.nak();
          else {
            this.inHand.push(msg);
            this.take();
          }
        },
      });
      void this.watchPull(this.messages);
      this.log.debug({ node: this.node }, "pulling attempts");
    } catch (error) {
      if (this.stopped) return;
      this.log.warn({ node: this.node, error: String(error) }, "pulling attempts failed; retrying");
      await delay(1_000);
      return this.pull();
    }
  }

  /**
   * Handles what is in hand, a batch at a time, one batch after another. Deferred to the next turn
   * of the event loop, so attempts that came in the same read from the socket join one batch.
   */
  private take(): void {
    if (this.taking) return;
    this.taking = true;
    setImmediate(async () => {
      while (!this.stopped && this.inHand.length > 0) {
        this.handling = this.handle(this.inHand.splice(0, MAX_BATCH));
        await this.handling;
        this.handling = undefined;
      }
      this.taking = false;
    });
  }

  /** Logs what the client says of the pull (missed heartbeats, a consumer gone after a server restart). */
  private async watchPull(messages: ConsumerMessages): Promise<void> {
    for await (const status of messages.status()) {
      const fields = { node: this.node, status: status.type };
      // A pull that expired empty (discard) or was renewed is the idle course of things.
      if (["debug", "next", "heartbeat", "discard", "reset"].includes(status.type))
        this.log.debug(fields, "pull");
      else this.log.warn({ ...fields, detail: JSON.stringify(status) }, `pulling attempts: ${status.type}`);
    }
  }

  private async consumer(): Promise<Consumer | undefined> {
    let logged = false;
    while (!this.stopped) {
      try {
        return await this.js.consumers.get(ATTEMPTS_STREAM, attemptConsumer(this.node));
      } catch (error) {
        if (!logged)
          this.log.warn(
            { node: this.node, error: String(error) },
            "no attempt consumer for this node yet; waiting for the hub to create it",
          );
        logged = true;
        await delay(1_000);
      }
    }
    return undefined;
  }

  /** The bundle a message carries; a message that is none for this node is terminated. */
  private bundleOf(msg: JsMsg): Bundle | undefined {
    let bundle: Bundle;
    try {
      bundle = msg.json<Bundle>();
    } catch {
      this.log.error({ node: this.node, seq: msg.seq }, "attempt is not JSON; rejected");
      msg.term("not JSON");
      return undefined;
    }
    if (
      bundle?.kind !== "Bundle" ||
      bundle.spec?.node !== this.node ||
      typeof bundle.attemptId !== "string"
    ) {
      this.log.error({ node: this.node, seq: msg.seq }, "attempt is not a bundle for this node; rejected");
      msg.term("not a bundle for this node");
      return undefined;
    }
    return bundle;
  }

  /**
   * Applies the attempts in order (several under one hold of the Agent, one report after all),
   * publishes each result and the report, and only then acknowledges each.
   */
  private async handle(msgs: readonly JsMsg[]): Promise<void> {
    const work: { msg: JsMsg; bundle: Bundle }[] = [];
    for (const msg of msgs) {
      const bundle = this.bundleOf(msg);
      if (!bundle) continue;
      const newest = this.applied.get(bundle.spec.assignment) ?? 0;
      if (bundle.generation < newest) {
        const result = this.superseded(bundle, newest);
        await this.publishResult(result);
        msg.ack();
        this.logAttempt(result);
      } else work.push({ msg, bundle });
    }
    if (work.length === 0) return;
    // Still being worked on, and those waiting behind them are still wanted: no redelivery meanwhile.
    const progress = setInterval(() => {
      for (const { msg } of work) msg.working();
      for (const msg of this.inHand) msg.working();
    }, this.options.progressIntervalMs ?? 1_000);
    const started = Date.now();
    let outcomes: ({ result: AttemptResult } | { error: unknown })[];
    let report: Report;
    try {
      const agent = this.options.agent;
      if (work.length > 1 && agent.applyAll) {
        ({ outcomes, report } = await agent.applyAll(work.map((w) => w.bundle)));
      } else {
        // One at a time (an Agent without applyAll); the last reply's report covers them all.
        outcomes = [];
        let last: Report | undefined;
        for (const { bundle } of work) {
          const reply: AgentReply = await agent.apply(bundle);
          outcomes.push({ result: reply.result });
          last = reply.report;
        }
        report = last as Report;
      }
    } catch (error) {
      // The Agent itself failed (not the attempt): let the server redeliver within its bound.
      for (const { msg, bundle } of work) {
        this.logUnanswered(bundle, started, error);
        msg.nak(1_000);
      }
      return;
    } finally {
      clearInterval(progress);
    }
    const answered: { msg: JsMsg; result: AttemptResult }[] = [];
    work.forEach(({ msg, bundle }, i) => {
      const outcome = outcomes[i];
      if (outcome && "result" in outcome) answered.push({ msg, result: outcome.result });
      else {
        this.logUnanswered(bundle, started, outcome?.error);
        msg.nak(1_000);
      }
    });
    for (const { result } of answered)
      this.applied.set(
        result.assignment,
        Math.max(this.applied.get(result.assignment) ?? 0, result.generation),
      );
    try {
      // Sent together on one connection, so the stream still holds the results before the report.
      await Promise.all([
        ...answered.map(({ result }) => this.publishResult(result)),
        this.publishReport(report),
      ]);
      for (const { msg, result } of answered) {
        msg.ack();
        this.logAttempt(result);
      }
    } catch (error) {
      // Not acknowledged: the attempts come back and the Agent replays their results.
      this.log.warn(
        { node: this.node, attempts: answered.map(({ result }) => result.attemptId), error: String(error) },
        "could not publish the results; the attempts will be redelivered",
      );
    }
  }

  /** The one line an attempt gets once its result is published: what it was, how it ended, how long it took. */
  private logAttempt(result: AttemptResult): void {
    const fields = {
      node: this.node,
      attemptId: result.attemptId,
      assignment: result.assignment,
      generation: result.generation,
      outcome: result.outcome,
      durationMs: Math.max(0, Date.parse(result.finishedAt) - Date.parse(result.startedAt)) || 0,
      ...(result.failureClass ? { failureClass: result.failureClass } : {}),
      ...(result.reason ? { reason: result.reason } : {}),
      ...(result.duplicate ? { duplicate: true } : {}),
    };
    if (result.outcome === "succeeded") this.log.info(fields, `attempt ${result.outcome}`);
    else this.log.warn(fields, `attempt ${result.outcome}${result.reason ? `: ${result.reason}` : ""}`);
  }

  /** The line of an attempt the Agent could not answer: it goes back to the server to come again. */
  private logUnanswered(bundle: Bundle, started: number, error: unknown): void {
    this.log.error(
      {
        node: this.node,
        attemptId: bundle.attemptId,
        assignment: bundle.spec.assignment,
        generation: bundle.generation,
        outcome: "redelivered",
        durationMs: Date.now() - started,
        error: String(error),
      },
      "attempt not applied: the agent failed; it will be redelivered",
    );
  }

  private superseded(bundle: Bundle, newest: number): AttemptResult {
    const now = this.clock().toISOString();
    return {
      attemptId: bundle.attemptId,
      node: this.node,
      assignment: bundle.spec.assignment,
      generation: bundle.generation,
      outcome: "failed",
      failureClass: "permanent",
      reason: "Superseded",
      message: `generation ${bundle.generation} is older than generation ${newest}, already applied; not applied`,
      resources: [],
      startedAt: now,
      finishedAt: now,
    };
  }

  private async publishResult(result: AttemptResult): Promise<void> {
    // The id makes a retry, or the replay of a redelivered attempt, reach the hub once.
    await this.js.publish(subjects.result(this.node), JSON.stringify(result), {
      msgID: `result-${result.attemptId}`,
      ...PUBLISH_RETRY,
    });
  }

  /** Publishes a report on the stream and as the node's last report in KV, in the order reports come. */
  private publishReport(report: Report): Promise<void> {
    this.learn(report);
    const data = JSON.stringify(report);
    const publish = async () => {
      // No message id: a report sent twice is harmless (a full observation), one dropped is not.
      await Promise.all([
        this.js.publish(subjects.report(this.node), data, PUBLISH_RETRY),
        this.js.publish(subjects.kv(OBSERVED_BUCKET, this.node), data, PUBLISH_RETRY),
      ]);
    };
    const next = this.reportChain.then(publish);
    this.reportChain = next.catch((error) => {
      this.log.warn({ node: this.node, error: String(error) }, "could not publish a report");
    });
    return next;
  }

  private async observeAndPublish(): Promise<void> {
    try {
      await this.publishReport(await this.options.agent.observe());
    } catch (error) {
      this.log.warn({ node: this.node, error: String(error) }, "could not observe or publish a report");
    }
  }

  /** Notes what a report says: generations applied, and which instances have a running service. */
  private learn(report: Report): void {
    const running = new Set<string>();
    for (const instance of report.instances) {
      if (instance.generation > (this.applied.get(instance.assignment) ?? 0))
        this.applied.set(instance.assignment, instance.generation);
      const serviceUp =
        instance.state === "running" &&
        instance.resources.some((r) => SERVICE_KINDS.has(r.kind)) &&
        instance.resources.filter((r) => SERVICE_KINDS.has(r.kind)).every((r) => r.status === "ok");
      if (serviceUp) running.add(instance.assignment);
    }
    for (const assignment of this.beating)
      if (!running.has(assignment)) this.publishBeat({ ...this.beatBase(), assignment, state: "stopped" });
    this.beating = running;
  }

  private beatBase(): HeartbeatMessage {
    return { node: this.node, at: this.clock().toISOString(), intervalMs: this.intervalMs };
  }

  private beat(): void {
    if (this.stopped) return;
    this.publishBeat(this.beatBase());
    for (const assignment of this.beating)
      this.publishBeat({ ...this.beatBase(), assignment, state: "running" });
  }

  private publishBeat(beat: HeartbeatMessage): void {
    if (this.nc.isClosed()) return;
    this.nc.publish(subjects.heartbeat(beat.node, beat.assignment), JSON.stringify(beat));
  }
}
