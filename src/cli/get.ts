/**
 * `steward get KIND [NAME] [-o json|yaml|wide] [--all] [--watch]`, kubectl style: what the hub
 * knows, as tables (or JSON or YAML). Kinds: nodes, assignments, instances, intents, attempts,
 * conditions, tasks, revisions; NAME is the object's name (ASSIGNMENT@NODE for instances and
 * intents, an id — or its last characters — for attempts, conditions and tasks, a sha prefix for
 * revisions). Reads the hub database directly; works while a hub runs. `describe` tells one
 * object's whole story.
 */
import { Command, Option } from "commander";
import type { StoreReads } from "../hub/store/store.js";
import { NotFoundError, UsageError } from "../model/errors.js";
import type { Palette } from "./colour.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, clip, type OutputOptions, outputFormat, printResult } from "./output.js";

export const GET_KINDS = [
  "nodes",
  "assignments",
  "instances",
  "intents",
  "attempts",
  "conditions",
  "tasks",
  "revisions",
  "replicas",
] as const;
export type GetKind = (typeof GET_KINDS)[number];

/** What `get` printed: the rows (JSON and YAML print them as they are) and their table. */
interface Listing {
  rows: unknown[];
  table: (wide: boolean, colours: Palette) => string;
}

/** The same name in the kind's own words: `instance` → `instances`; undefined when no kind matches. */
export function getKind(word: string): GetKind | undefined {
  const plural = word.endsWith("s") ? word : `${word}s`;
  return GET_KINDS.find((kind) => kind === plural);
}

