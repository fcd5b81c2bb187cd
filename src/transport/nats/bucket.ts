/**
 * What a key-value bucket holds now, read to its end. The KV client's `keys()` waits for a pending
 * count of zero or an idle heartbeat on a push consumer, and with agents writing to the bucket
 * meanwhile it could wait for ever (seen: a hub replica's start hung at it, once in a dozen starts
 * on a loaded machine). Here an ordered pull consumer takes the last entry of each key, in bounded
 * fetches, until it has caught up with the stream (pending 0). Keys written while it reads may be
 * read too, with their newer values; against writers that never pause, the read stops after a few
 * times the entries the bucket held when it began. A read that makes no progress fails as a
 * timeout (which a caller waiting for its server retries).
 */
import { DeliverPolicy, type JsMsg, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { errors, type NatsConnection } from "@nats-io/transport-node";

/** Messages one fetch takes, and how long it waits for them. */
const FETCH_BATCH = 512;
const FETCH_EXPIRES_MS = 1_000;
/** Fetches in a row that may bring nothing before the read gives up. */
const EMPTY_FETCHES = 3;
/** How long the read may go without any progress (a server restarting under it) before it fails. */
const IDLE_MS = 10_000;

/**
 * The last entry of every key the bucket holds (deleted and purged keys left out), by key; with
 * `keysOnly`, entries without their values (headers only: for the keys alone).
 */
export async function bucketEntries(
  nc: NatsConnection,
  bucket: string,
  options: { keysOnly?: boolean } = {},
): Promise<Map<string, JsMsg>> {
  // Every step is a request with its own timeout, but the client re-creates an ordered consumer
  // on its own when the server goes away: a read that stalls for IDLE_MS fails as a timeout.
  let progress = Date.now();
  let watch: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    watch = setInterval(() => {
      if (Date.now() - progress > IDLE_MS) reject(new errors.TimeoutError());
    }, 1_000);
  });
  const reading = readBucket(nc, bucket, options, () => {
    progress = Date.now();
  });
  reading.catch(() => undefined);
  try {
    return await Promise.race([reading, stalled]);
  } finally {
    clearInterval(watch);
  }
}

async function readBucket(
  nc: NatsConnection,
  bucket: string,
  options: { keysOnly?: boolean },
  progressed: () => void,
): Promise<Map<string, JsMsg>> {
  const stream = `KV_${bucket}`;
  const prefix = `$KV.${bucket}.`;
  const entries = new Map<string, JsMsg>();
  const { state } = await (await jetstreamManager(nc)).streams.info(stream);
  if (state.messages === 0) return entries;
  // Beyond this many, writers that never pause are being chased: what was there at the start is read.
  const most = 4 * state.messages + FETCH_BATCH;
  const consumer = await jetstream(nc).consumers.get(stream, {
    filter_subjects: `${prefix}>`,
    deliver_policy: DeliverPolicy.LastPerSubject,
    headers_only: options.keysOnly === true,
  });
  try {
    let read = 0;
    for (let empty = 0; empty < EMPTY_FETCHES; ) {
      let got = 0;
      for await (const msg of await consumer.fetch({
        max_messages: FETCH_BATCH,
        expires: FETCH_EXPIRES_MS,
      })) {
        got++;
        progressed();
        const key = msg.subject.slice(prefix.length);
        const operation = msg.headers?.get("KV-Operation");
        if (operation === "DEL" || operation === "PURGE") entries.delete(key);
        else entries.set(key, msg);
        if (msg.info.pending === 0 || ++read >= most) return entries;
      }
      progressed();
      empty = got === 0 ? empty + 1 : 0;
    }
    // Nothing more came, though the consumer had not caught up: entries removed meanwhile.
    if ((await consumer.info(true)).num_pending === 0) return entries;
    throw new errors.TimeoutError();
  } finally {
    await consumer.delete().catch(() => undefined);
  }
}
