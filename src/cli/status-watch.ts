/**
 * `steward status --watch`: the open conditions, then each change as it happens. On a bus
 * (`--nats`), the KV bucket `steward-conditions` is watched — the server pushes every change, nothing
 * polls; without one, the local hub's database is read again every second (a file has no push).
 * `OpenConditions` turns what a source saw into changes a person cares about, whatever the source.
 */
import type { ConditionRecord } from "../hub/records.js";
import type { StoreReads } from "../hub/store/store.js";
import type { CliIo } from "./io.js";
import type { OutputFormat } from "./output.js";
import { renderConditions } from "./status.js";

/** One change to the open conditions. */
export interface ConditionChangeSeen {
  kind: "opened" | "updated" | "resolved";
  /** The condition as last seen (for `resolved`: with its resolution, when the source knows it). */
  condition: ConditionRecord;
  /** How many conditions are open after it. */
  open: number;
}

/** What is open, as seen so far; each sighting returns the change it makes, if any. */
export class OpenConditions {
  private readonly open = new Map<string, ConditionRecord>();

  get size(): number {
    return this.open.size;
  }

  list(): ConditionRecord[] {
    return [...this.open.values()].sort((a, b) =>
      a.openedAt === b.openedAt ? (a.id < b.id ? -1 : 1) : a.openedAt < b.openedAt ? -1 : 1,
    );
  }

  /** A condition seen open: opened, or updated when more than its observation time changed. */
  sawOpen(condition: ConditionRecord): ConditionChangeSeen | undefined {
    const before = this.open.get(condition.id);
    this.open.set(condition.id, condition);
    if (!before) return { kind: "opened", condition, open: this.open.size };
    if (sameButObserved(before, condition)) return undefined;
    return { kind: "updated", condition, open: this.open.size };
  }

  /** A condition seen resolved (`resolved`: its record, if the source has it). */
  sawResolved(id: string, resolved?: ConditionRecord): ConditionChangeSeen | undefined {
    const before = this.open.get(id);
    if (!before) return undefined;
    this.open.delete(id);
    return {
      kind: "resolved",
      condition: resolved ?? { ...before, status: "resolved" },
      open: this.open.size,
    };
  }

  /** The ids seen open that `current` (everything open now) no longer has. */
  missingFrom(current: readonly ConditionRecord[]): string[] {
    const now = new Set(current.map((c) => c.id));
    return [...this.open.keys()].filter((id) => !now.has(id));
  }

  /** Level-based: `current` is everything open now; the others resolved (read with `resolvedOf`). */
  sawAll(
    current: readonly ConditionRecord[],
    resolvedOf: (id: string) => ConditionRecord | undefined,
  ): ConditionChangeSeen[] {
    const changes: ConditionChangeSeen[] = [];
    const now = new Set(current.map((c) => c.id));
    for (const id of [...this.open.keys()])
      if (!now.has(id)) {
        const change = this.sawResolved(id, resolvedOf(id));
        if (change) changes.push(change);
      }
    for (const condition of current) {
      const change = this.sawOpen(condition);
      if (change) changes.push(change);
    }
    return changes;
  }
}

function sameButObserved(a: ConditionRecord, b: ConditionRecord): boolean {
  return JSON.stringify({ ...a, lastObserved: "" }) === JSON.stringify({ ...b, lastObserved: "" });
}

/** One line per change: when, what happened, the condition, and how many are open after it. */
export function renderChange(change: ConditionChangeSeen, at: Date): string {
  const c = change.condition;
  const what =
    change.kind === "resolved"
      ? `${c.reason}${c.resolution ? `: ${c.resolution}` : ""}`
      : `${c.reason}: ${c.message}${c.attemptId ? ` (attempt ${c.attemptId})` : ""}`;
  return `${at.toISOString()} ${change.kind.padEnd(8)} ${c.type} ${c.subjectKind} ${c.subject} ${what} [${change.open} open]\n`;
}