/** The rows of `kind` (only `name`'s when given) and how to print them. */
export async function listing(
  store: StoreReads,
  kind: GetKind,
  name: string | undefined,
  options: { all: boolean; now: Date },
): Promise<Listing> {
  const views = await import("../hub/views.js");
  const { renderTable, ago } = await import("./table.js");
  const { DISPLAY_STATES } = await import("../hub/states.js");
  const { now } = options;
  const one = <T>(rows: T[], key: (row: T) => string, exact = true): T[] => {
    if (name === undefined) return rows;
    const wanted = exact ? name : name.toUpperCase();
    const found = rows.filter((row) => (exact ? key(row) === wanted : key(row).endsWith(wanted)));
    if (found.length === 1) return found;
    throw new NotFoundError(
      found.length === 0
        ? `no ${kind.slice(0, -1)} "${name}": \`steward get ${kind}${kind === "conditions" || kind === "tasks" || kind === "intents" ? " --all" : ""}\` lists them`
        : `"${name}" names ${found.length} ${kind}: give more of it`,
    );
  };
  const state = (colours: Palette, s: keyof typeof DISPLAY_STATES) =>
    colours.state(s, DISPLAY_STATES[s].label);
  switch (kind) {
    case "nodes": {
      const rows = one(await views.nodeViews(store), (n) => n.name);
      return {
        rows,
        table: (wide) =>
          renderTable(
            ["NAME", "TRANSPORT", "CONVERGED", "DRAINING", "HEARTBEAT", "REPORT", "CONDITIONS"],
            rows.map((n) => [
              n.declared ? n.name : `${n.name} (removed)`,
              n.transport,
              `${n.converged}/${n.instances}`,
              n.draining ? `yes${n.drainReason ? ` (${clip(n.drainReason, 40, wide)})` : ""}` : "no",
              ago(n.lastHeartbeatAt, now),
              ago(n.lastReportAt, now),
              n.openConditions.join(",") || "-",
            ]),
          ),
      };
    }
    case "assignments": {
      const rows = one(await views.assignmentViews(store), (a) => a.name);
      return {
        rows,
        table: () =>
          renderTable(
            ["NAME", "STAGE", "CONVERGED", "FAILING", "HELD"],
            rows.map((a) => [a.name, a.stage, `${a.converged}/${a.instances}`, a.failing, a.held]),
          ),
      };
    }
    case "instances": {
      const rows = one(await views.instanceViews(store, { retired: options.all }), (i) => i.instance);
      return {
        rows,
        table: (wide, colours) =>
          renderTable(
            wide
              ? [
                  "INSTANCE",
                  "GEN",
                  "OBSERVED",
                  "STATE",
                  "STATUS",
                  "CONDITIONS",
                  "ATTEMPT",
                  "MESSAGE",
                  "ERROR",
                ]
              : ["INSTANCE", "GEN", "OBSERVED", "STATE", "CONDITIONS", "MESSAGE"],
            rows.map((i) => [
              i.instance,
              i.generation,
              i.observedGeneration ?? "-",
              state(colours, i.state),
              ...(wide ? [i.holdReason ? `${i.status} (${i.holdReason})` : i.status] : []),
              i.openConditions.join(",") || "-",
              ...(wide
                ? [i.lastAttemptId ?? "-", i.message ?? "", i.errorLine ?? ""]
                : [clip(i.errorLine ?? i.message ?? "", 80, false)]),
            ]),
          ),
      };
    }
    case "intents": {
      const { intentDisplayState } = await import("../hub/states.js");
      const rows = one(await views.intentViews(store, { all: options.all }), (i) => i.instanceKey).map(
        (i) => ({
          ...i,
          state: intentDisplayState(i),
        }),
      );
      return {
        rows,
        table: (wide, colours) =>
          renderTable(
            ["INSTANCE", "GEN", "STATE", "OUTCOME", "CLASS", "FAILURES", "ATTEMPT", "MESSAGE"],
            rows.map((i) => [
              i.instanceKey,
              i.generation,
              state(colours, i.state),
              i.outcome ?? "-",
              i.failureClass ?? "-",
              i.failures,
              i.lastAttemptId ?? "-",
              clip(i.message ?? "", 70, wide),
            ]),
          ),
      };
    }
    case "attempts": {
      const { attemptStories } = await import("../hub/story.js");
      const rows = one(await attemptStories(store), (a) => a.id, false);
      return {
        rows,
        table: (wide) =>
          renderTable(
            ["ID", "INSTANCE", "GEN", "STATUS", "CLASS", "REASON", "CREATED", wide ? "MESSAGE" : "ERROR"],
            rows.map((a) => [
              a.id,
              a.instance,
              a.generation,
              a.status,
              a.failureClass ?? "-",
              a.reason ?? "-",
              ago(a.createdAt, now),
              wide
                ? [a.message, a.errorLine].filter(Boolean).join("; ")
                : clip(a.errorLine ?? a.message ?? "", 70, false),
            ]),
          ),
      };
    }
    case "conditions": {
      const { renderConditions } = await import("./status.js");
      const rows = one(
        await store.conditions.list(options.all ? {} : { status: "open" }),
        (c) => c.id,
        false,
      );
      return {
        rows,
        table: (wide) =>
          rows.length === 0
            ? "no open conditions\n"
            : renderConditions(rows, now, wide, { id: true, status: options.all }),
      };
    }
    case "tasks": {
      const { listTasks } = await import("../hub/tasks.js");
      const { renderTasks } = await import("./tasks.js");
      const rows = one(await listTasks(store, { all: options.all }), (t) => t.task.id, false);
      return {
        rows,
        table: (wide) => (rows.length === 0 ? "no open tasks\n" : renderTasks(rows, now, wide)),
      };
    }
    case "replicas": {
      // Hub replicas sharing the store (PostgreSQL): who runs, which leases each holds, and how many nodes.
      const at = now.toISOString();
      const leases = await store.replicas.leases();
      const rows = one(
        (await store.replicas.list()).map((r) => {
          const held = leases.filter((l) => l.holder === r.id && l.expiresAt > at);
          return {
            ...r,
            live: r.expiresAt > at,
            sync: held.some((l) => l.name === "sync"),
            leases: held.map((l) => ({ name: l.name, token: l.token, expiresAt: l.expiresAt })),
          };
        }),
        (r) => r.id,
      );
      return {
        rows,
        table: (wide) =>
          rows.length === 0
            ? "no hub replicas: one hub on its own store (several share a PostgreSQL store: steward hub --store postgres://...)\n"
            : renderTable(
                ["REPLICA", "STATE", "SYNCS", "SHARDS", "NODES", "RENEWED", "STARTED", "ADDRESS"],
                rows.map((r) => [
                  r.id,
                  r.live ? "live" : "gone",
                  r.sync ? "yes" : "no",
                  r.live ? r.leases.filter((l) => l.name.startsWith("shard:")).length : 0,
                  r.live ? r.nodes : 0,
                  ago(r.renewedAt, now),
                  ago(r.startedAt, now),
                  clip(r.address ?? "-", 40, wide),
                ]),
              ),
      };
    }
    case "revisions": {
      const all = (await store.desired.revisionsAfter(0)).reverse();
      const rows = name === undefined ? all : all.filter((r) => r.sha.startsWith(name.toLowerCase()));
      if (name !== undefined && rows.length !== 1)
        throw new NotFoundError(
          rows.length === 0
            ? `no synced revision starts with "${name}": \`steward get revisions\` lists them (\`steward describe revision REV\` takes branches and HEAD~N too)`
            : `"${name}" names ${rows.length} revisions: give more of the sha`,
        );
      return {
        rows,
        table: (wide) =>
          renderTable(
            ["SHA", "SEQ", "OUTCOME", "SYNCED", "AUTHOR", "CHANGED", "SUBJECT"],
            rows.map((r) => [
              wide ? r.sha : r.sha.slice(0, 12),
              r.seq,
              r.supersededBy ? `${r.outcome} by ${r.supersededBy.slice(0, 12)}` : r.outcome,
              ago(r.syncedAt, now),
              r.authorName,
              clip(r.changedAssignments.join(",") || "-", 40, wide),
              clip(r.message.split("\n", 1)[0] ?? "", 60, wide),
            ]),
          ),
      };
    }
  }
}

