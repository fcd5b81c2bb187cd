import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { HubStoppedError } from "../../src/hub/hub.js";
import type { SqliteStore } from "../../src/hub/store/sqlite.js";
import type { Transport, TransportEvents } from "../../src/hub/transport.js";
import type { AttemptResult, Bundle, Node, Report } from "../../src/model/generated.js";
import type { LocalTransport } from "../../src/transport/local.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

/**
 * The real local transport, with each hub handler's promise watched: when it resolves, a second
 * connection to the database (which sees only what is committed) is read, as a transport that
 * acknowledges on resolution would rely on.
 */
class WatchedTransport implements Transport {
  readonly name = "local" as const;
  events!: TransportEvents;
  readonly seen: { kind: string; committed: unknown }[] = [];
  readonly reports: Report[] = [];
  readonly results: AttemptResult[] = [];

  constructor(
    private readonly inner: LocalTransport,
    private readonly committed: (kind: "result" | "report", id: string) => unknown,
  ) {}

  async start(events: TransportEvents): Promise<void> {
    this.events = events;
    await this.inner.start({
      ...events,
      result: async (result) => {
        this.results.push(result);
        await events.result(result);
        this.seen.push({ kind: "result", committed: this.committed("result", result.attemptId) });
      },
      report: async (report) => {
        this.reports.push(report);
        await events.report(report);
        this.seen.push({ kind: "report", committed: this.committed("report", report.node) });
      },
    });
  }

  dispatch(bundle: Bundle, node: Node): Promise<void> {
    return this.inner.dispatch(bundle, node);
  }

  requestReport(node: Node): Promise<void> {
    return this.inner.requestReport(node);
  }

  stop(): Promise<void> {
    return this.inner.stop();
  }
}

describe("hub - transport events are acknowledged only once recorded", () => {
  it("hub - a result's and a report's handlers resolve only after their writes are committed", async () => {
    let watched: WatchedTransport | undefined;
    let dbPath = "";
    let reader: Database.Database | undefined;
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v1")] }),
      },
      wrap: (local) => {
        watched = new WatchedTransport(local, (kind, id) => {
          reader ??= new Database(dbPath, { readonly: true });
          return kind === "result"
            ? reader.prepare("SELECT status, settled_by FROM attempts WHERE id = ?").get(id)
            : reader.prepare("SELECT last_report_at FROM nodes WHERE name = ?").get(id);
        });
        return watched;
      },
      hubOptions: (store) => {
        dbPath = (store as SqliteStore).db.name;
        return {};
      },
    });
    await h.commit();
    await h.settle();
    expect((await h.intent("app@n1")).status).toBe("converged");
    const transport = watched!;
    const result = transport.results[0]!;
    expect(transport.reports.length).toBeGreaterThan(0);
    expect(transport.seen.find((s) => s.kind === "result")).toEqual({
      kind: "result",
      committed: { status: "succeeded", settled_by: "result" },
    });
    for (const [index, report] of transport.reports.entries())
      expect(transport.seen.filter((s) => s.kind === "report")[index]).toEqual({
        kind: "report",
        committed: { last_report_at: report.takenAt },
      });
    expect(result.outcome).toBe("succeeded");
    reader?.close();
  });

  it("hub - an event that cannot be recorded rejects while the rest of its batch is recorded", async () => {
    const h = await startHarness({ files: { ...nodes("n1") } });
    await h.commit();
    await h.settle();
    const events = h.hub.eventsFor("local");
    const unreadable = {
      node: "n1",
      takenAt: new Date(Date.now() + 60_000).toISOString(),
      instances: null,
    } as unknown as Report;
    // Same turn, same transaction: the health event commits, the unreadable report rolls back alone.
    const [report, health] = await Promise.allSettled([
      events.report(unreadable),
      events.health({ status: "degraded", node: "n1", reason: "AgentDisconnected", message: "gone" }),
    ]);
    expect(report.status).toBe("rejected");
    expect(health.status).toBe("fulfilled");
    expect((await h.store.observations.reportOf("n1"))?.takenAt).not.toBe(unreadable.takenAt);
    expect(await h.store.conditions.list({ type: "TransportDegraded", status: "open" })).toMatchObject([
      { subject: "n1", reason: "AgentDisconnected" },
    ]);
  });

  it("hub - a stopped hub refuses what it can no longer record; heartbeats and health are best effort", async () => {
    const h = await startHarness({ files: { ...nodes("n1") } });
    await h.commit();
    await h.settle();
    const events = h.hub.eventsFor("local");
    await h.stopHub();
    const report = { node: "n1", takenAt: new Date().toISOString(), instances: [] } as unknown as Report;
    await expect(events.report(report)).rejects.toBeInstanceOf(HubStoppedError);
    await expect(events.lost("01JX", "n1", "dropped")).rejects.toMatchObject({ code: "E_HUB_STOPPED" });
    await expect(events.heartbeat("n1", new Date())).resolves.toBeUndefined();
  });
});