/** The first screen of a watch: what is open now. */
export function renderOpen(open: readonly ConditionRecord[], now: Date): string {
  return open.length === 0
    ? "no open conditions: the fleet is right\n"
    : `${open.length} open condition${open.length === 1 ? "" : "s"}\n${renderConditions(open, now)}`;
}

/** A source of sightings; `stop` ends it. */
export interface ConditionSource {
  /** Resolves once what was open at the start has been seen. */
  readonly initialized: Promise<void>;
  stop(): Promise<void>;
}

/** Reads the hub's open conditions every `intervalMs` (a database has no push). */
export function watchDatabase(
  store: StoreReads,
  view: OpenConditions,
  onChanges: (changes: ConditionChangeSeen[]) => void,
  intervalMs = 1_000,
): ConditionSource {
  const look = async () => {
    const open = await store.conditions.list({ status: "open" });
    // What closed since the last look is read back, so the watcher can say how it ended.
    const gone = new Map<string, ConditionRecord | undefined>();
    for (const id of view.missingFrom(open)) gone.set(id, await store.conditions.get(id));
    return view.sawAll(open, (id) => gone.get(id));
  };
  let running: Promise<unknown> = Promise.resolve();
  const initialized = look().then(() => undefined);
  running = initialized;
  const timer = setInterval(() => {
    running = running
      .then(look)
      .then((changes) => {
        if (changes.length > 0) onChanges(changes);
      })
      .catch(() => undefined);
  }, intervalMs);
  return {
    initialized,
    stop: async () => {
      clearInterval(timer);
      await running.catch(() => undefined);
    },
  };
}

/**
 * Watches KV `steward-conditions` over `nc`: the server pushes each change (nothing polls). What
 * was open when the watch began is seen before `initialized` resolves and is not reported as a change.
 */
export async function watchBus(
  nc: import("@nats-io/transport-node").NatsConnection,
  view: OpenConditions,
  onChanges: (changes: ConditionChangeSeen[]) => void,
): Promise<ConditionSource> {
  const { watchConditions } = await import("../transport/nats/conditions.js");
  return watchConditions(nc, (change) => {
    const seen =
      change.kind === "open"
        ? view.sawOpen(change.condition as unknown as ConditionRecord)
        : view.sawResolved(change.id);
    if (seen && !change.initial) onChanges([seen]);
  });
}

/**
 * `--watch` of `steward get` and `steward describe`: reads `read()` every `intervalMs` and prints it
 * again whenever what it read changed (compared as data, so a clock ticking in "5s ago" is no
 * change), until `until` settles (default: SIGINT or SIGTERM). Text is redrawn in place on a
 * terminal, else each printing follows a `--- <time>` line; JSON is one document per line and YAML
 * one `---` document per change, for a script to read as they come.
 */
export async function watchRendering<T>(
  io: CliIo,
  read: () => Promise<T> | T,
  render: (value: T) => string,
  options: { format: OutputFormat; intervalMs?: number; until?: Promise<unknown> },
): Promise<void> {
  const { serialise } = await import("./output.js");
  const { redrawEnabled } = await import("./colour.js");
  const until = options.until ?? (await import("./hub.js")).untilSignal();
  let last: string | undefined;
  let stopped = false;
  void until.then(() => {
    stopped = true;
  });
  while (!stopped) {
    const value = await read();
    const seen = JSON.stringify(value);
    if (seen !== last) {
      if (options.format === "json") io.stdout(`${seen}\n`);
      else if (options.format === "yaml") io.stdout(`---\n${await serialise(value, "yaml")}`);
      else if (redrawEnabled(io)) io.stdout(`\x1b[H\x1b[2J${render(value)}`);
      else io.stdout(`${last === undefined ? "" : `--- ${new Date().toISOString()}\n`}${render(value)}`);
      last = seen;
    }
    await Promise.race([until, new Promise((wake) => setTimeout(wake, options.intervalMs ?? 1_000))]);
  }
}
