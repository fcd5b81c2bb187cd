/**
 * The agent's side of the NATS transport: the loop `steward agent --nats URL --creds FILE --node NAME`
 * runs. The node's attempts are pushed to it as the hub posts them to its mailbox (mailbox.ts), and
 * it reads the mailbox itself when it may have missed some: at start, after every reconnect, when
 * the mailbox's list changes, when the hub asks for a fresh report, and a second after an attempt
 * it could not finish. It applies the attempts that arrived together with the Agent and publishes
 * each result and one fresh full report (also kept in KV `steward-observed`). An attempt read again
 * — the agent restarted before its result left, say — is handed to the Agent once more, whose local
 * record of attempt ids turns it into a replay of its earlier result: nothing is applied twice.
 *
 * Alongside: a heartbeat per node and per instance with a running service, and answers to the hub's
 * "send a fresh report" requests.
 */
import { setTimeout as delay } from "node:timers/promises";
import { type DirectStreamAPI, type JetStreamClient, jetstream, jetstreamManager } from "@nats-io/jetstream";
import {
  type Msg,
  type NatsConnection,
  NoRespondersError,
  type Subscription,
  TimeoutError,
} from "@nats-io/transport-node";
import type { AgentReply, AttemptResult, Bundle, Report } from "../../model/generated.js";
import type { LocalAgent } from "../local.js";
import {
  causedBy,
  connectNats,
  identityLabel,
  type NatsCredentials,
  type NatsTls,
  readNatsCredentials,
  untilServerAnswers,
  wrongCredentials,
} from "./connect.js";
import type { HeartbeatMessage } from "./heartbeats.js";
import { type NatsLog, silentLog } from "./log.js";
import { readMailbox } from "./mailbox.js";
import { assertToken, identities, OBSERVED_BUCKET, subjects } from "./subjects.js";

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

/** Attempts applied together at most (see `take`). */
const MAX_BATCH = 16;

/** Times an attempt the Agent could not answer is taken again, a second apart, before it is left to the hub. */
const MAX_TRIES = 5;
const RETRY_MS = 1_000;

