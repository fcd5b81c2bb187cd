/**
 * `GET /events?scope=...`: server-sent events for one page — the feed's changes (fleet-feed.ts)
 * that concern what the page shows, each as small as the change (one cell is one instance's
 * state and generation, never a page). Scopes: `fleet` (with the fleet page's node, label and
 * assignment filters), `instance`, `node`, `revision`, `condition` (with `id`), `tasks`,
 * `conditions`. A comment every 20 s keeps proxies from closing a quiet stream; a client that
 * cannot keep up is let go (its browser reconnects and looks again at everything).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { FleetChange, FleetFeed } from "../fleet-feed.js";
import type { StoreReads } from "../store/store.js";
import { parseFilters } from "./grid.js";

/** Which changes a page's stream carries. */
export type ChangeFilter = (change: FleetChange) => boolean;

const ALWAYS: ReadonlySet<FleetChange["kind"]> = new Set(["resync", "task"]);

function nodeOf(instance: string): string {
  return instance.slice(instance.lastIndexOf("@") + 1);
}

/** The changes the page with events query `query` listens to. */
export async function changeFilter(query: URLSearchParams, store: StoreReads): Promise<ChangeFilter> {
  const scope = query.get("scope") ?? "fleet";
  const id = query.get("id") ?? "";
  const base =
    (check: (change: FleetChange) => boolean): ChangeFilter =>
    (change) =>
      ALWAYS.has(change.kind) || check(change);
  switch (scope) {
    case "instance": {
      const node = nodeOf(id);
      return base((c) =>
        c.kind === "instance"
          ? c.instance === id
          : c.kind === "condition"
            ? c.condition.subject === id ||
              (c.condition.subjectKind === "node" && c.condition.subject === node)
            : c.kind === "node" && c.node === node,
      );
    }
    case "node":
      return base((c) =>
        c.kind === "instance"
          ? c.node === id
          : c.kind === "condition"
            ? c.condition.node === id || c.condition.subject === id
            : c.kind === "node" && c.node === id,
      );
    case "revision": {
      const members = new Set((await store.desired.generationsOf(id)).map((m) => m.instanceKey));
      return base((c) =>
        c.kind === "instance"
          ? members.has(c.instance)
          : c.kind === "condition"
            ? c.condition.revision === id ||
              members.has(c.condition.subject) ||
              c.condition.subject.endsWith(`@${id}`)
            : c.kind === "revision" && c.sha === id,
      );
    }
    case "condition":
      return base((c) => c.kind === "condition" && c.condition.id === id);
    case "tasks":
    case "conditions":
      return base((c) => c.kind === "condition");
    default: {
      const filters = parseFilters(query);
      const assignments = new Set(filters.assignments);
      // Labels are read when the stream opens: a node declared later is shown on the next load.
      const labels = new Map<string, Readonly<Record<string, string>>>();
      if (filters.labels.length > 0)
        for (const node of await store.nodes.list()) labels.set(node.name, node.spec.metadata?.labels ?? {});
      const labelsOf = (node: string) => labels.get(node) ?? {};
      return base((c) => {
        if (c.kind !== "instance") return true;
        if (assignments.size > 0 && !assignments.has(c.assignment)) return false;
        if (filters.node && !c.node.includes(filters.node)) return false;
        return filters.labels.every(([key, value]) => labelsOf(c.node)[key] === value);
      });
    }
  }
}

/** A change as the page's script reads it: short keys, only what it paints or needs to look again. */
export function eventData(change: FleetChange): string {
  switch (change.kind) {
    case "instance": {
      const data: Record<string, unknown> = {
        i: change.instance,
        n: change.node,
        a: change.assignment,
        t: change.at,
      };
      if (change.view) {
        data.s = change.view.state;
        data.g = change.view.generation;
        if (change.view.observedGeneration !== undefined) data.o = change.view.observedGeneration;
      }
      return JSON.stringify(data);
    }
    case "condition":
      return JSON.stringify({
        id: change.condition.id,
        type: change.condition.type,
        status: change.condition.status,
        subject: change.condition.subject,
        t: change.at,
      });
    case "node":
      return JSON.stringify({ n: change.node, t: change.at });
    case "task":
      return JSON.stringify({ id: change.id, t: change.at });
    case "revision":
      return JSON.stringify({ sha: change.sha, t: change.at });
    case "resync":
      return JSON.stringify({ t: change.at });
  }
}

/** Most a slow client may have waiting before it is let go. */
const MAX_BUFFERED = 1 << 20;

/** Streams `feed`'s changes that pass `filter` to `response` until the client goes away. */
export function streamEvents(
  request: IncomingMessage,
  response: ServerResponse,
  feed: FleetFeed,
  filter: ChangeFilter,
  keepAliveMs = 20_000,
): void {
  response.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    connection: "keep-alive",
    // nginx: pass each event on as it comes.
    "x-accel-buffering": "no",
    "x-content-type-options": "nosniff",
  });
  response.write("retry: 3000\n\n");
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    unsubscribe();
    clearInterval(keepAlive);
    response.end();
  };
  const unsubscribe = feed.subscribe((change) => {
    if (ended || !filter(change)) return;
    if (response.writableLength > MAX_BUFFERED) return end();
    response.write(`event: ${change.kind}\ndata: ${eventData(change)}\n\n`);
  });
  const keepAlive = setInterval(() => response.write(": still here\n\n"), keepAliveMs);
  keepAlive.unref();
  request.on("close", end);
  response.on("error", end);
}