export function getCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  const command = new Command("get")
    .description(`list what the hub knows: ${GET_KINDS.join(", ")}`)
    .argument("<kind>", GET_KINDS.join(" | "))
    .argument("[name]", "only this one (ASSIGNMENT@NODE, a node, an id or its last characters, a sha prefix)")
    .addOption(
      new Option(
        "--all",
        "include history: superseded and retired intents, retired instances, resolved conditions and tasks",
      ),
    )
    .option("--watch", "print the list again whenever it changes, until Ctrl-C");
  addOutputOptions(command);
  return command.action(
    async (
      word: string,
      name: string | undefined,
      options: OutputOptions & { all?: boolean; watch?: boolean },
    ) => {
      const kind = getKind(word);
      if (!kind) throw new UsageError(`cannot get "${word}": choose one of ${GET_KINDS.join(", ")}`);
      const format = outputFormat(options, globals());
      const { statePaths, openHubStore } = await import("./hub-state.js");
      const { palette } = await import("./colour.js");
      const store = await openHubStore(statePaths(io, globals()));
      const colours = palette(io);
      try {
        const read = async () => {
          const list = await listing(store, kind, name, { all: options.all ?? false, now: new Date() });
          return { rows: name === undefined ? list.rows : list.rows[0], table: list.table };
        };
        const text = (list: { table: Listing["table"] }) => list.table(format === "wide", colours);
        if (options.watch) {
          const { watchRendering } = await import("./status-watch.js");
          // Compared and printed as data: the rows; the table is rendered from them.
          let latest: Awaited<ReturnType<typeof read>> | undefined;
          await watchRendering(
            io,
            async () => {
              latest = await read();
              return latest.rows;
            },
            () => text(latest!),
            { format },
          );
        } else {
          const list = await read();
          await printResult(io, format, list.rows, () => text(list));
        }
        exit(EXIT.ok);
      } finally {
        await store.close();
      }
    },
  );
}
