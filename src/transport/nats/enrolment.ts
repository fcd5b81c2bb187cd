/**
 * Asking to join over NATS. A new host connects with the shared enrolment credential (it may only
 * publish on `steward.enrol.request` and hear replies on `_INBOX_enrol`), and asks with its name,
 * the labels it wants, its public identity and facts about itself, signed with its nkey (proof it
 * holds the private key it asks credentials for). The hub answers `queued`, `duplicate`, `refused`
 * or — once Git admits the host — `admitted` with the user JWT it signed for that key. The host
 * asks again at an interval while it waits: every answer is what the hub decides from what is
 * declared now, so nothing has to remember who is waiting.
 *
 * Nothing private travels: the request carries public keys and a signature, the answer a JWT that
 * is useless without the host's seed.
 */
import { setTimeout as delay } from "node:timers/promises";
import { fromPublic, fromSeed } from "@nats-io/nkeys";
import {
  errors,
  jwtAuthenticator,
  type Msg,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import { canonicalJson } from "../../model/canonical.js";
import { EnvironmentError } from "../../model/errors.js";
import { connectNats, type NatsCredentials, type NatsTls, shortKey } from "./connect.js";
import { type NatsLog, silentLog } from "./log.js";
import { identities, subjects } from "./subjects.js";

/** What a host says of itself (never a secret). */
export interface HostFactsMessage {
  hostname: string;
  os: string;
  arch: string;
  agentVersion: string;
}

/** A host's request to join, as it travels. */
export interface EnrolmentRequestMessage {
  kind: "EnrolmentRequest";
  node: string;
  labels: Record<string, string>;
  identity: { nkey: string; age: string };
  facts: HostFactsMessage;
  at: string;
  /** base64url ed25519 signature, by the nkey, of the canonical JSON of every other field. */
  signature: string;
}

/** The hub's answer. */
export interface EnrolmentAnswerMessage {
  kind: "EnrolmentAnswer";
  node: string;
  status: "queued" | "duplicate" | "refused" | "admitted";
  message: string;
  task?: string;
  /** With `admitted`: the host's user JWT. */
  jwt?: string;
}

const NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const NKEY = /^U[A-Z2-7]{55}$/;
const AGE = /^age1[02-9ac-hj-np-z]{58}$/;
const LABEL_KEY = /^[A-Za-z0-9][-A-Za-z0-9_./]{0,62}$/;

function unsigned(request: Omit<EnrolmentRequestMessage, "signature">): Uint8Array {
  const { kind, node, labels, identity, facts, at } = request;
  return new TextEncoder().encode(canonicalJson({ kind, node, labels, identity, facts, at }));
}

/** A request signed with the host's nkey seed (which is used here and never put in the message). */
export function signedRequest(
  request: Omit<EnrolmentRequestMessage, "kind" | "signature">,
  seed: string,
): EnrolmentRequestMessage {
  const body = { kind: "EnrolmentRequest" as const, ...request };
  const pair = fromSeed(new TextEncoder().encode(seed));
  if (pair.getPublicKey() !== request.identity.nkey)
    throw new Error("the request's nkey is not the public key of the seed that signs it");
  return { ...body, signature: Buffer.from(pair.sign(unsigned(body))).toString("base64url") };
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses.
const CONTROL = /[\u0000-\u001f]/;

function isText(value: unknown, max: number): value is string {
  return typeof value === "string" && value.length > 0 && value.length <= max && !CONTROL.test(value);
}

/** Parses and checks a request: its shape, and its signature by the key it names. */
export function verifyRequest(data: Uint8Array): { request: EnrolmentRequestMessage } | { problem: string } {
  let value: Partial<EnrolmentRequestMessage>;
  try {
    value = JSON.parse(new TextDecoder().decode(data)) as Partial<EnrolmentRequestMessage>;
  } catch {
    return { problem: "the request is not JSON" };
  }
  if (value?.kind !== "EnrolmentRequest") return { problem: "the request is not an EnrolmentRequest" };
  if (!isText(value.node, 63) || !NAME.test(value.node))
    return { problem: `node name ${JSON.stringify(value.node)} is not a DNS label (e.g. web-3)` };
  if (!NKEY.test(value.identity?.nkey ?? ""))
    return { problem: "identity.nkey is not an nkey user key (U...)" };
  if (!AGE.test(value.identity?.age ?? ""))
    return { problem: "identity.age is not an age recipient (age1...)" };
  const labels = value.labels ?? {};
  if (typeof labels !== "object" || Array.isArray(labels) || Object.keys(labels).length > 32)
    return { problem: "labels must be at most 32 key=value strings" };
  for (const [key, label] of Object.entries(labels))
    if (
      !LABEL_KEY.test(key) ||
      !isText(label, 63) ||
      !/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(label)
    )
      return { problem: `label ${JSON.stringify(key)}=${JSON.stringify(label)} is not a valid label` };
  const facts = value.facts;
  if (
    !facts ||
    !["hostname", "os", "arch", "agentVersion"].every((f) =>
      isText((facts as unknown as Record<string, unknown>)[f], 200),
    )
  )
    return { problem: "facts must name the hostname, os, arch and agentVersion" };
  if (!isText(value.at, 40) || Number.isNaN(Date.parse(value.at))) return { problem: "at is not a time" };
  if (!isText(value.signature, 200)) return { problem: "the request is not signed" };
  const request = value as EnrolmentRequestMessage;
  let valid = false;
  try {
    valid = fromPublic(request.identity.nkey).verify(
      unsigned(request),
      new Uint8Array(Buffer.from(request.signature, "base64url")),
    );
  } catch {
    valid = false;
  }
  if (!valid)
    return { problem: `the signature is not by the key it names (${shortKey(request.identity.nkey)})` };
  return { request };
}

/** How the hub answers a verified request (`jwt` with `admitted`). */
export type EnrolmentResponder = (
  request: EnrolmentRequestMessage,
) => Promise<Omit<EnrolmentAnswerMessage, "kind" | "node">>;

/**
 * Answers requests on `steward.enrol.request` on the hub's connection until the subscription is
 * closed. A request that is not valid is refused with what is wrong; a responder that fails is
 * logged and not answered (the host asks again).
 */
export function serveEnrolments(
  nc: NatsConnection,
  respond: EnrolmentResponder,
  log: NatsLog = silentLog,
): Subscription {
  return nc.subscribe(subjects.enrolRequest, {
    queue: "steward-hubs",
    callback: (error, msg) => {
      if (error) {
        log.error({ error: error.message }, "the enrolment subscription failed");
        return;
      }
      void answer(msg, respond, log);
    },
  });
}

async function answer(msg: Msg, respond: EnrolmentResponder, log: NatsLog): Promise<void> {
  const checked = verifyRequest(msg.data);
  const reply = (body: EnrolmentAnswerMessage) => {
    if (msg.reply) msg.respond(JSON.stringify(body));
  };
  if ("problem" in checked) {
    log.warn({ problem: checked.problem }, `enrolment request refused: ${checked.problem}`);
    reply({
      kind: "EnrolmentAnswer",
      node: "",
      status: "refused",
      message: `not a valid request: ${checked.problem}`,
    });
    return;
  }
  const { request } = checked;
  try {
    const decided = await respond(request);
    log.info(
      { node: request.node, nkey: request.identity.nkey, status: decided.status, task: decided.task },
      `enrolment of ${request.node}: ${decided.status}`,
    );
    reply({ kind: "EnrolmentAnswer", node: request.node, ...decided });
  } catch (error) {
    log.error(
      { node: request.node, error: String(error) },
      "answering an enrolment request failed; the host asks again",
    );
  }
}

/** The hub refused this host (denied, a name another key holds, not a NATS node): exit 2, with its words. */
export class EnrolmentRefusedError extends EnvironmentError {
  override readonly name = "EnrolmentRefusedError";
  constructor(message: string, data: Record<string, unknown>) {
    super(message, { code: "E_ENROLMENT_REFUSED", data });
  }
}

/** Where, as whom and how often a new host asks to join. */
export interface AskToJoinOptions {
  servers: string | string[];
  /** The shared enrolment credential (`credentials/enrol.creds`). */
  credentials: NatsCredentials;
  tls?: NatsTls;
  node: string;
  labels: Record<string, string>;
  identity: { nkey: string; age: string };
  /** The host's nkey seed: signs the request, never sent. */
  seed: string;
  facts: HostFactsMessage;
  /** How long to wait between asks; default 10 s. */
  intervalMs?: number;
  log?: NatsLog;
  /** Stops asking (rejects with the signal's reason). */
  signal?: AbortSignal;
  clock?: () => Date;
}

/**
 * Asks until the hub admits the host, and resolves with the user JWT it issued (checked: for this
 * key and node). Logs each new answer (queued, still waiting, the hub not answering yet); rejects
 * with EnrolmentRefusedError when the hub refuses.
 */
export async function askToJoin(
  options: AskToJoinOptions,
): Promise<{ jwt: string; answer: EnrolmentAnswerMessage }> {
  const log = options.log ?? silentLog;
  const interval = options.intervalMs ?? 10_000;
  const clock = options.clock ?? (() => new Date());
  const nc = await connectNats({
    servers: options.servers,
    identity: identities.enrol,
    credentials: options.credentials,
    waitOnFirstConnect: true,
    label: {
      who: "the enrolment credential",
      flag: "--token-file FILE",
      file: "credentials/enrol.creds",
    },
    ...(options.tls ? { tls: options.tls } : {}),
  });
  let said = "";
  const say = (fields: object, message: string) => {
    if (message === said) return;
    said = message;
    log.info({ node: options.node, ...fields }, message);
  };
  try {
    for (;;) {
      options.signal?.throwIfAborted();
      const request = signedRequest(
        {
          node: options.node,
          labels: options.labels,
          identity: options.identity,
          facts: options.facts,
          at: clock().toISOString(),
        },
        options.seed,
      );
      let answer: EnrolmentAnswerMessage | undefined;
      try {
        const msg = await nc.request(subjects.enrolRequest, JSON.stringify(request), { timeout: 5_000 });
        answer = msg.json<EnrolmentAnswerMessage>();
      } catch (error) {
        if (
          error instanceof errors.NoRespondersError ||
          error instanceof errors.TimeoutError ||
          causedByNoResponders(error)
        )
          say(
            { waiting: "hub" },
            `no hub answers enrolment requests at ${String(options.servers)} yet; asking again every ${Math.round(interval / 1000)} s`,
          );
        else throw error;
      }
      if (answer?.status === "admitted") return { jwt: checkedJwt(answer, options), answer };
      if (answer?.status === "refused")
        throw new EnrolmentRefusedError(
          `the hub refused this host joining as "${options.node}": ${answer.message}`,
          {
            node: options.node,
            ...(answer.task ? { task: answer.task } : {}),
          },
        );
      if (answer)
        say(
          { status: answer.status, ...(answer.task ? { task: answer.task } : {}) },
          `waiting for approval to join as "${options.node}": ${answer.message} — asking again every ${Math.round(interval / 1000)} s`,
        );
      await delay(interval, undefined, options.signal ? { signal: options.signal } : {});
    }
  } finally {
    await nc.close().catch(() => undefined);
  }
}

function causedByNoResponders(error: unknown): boolean {
  let current: unknown = error;
  while (current instanceof Error) {
    if (current instanceof errors.NoRespondersError) return true;
    current = current.cause;
  }
  return false;
}

/** The admitted answer's JWT, checked to be this host's (its key) for this node (its name). */
function checkedJwt(answer: EnrolmentAnswerMessage, options: AskToJoinOptions): string {
  const jwt = answer.jwt ?? "";
  let claims: { sub?: string; name?: string } = {};
  try {
    claims = JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8"));
  } catch {
    claims = {};
  }
  if (claims.sub !== options.identity.nkey || claims.name !== `steward node ${options.node}`)
    throw new EnrolmentRefusedError(
      `the hub answered "admitted" with credentials that are not this host's as node "${options.node}" (for ${claims.name ?? "nobody"}, key ${shortKey(claims.sub ?? "?")}): not used`,
      { node: options.node },
    );
  return jwt;
}

/**
 * The credentials the hub issued this host: its user JWT with its own nkey seed. A refusal of them
 * says they were revoked (the node removed from Git, or given another key), not that a file is wrong.
 */
export function issuedCredentials(options: {
  jwtFile: string;
  jwt: string;
  seed: string;
  node: string;
}): NatsCredentials {
  const publicKey = fromSeed(new TextEncoder().encode(options.seed)).getPublicKey();
  return {
    file: options.jwtFile,
    authenticator: jwtAuthenticator(options.jwt, new TextEncoder().encode(options.seed)),
    publicKey,
    owner: `node "${options.node}"`,
    refusal: `the hub issued them, and the server no longer takes them: the fleet no longer admits this host as node "${options.node}" (its Node document removed from the tracked branch, or given another key) — ask the fleet's operator`,
  };
}
