/**
 * The hub's side of admitting hosts over operator-mode NATS (`steward hub --nats-issuer FILE`),
 * wired from its parts: requests to join answered on the bus from what Git declares (the hub's
 * enrolment records and conditions), a user JWT signed for each admitted node's key, and the
 * account's revocations kept to what Git no longer admits — at start, whenever the served
 * declarations change, after the server comes back, and every few minutes in case a push was lost.
 */
import type { Subscription } from "@nats-io/transport-node";
import type { Logger } from "pino";
import type { DeclarationChanges } from "../hub/desired.js";
import {
  credentialRevocations,
  type EnrolmentContext,
  receiveEnrolment,
  recordIssued,
  reviewEnrolments,
} from "../hub/enrolment/enrolments.js";
import type { Hub } from "../hub/hub.js";
import { idFactory } from "../hub/ids.js";
import type { Store } from "../hub/store/store.js";
import type { NatsTls } from "../transport/nats/connect.js";
import { serveEnrolments } from "../transport/nats/enrolment.js";
import type { NatsTransport } from "../transport/nats/hub.js";
import { type NatsIssuer, signNodeUser } from "../transport/nats/operator.js";
import { AccountRevocations } from "../transport/nats/revocations.js";

/** The running hub's parts admission works with, and the server it keeps the account on. */
export interface HubEnrolmentOptions {
  hub: Hub;
  store: Store;
  transport: NatsTransport;
  issuer: NatsIssuer;
  servers: string | string[];
  tls?: NatsTls;
  logger: Logger;
  /** Safety cadence of the revocation check; default 5 minutes. */
  recheckMs?: number;
}

/** The reason of the `TransportDegraded` condition while the account's revocations cannot be kept. */
const NOT_KEPT = "RevocationsNotKept";

/** Admission and revocation of hosts, running until `stop`. */
export class HubEnrolment {
  private readonly revocations: AccountRevocations;
  private readonly newId: () => string;
  private subscription: Subscription | undefined;
  private timer: NodeJS.Timeout | undefined;
  private syncing: Promise<void> | undefined;
  private again = false;
  private degraded = false;
  private stopped = false;

  constructor(private readonly options: HubEnrolmentOptions) {
    this.newId = idFactory(options.hub.clock);
    this.revocations = new AccountRevocations({
      servers: options.servers,
      issuer: options.issuer,
      log: options.logger,
      ...(options.tls ? { tls: options.tls } : {}),
    });
  }

  private context(): EnrolmentContext {
    return {
      store: this.options.store,
      now: this.options.hub.clock.now().toISOString(),
      newId: this.newId,
    };
  }

  /** Answers requests to join and brings the account's revocations up to date. */
  async start(): Promise<void> {
    const { issuer, logger } = this.options;
    await reviewEnrolments(this.context());
    this.subscription = serveEnrolments(
      this.options.transport.connection,
      async (request) => {
        const ctx = this.context();
        const answer = await receiveEnrolment(ctx, {
          node: request.node,
          identity: request.identity,
          labels: request.labels,
          facts: request.facts,
        });
        if (!answer.admit) return answer;
        // Recorded before it is signed and sent: a revocation then always covers it.
        await recordIssued(ctx, answer.admit.node, answer.admit.nkey);
        const jwt = await signNodeUser(issuer, answer.admit.node, answer.admit.nkey);
        return { status: answer.status, message: answer.message, jwt };
      },
      logger,
    );
    await this.revocations.start();
    this.revocations.onReconnect(() => this.keepRevocations());
    this.keepRevocations();
    this.schedule();
  }

  /** The served declarations changed: requests whose node arrived are admitted, keys no longer admitted revoked. */
  declarationsChanged(changes: DeclarationChanges): void {
    if (this.stopped || changes.nodes.length === 0) return;
    reviewEnrolments(this.context(), changes.nodes).then(
      () => this.keepRevocations(),
      (error: unknown) => this.options.logger.error({ err: error }, "reviewing the requests to join failed"),
    );
  }

  /** Resolves once the revocation check in progress (if any) is done: for tests and a clean stop. */
  async settled(): Promise<void> {
    while (this.syncing) await this.syncing;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.subscription?.unsubscribe();
    await this.settled();
    await this.revocations.stop();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(
      () => {
        this.keepRevocations();
        this.schedule();
      },
      this.options.recheckMs ?? 5 * 60_000,
    );
    this.timer.unref();
  }

  /** One check at a time; a trigger during one runs another after it (it may see newer declarations). */
  private keepRevocations(): void {
    if (this.stopped) return;
    if (this.syncing) {
      this.again = true;
      return;
    }
    this.syncing = (async () => {
      do {
        this.again = false;
        await this.keepOnce();
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.syncing = undefined;
    });
  }

  private async keepOnce(): Promise<void> {
    const { logger, hub } = this.options;
    // Up to the next second: JWTs count time in seconds, and one signed this second must be covered.
    const desired = await credentialRevocations(
      this.options.store,
      Math.floor(hub.clock.now().getTime() / 1000) + 1,
    );
    const health = hub.eventsFor("nats").health;
    try {
      const outcome = await this.revocations.apply(desired);
      if (outcome.added.length > 0)
        logger.info({ revoked: outcome.added }, "revoked the credentials of keys Git no longer admits");
      if (this.degraded) {
        this.degraded = false;
        await health({
          status: "recovered",
          reason: NOT_KEPT,
          message: "the account's revocations are as Git says",
        });
      }
    } catch (error) {
      logger.warn({ err: error }, "could not keep the account's revocations; retrying in 30 s");
      if (!this.degraded) {
        this.degraded = true;
        await health({
          status: "degraded",
          reason: NOT_KEPT,
          message: `keys Git no longer admits may still connect: ${(error as Error).message}`,
        });
      }
      const retry = setTimeout(() => this.keepRevocations(), 30_000);
      retry.unref();
    }
  }
}
