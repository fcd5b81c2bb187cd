import { describe, expect, it } from "vitest";
import { nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

describe("hub - sync events", () => {
  it("hub - a refused force-push and a failing fetch become conditions while the syncer's events are open", async () => {
    const h = await startHarness({ files: { ...nodes("n1") } });
    const synced = await h.commit();
    const insert = h.store.db!.prepare(
      "INSERT INTO sync_events (branch, kind, head, last_good, message, opened_at, last_seen_at) VALUES ('main', ?, ?, ?, ?, ?, ?)",
    );
    const at = h.clock.now().toISOString();
    insert.run("force-push", "f".repeat(40), synced.sha, "branch main was rewritten", at, at);
    insert.run("fetch-failed", null, synced.sha, "remote unreachable: ECONNREFUSED", at, at);
    await h.hub.takeInRevisions();
    expect(
      (await h.store.conditions.list({ status: "open" })).map((c) => [c.type, c.subject, c.reason]),
    ).toEqual([
      ["InvalidRevision", "f".repeat(40), "HistoryRewritten"],
      ["TransportDegraded", "git:main", "FetchFailed"],
    ]);
    // They resolve when the syncer resolves its events.
    h.store.db!.prepare("UPDATE sync_events SET resolved_at = ?").run(at);
    await h.hub.takeInRevisions();
    expect(await h.store.conditions.list({ status: "open" })).toEqual([]);
  });
});