/** How long a read of the mailbox waits for the server. */
const MAILBOX_TIMEOUT_MS = 2_000;

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
  const log = options.log ?? silentLog;
  const nc =
    options.connection ??
    (await connectNats({
      servers: options.servers ?? "nats://127.0.0.1:4222",
      identity: identities.node(options.node),
      waitOnFirstConnect: true,
      // The server going away between the connection and its first round trip is waited for.
      onWaitingForServer: waitingFor(log, options.node),
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

/** What the agent says each time it finds the server away and waits for it. */
function waitingFor(log: NatsLog, node: string): (error: Error, attempt: number) => void {
  return (error, attempt) => log.warn({ node, error: error.message, attempt }, "waiting for the NATS server");
}

/** The server refused the node's own subjects to this connection (see `AgentLoop.start`). */
class RefusedSubjects extends Error {}

class AgentLoop {
  private readonly js: JetStreamClient;
  private direct: DirectStreamAPI | undefined;
  private readonly node: string;
  private readonly clock: () => Date;
  private readonly log: NatsLog;
  private readonly intervalMs: number;
  /** Highest generation applied per assignment: an older attempt arriving later is superseded. */
  private readonly applied = new Map<string, number>();
  /**
   * Per assignment, the attempt taken last in this process (waiting, being applied or answered): the
   * same attempt pushed and read from the mailbox, or read again, is taken once.
   */
  private readonly taken = new Map<string, string>();
  /** Attempts the Agent could not answer, and how often. */
  private readonly tries = new Map<string, number>();
  /** Instances whose service beats; one that stops gets a last `stopped` beat. */
  private beating = new Set<string>();
  private handling: Promise<void> | undefined;
  /** Attempts received and not yet handled, in order (see `take`). */
  private readonly inHand: Bundle[] = [];
  private taking = false;
  private catchingUp: Promise<void> | undefined;
  private catchUpAgain = false;
  private toldNoMailbox = false;
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private readonly subscriptions: Subscription[] = [];
  private reportChain: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: NatsAgentOptions,
  ) {
    this.js = jetstream(nc);
    this.node = options.node;
    assertToken(this.node, "node name");
    this.clock = options.clock ?? (() => new Date());
    this.log = options.log ?? silentLog;
    this.intervalMs = options.heartbeatIntervalMs ?? 5_000;
  }

  /**
   * Starts beating, answering and receiving. The node's subjects are subscribed first and a round
   * trip made: the server refuses those subscriptions, before its answer to the round trip, to
   * credentials that are not the node's — which then throw RefusedSubjects, before anything else is
   * sent.
   */
  async start(): Promise<void> {
    let refused: Error | undefined;
    let checked = false;
    const subscribe = (subject: string, onMessage: (msg: Msg) => void) =>
      this.subscriptions.push(
        this.nc.subscribe(subject, {
          callback: (error, msg) => {
            if (!error) return onMessage(msg);
            // A later refusal (the server's permissions changed under a running agent) is logged.
            if (checked)
              this.log.error(
                { node: this.node, subject, error: error.message },
                "the server refuses this node's subject",
              );
            else refused ??= error;
          },
        }),
      );
    subscribe(subjects.control(this.node), (msg) => {
      msg.respond(JSON.stringify({ accepted: true }));
      // The hub asks when it misses a result: an attempt never received is read now.
      this.catchUp();
      void this.observeAndPublish();
    });
    subscribe(subjects.attemptsOf(this.node), (msg) => this.receive(msg.data));
    subscribe(subjects.mailbox(this.node), () => this.catchUp());
    // A round trip the server's restart cut off is made again once the client is back, which sends
    // the subscriptions again first: a refusal still comes before its answer.
    await untilServerAnswers(() => this.nc.flush(), waitingFor(this.log, this.node));
    checked = true;
    if (refused) throw new RefusedSubjects(refused.message);
    // No API check: a node may not ask for the account's JetStream information.
    this.direct = (await jetstreamManager(this.nc, { checkAPI: false, timeout: MAILBOX_TIMEOUT_MS })).direct;
    this.beat();
    this.heartbeatTimer = setInterval(() => this.beat(), this.intervalMs);
    const report = await this.options.agent.observe();
    this.learn(report);
    void this.publishReport(report);
    await this.options.agent.start?.((fresh) => this.publishReport(fresh));
    void this.watchConnection();
    this.catchUp();
    this.log.debug({ node: this.node }, "receiving attempts");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    for (const timer of this.retryTimers) clearTimeout(timer);
    for (const sub of this.subscriptions) sub.unsubscribe();
    // Attempts not started stay in the mailbox for the next start; one being applied is waited for.
    this.inHand.splice(0);
    await this.catchingUp;
    await this.handling;
    await this.options.agent.stop?.();
    await this.reportChain;
  }

  /** After each reconnect the mailbox is read: attempts posted while the connection was down were not pushed. */
  private async watchConnection(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (this.stopped) return;
      if (status.type === "reconnect") this.catchUp();
    }
  }

  /**
   * Reads the node's mailbox and takes what it holds that was not taken yet. One read at a time; a
   * request meanwhile makes one more read after it. A read that fails (the server is away) is
   * tried again a second later, until it succeeds or the loop stops.
   */
  private catchUp(): void {
    // Before the loop has its JetStream handle (a report request during start), start reads it.
    const direct = this.direct;
    if (this.stopped || !direct) return;
    if (this.catchingUp) {
      this.catchUpAgain = true;
      return;
    }
    this.catchingUp = (async () => {
      do {
        this.catchUpAgain = false;
        try {
          for (const entry of await readMailbox(direct, this.node)) this.receive(entry.data);
        } catch (error) {
          // Nothing answers for a stream the hub has not made yet (an agent started first): said once.
          const unanswered = causedBy(error, NoRespondersError) || causedBy(error, TimeoutError);
          if (!unanswered)
            this.log.warn({ node: this.node, error: String(error) }, "reading the mailbox failed; retrying");
          else if (!this.toldNoMailbox)
            this.log.warn(
              { node: this.node, error: String(error) },
              "the mailbox does not answer; waiting for the hub to create it",
            );
          this.toldNoMailbox ||= unanswered;
          this.catchUpAgain = true;
          await delay(RETRY_MS);
        }
      } while (this.catchUpAgain && !this.stopped);
      this.catchingUp = undefined;
    })();
  }

  /** Takes an attempt pushed or read from the mailbox, unless it was taken already. */
  private receive(data: Uint8Array): void {
    if (this.stopped) return;
    const bundle = this.bundleOf(data);
    if (!bundle || this.taken.get(bundle.spec.assignment) === bundle.attemptId) return;
    this.taken.set(bundle.spec.assignment, bundle.attemptId);
    this.inHand.push(bundle);
    this.take();
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

  /** The bundle a message carries; one that is none for this node is logged and dropped. */
  private bundleOf(data: Uint8Array): Bundle | undefined {
    let bundle: Bundle;
    try {
      bundle = JSON.parse(new TextDecoder().decode(data)) as Bundle;
    } catch {
      this.log.error({ node: this.node }, "attempt is not JSON; rejected");
      return undefined;
    }
    if (
      bundle?.kind !== "Bundle" ||
      bundle.spec?.node !== this.node ||
      typeof bundle.attemptId !== "string" ||
      typeof bundle.spec.assignment !== "string"
    ) {
      this.log.error({ node: this.node }, "attempt is not a bundle for this node; rejected");
      return undefined;
    }
    return bundle;
  }

  /**
   * Takes `bundles` again a second from now, by reading the mailbox (which may hold a newer attempt
   * by then). `counted`: the Agent failed on them, which is tried MAX_TRIES times, then left to the
   * hub (its attempt lease runs out and it asks for a fresh report).
   */
  private again(bundles: readonly Bundle[], counted: boolean): void {
    for (const bundle of bundles) {
      const tries = (this.tries.get(bundle.attemptId) ?? 0) + (counted ? 1 : 0);
      if (tries >= MAX_TRIES) {
        this.tries.delete(bundle.attemptId);
        this.log.error(
          { node: this.node, attemptId: bundle.attemptId, tries },
          "attempt not applied after every try; left to the hub",
        );
        continue;
      }
      this.tries.set(bundle.attemptId, tries);
      if (this.taken.get(bundle.spec.assignment) === bundle.attemptId)
        this.taken.delete(bundle.spec.assignment);
    }
    const timer = setTimeout(() => {
      this.retryTimers.delete(timer);
      this.catchUp();
    }, RETRY_MS);
    this.retryTimers.add(timer);
  }

  /**
   * Applies the attempts in order (several under one hold of the Agent, one report after all) and
   * publishes each result and the report.
   */
  private async handle(bundles: readonly Bundle[]): Promise<void> {
    const work: Bundle[] = [];
    for (const bundle of bundles) {
      const newest = this.applied.get(bundle.spec.assignment) ?? 0;
      if (bundle.generation < newest) {
        const result = this.superseded(bundle, newest);
        try {
          await this.publishResult(result);
          this.logAttempt(result);
        } catch {
          this.again([bundle], false);
        }
      } else work.push(bundle);
    }
    if (work.length === 0) return;
    const started = Date.now();
    let outcomes: ({ result: AttemptResult } | { error: unknown })[];
    let report: Report;
    try {
      const agent = this.options.agent;
      if (work.length > 1 && agent.applyAll) {
        ({ outcomes, report } = await agent.applyAll(work));
      } else {
        // One at a time (an Agent without applyAll); the last reply's report covers them all.
        outcomes = [];
        let last: Report | undefined;
        for (const bundle of work) {
          const reply: AgentReply = await agent.apply(bundle);
          outcomes.push({ result: reply.result });
          last = reply.report;
        }
        report = last as Report;
      }
    } catch (error) {
      // The Agent itself failed (not the attempt): taken again within the bound.
      for (const bundle of work) this.logUnanswered(bundle, started, error);
      this.again(work, true);
      return;
    }
    const answered: AttemptResult[] = [];
    const unanswered: Bundle[] = [];
    work.forEach((bundle, i) => {
      const outcome = outcomes[i];
      if (outcome && "result" in outcome) answered.push(outcome.result);
      else {
        this.logUnanswered(bundle, started, outcome?.error);
        unanswered.push(bundle);
      }
    });
    if (unanswered.length > 0) this.again(unanswered, true);
    for (const result of answered) {
      this.tries.delete(result.attemptId);
      this.applied.set(
        result.assignment,
        Math.max(this.applied.get(result.assignment) ?? 0, result.generation),
      );
    }
    try {
      // Sent together on one connection, so the stream still holds the results before the report.
      await Promise.all([
        ...answered.map((result) => this.publishResult(result)),
        this.publishReport(report),
      ]);
      for (const result of answered) this.logAttempt(result);
    } catch (error) {
      // Taken again from the mailbox: the Agent replays their results.
      this.log.warn(
        { node: this.node, attempts: answered.map((result) => result.attemptId), error: String(error) },
        "could not publish the results; the attempts will be taken again",
      );
      this.again(
        work.filter((bundle) => answered.some((result) => result.attemptId === bundle.attemptId)),
        false,
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
        outcome: "taken again",
        durationMs: Date.now() - started,
        error: String(error),
      },
      "attempt not applied: the agent failed; it will be taken again",
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
