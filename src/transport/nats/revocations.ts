/**
 * Revoking what Git no longer admits, without a server reload: the account JWT's `revocations`
 * (user public key → time; every user JWT for that key issued until then is refused, and a
 * connected user is cut off at once with "User Authentication Revoked"), pushed to the server as a
 * system-account user through `$SYS.REQ.CLAIMS.UPDATE`.
 *
 * Level-based: `apply` reads the account as the server holds it now (`CLAIMS.LOOKUP`), keeps every
 * revocation already there, adds the keys to revoke, lifts those admitted again, and pushes only
 * when that changes something — so neither a lost hub database nor a server rebuilt from
 * `nats config` forgets a revocation the other still knows. Everything else in the account JWT
 * (limits, imports, signing keys) stays as the server has it.
 *
 * Measured on Debian's nats-server 2.9.10: `resolver: MEMORY` answers neither lookups nor updates
 * (no responders); the `full` resolver takes the update, cuts the revoked user off, refuses its
 * reconnection, and keeps the update across a restart.
 */
import { decode } from "@nats-io/jwt";
import { credsAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import { EnvironmentError } from "../../model/errors.js";
import { connectNats, type NatsTls } from "./connect.js";
import { type NatsLog, silentLog } from "./log.js";
import { type NatsIssuer, signAccount, systemCreds } from "./operator.js";

/** The revocations the account should hold. */
export interface DesiredRevocations {
  /** Keys to revoke, with the time (seconds) to revoke their JWTs up to; one already revoked keeps its time. */
  revoke: ReadonlyMap<string, number>;
  /** Keys admitted now: never left revoked. */
  admitted: ReadonlySet<string>;
}

/** What one `apply` did. */
export interface RevocationOutcome {
  /** Whether a new account JWT was pushed. */
  pushed: boolean;
  /** Every key the account revokes now. */
  revoked: string[];
  /** Keys revoked by this push, and keys whose revocation it lifted. */
  added: string[];
  lifted: string[];
}

/** The server did not take the account update (or could not be asked): say it and try again later. */
export class RevocationError extends EnvironmentError {
  override readonly name = "RevocationError";
  constructor(message: string, data: Record<string, unknown> = {}, cause?: unknown) {
    super(message, { code: "E_NATS_REVOCATION", data, cause });
  }
}

/** The server, and the issuer whose system user and operator signing key update the account. */
export interface AccountRevocationsOptions {
  servers: string | string[];
  issuer: NatsIssuer;
  tls?: NatsTls;
  log?: NatsLog;
  /** How long each request to the server may take; default 5,000 ms. */
  timeoutMs?: number;
}

/** The account's revocations, kept as desired over a system-account connection. */
export class AccountRevocations {
  private nc: NatsConnection | undefined;
  private readonly log: NatsLog;

  constructor(private readonly options: AccountRevocationsOptions) {
    this.log = options.log ?? silentLog;
  }

  /** Connects as the system-account user (waiting while the server is not there). */
  async start(): Promise<void> {
    this.nc = await connectNats({
      servers: this.options.servers,
      identity: "hub-system",
      credentials: {
        file: "--nats-issuer (system user)",
        authenticator: credsAuthenticator(systemCreds(this.options.issuer)),
        publicKey: "system",
        owner: "the hub's system-account user",
      },
      label: {
        who: "the hub's system-account user",
        flag: "--nats-issuer FILE",
        file: "credentials/hub-issuer.json",
      },
      onWaitingForServer: (error, attempt, retryInMs) =>
        this.log.warn(
          { error: error.message, attempt, retryInMs },
          `waiting for the NATS server to keep revocations (attempt ${attempt}): ${error.message}`,
        ),
      ...(this.options.tls ? { tls: this.options.tls } : {}),
    });
  }

  /** Called after each reconnection (a restarted server: look at what it holds again). */
  onReconnect(listener: () => void): void {
    const nc = this.connection();
    void (async () => {
      for await (const status of nc.status()) if (status.type === "reconnect") listener();
    })();
  }

  /** Makes the account's revocations what `desired` says (see the module comment). */
  async apply(desired: DesiredRevocations): Promise<RevocationOutcome> {
    const nc = this.connection();
    const account = this.options.issuer.account.publicKey;
    const timeout = this.options.timeoutMs ?? 5_000;
    let current: { nats: Record<string, unknown> & { revocations?: Record<string, number> } };
    try {
      const reply = await nc.request(`$SYS.REQ.ACCOUNT.${account}.CLAIMS.LOOKUP`, "", { timeout });
      current = decode(reply.string()) as typeof current;
    } catch (error) {
      throw new RevocationError(
        `cannot read steward's account from the NATS server (${(error as Error).message}): it must run with the \`full\` resolver \`steward nats config\` writes`,
        { account },
        error,
      );
    }
    const before = current.nats.revocations ?? {};
    const next: Record<string, number> = { ...before };
    const added: string[] = [];
    const lifted: string[] = [];
    for (const [key, at] of desired.revoke)
      if (!(key in next) && !desired.admitted.has(key)) {
        next[key] = at;
        added.push(key);
      }
    for (const key of desired.admitted)
      if (key in next) {
        delete next[key];
        lifted.push(key);
      }
    const revoked = Object.keys(next).sort();
    if (added.length === 0 && lifted.length === 0) return { pushed: false, revoked, added, lifted };
    const { revocations: _old, ...claims } = current.nats;
    const jwt = await signAccount(this.options.issuer, {
      ...claims,
      ...(revoked.length > 0 ? { revocations: next } : {}),
    });
    let answer: {
      data?: { code?: number; message?: string };
      error?: { code?: number; description?: string };
    };
    try {
      answer = (await nc.request("$SYS.REQ.CLAIMS.UPDATE", jwt, { timeout })).json();
    } catch (error) {
      throw new RevocationError(
        `the NATS server did not take steward's account update (${(error as Error).message}): retrying`,
        { account },
        error,
      );
    }
    if (answer.error || answer.data?.code !== 200)
      throw new RevocationError(
        `the NATS server refused steward's account update: ${answer.error?.description ?? answer.data?.message ?? JSON.stringify(answer)}`,
        { account },
      );
    this.log.info(
      { added, lifted, revoked: revoked.length },
      `account updated: ${added.length} keys revoked, ${lifted.length} admitted again`,
    );
    return { pushed: true, revoked, added, lifted };
  }

  async stop(): Promise<void> {
    await this.nc?.close().catch(() => undefined);
    this.nc = undefined;
  }

  private connection(): NatsConnection {
    if (!this.nc) throw new Error("AccountRevocations: start() first");
    return this.nc;
  }
}
