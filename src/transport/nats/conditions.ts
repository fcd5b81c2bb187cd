/**
 * Conditions on the bus: the hub mirrors every open condition into the key-value bucket
 * `steward-conditions` (key = condition id) and deletes the key when the condition resolves, so
 * anyone with read access — `steward status --watch`, a dashboard, a task agent — can watch the
 * fleet's open conditions without asking the hub.
 */
import { JetStreamApiCodes, JetStreamApiError, jetstream } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { type NatsConnection, PermissionViolationError, TimeoutError } from "@nats-io/transport-node";
import { EnvironmentError } from "../../model/errors.js";
import { bucketEntries } from "./bucket.js";
import { causedBy } from "./connect.js";
import { CONDITIONS_BUCKET } from "./subjects.js";

/** A condition as the hub records it; only `id` and `type` are required by the mirror. */
export interface MirroredCondition {
  /** Key in the bucket: letters, digits and `-_=./` (a ULID is fine). */
  id: string;
  type: string;
  status?: "open" | "resolved";
  [field: string]: unknown;
}

const KEY = /^[-/_=.a-zA-Z0-9]+$/;

function assertKey(id: string): void {
  if (!KEY.test(id) || id.startsWith(".") || id.endsWith("."))
    throw new RangeError(`condition id "${id}" cannot be a key: use letters, digits and -_=./`);
}

/** Writes open conditions to the bucket and removes resolved ones. Level-based: `replaceAll` syncs. */
export class ConditionMirror {
  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
  ) {}

  /** Binds to the bucket (which `ensureTopology` created). */
  static async open(nc: NatsConnection): Promise<ConditionMirror> {
    return new ConditionMirror(nc, await new Kvm(jetstream(nc)).open(CONDITIONS_BUCKET));
  }

  /** Records an opened or updated condition; a condition with `status: "resolved"` is removed. */
  async put(condition: MirroredCondition): Promise<void> {
    assertKey(condition.id);
    if (condition.status === "resolved") return this.resolve(condition.id);
    await this.kv.put(condition.id, JSON.stringify(condition));
  }

  /** Removes a resolved condition (watchers see a delete). */
  async resolve(id: string): Promise<void> {
    assertKey(id);
    await this.kv.delete(id);
  }

  /** Makes the bucket hold exactly `open`: puts each, deletes keys of conditions no longer open. */
  async replaceAll(open: readonly MirroredCondition[]): Promise<void> {
    const wanted = new Set(open.map((c) => c.id));
    const stale: string[] = [];
    for (const key of (await bucketEntries(this.nc, CONDITIONS_BUCKET, { keysOnly: true })).keys())
      if (!wanted.has(key)) stale.push(key);
    for (const key of stale) await this.kv.delete(key);
    for (const condition of open) await this.put(condition);
  }

  /** The open conditions as the bucket holds them. */
  async list(): Promise<MirroredCondition[]> {
    const list: MirroredCondition[] = [];
    for (const entry of (await bucketEntries(this.nc, CONDITIONS_BUCKET)).values())
      list.push(entry.json<MirroredCondition>());
    return list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
}

/** One change seen by a watcher. */
export type ConditionChange =
  | { kind: "open"; id: string; condition: MirroredCondition; initial: boolean }
  | { kind: "resolved"; id: string; initial: boolean };

export interface ConditionWatch {
  /** Resolves once every condition open when the watch began has been delivered. */
  readonly initialized: Promise<void>;
  stop(): Promise<void>;
}

/**
 * Watches the open conditions: first each one open now (`initial: true`), then every change as it
 * happens. `onChange` is awaited in order.
 */
export async function watchConditions(
  nc: NatsConnection,
  onChange: (change: ConditionChange) => void | Promise<void>,
): Promise<ConditionWatch> {
  // What was in the bucket when the watch began ends at the stream's last sequence; entries up to it
  // are the initial snapshot (the client's own isUpdate flag marks the snapshot's last entry wrongly).
  const { kv, state } = await (async () => {
    const kv = await new Kvm(jetstream(nc)).open(CONDITIONS_BUCKET);
    return { kv, state: (await kv.status()).streamInfo.state };
  })().catch(unreadableBucket);
  let markInitialized: () => void = () => {};
  const initialized = new Promise<void>((resolve) => {
    markInitialized = resolve;
  });
  const snapshotEnd = state.messages === 0 ? 0 : state.last_seq;
  if (snapshotEnd === 0) markInitialized();
  const watcher = await kv.watch();
  const done = (async () => {
    for await (const entry of watcher) {
      const initial = entry.revision <= snapshotEnd;
      if (entry.operation === "PUT") {
        let condition: MirroredCondition | undefined;
        try {
          condition = entry.json<MirroredCondition>();
        } catch {
          condition = undefined;
        }
        if (condition) await onChange({ kind: "open", id: entry.key, condition, initial });
      } else await onChange({ kind: "resolved", id: entry.key, initial });
      if (entry.revision >= snapshotEnd) markInitialized();
    }
  })();
  return {
    initialized,
    stop: async () => {
      watcher.stop();
      await done;
    },
  };
}

/** Why the bucket cannot be read, in words that say what to do. */
function unreadableBucket(error: unknown): never {
  if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
    throw new EnvironmentError(
      `the NATS server has no KV bucket ${CONDITIONS_BUCKET}: no hub has run on it yet (start \`steward hub --nats URL\` first)`,
      { cause: error },
    );
  if (causedBy(error, PermissionViolationError) || causedBy(error, TimeoutError))
    throw new EnvironmentError(
      `cannot read KV bucket ${CONDITIONS_BUCKET} with these credentials (${(error as Error).message}): use a viewer's, credentials/viewer.nk from \`steward nats config\``,
      { cause: error },
    );
  throw error;
}
