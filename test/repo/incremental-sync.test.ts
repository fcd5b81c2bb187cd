/**
 * A long-lived syncer works by difference (cached analyses, checks and renderings; only re-rendered
 * instances compared with the store). Over a random history of a real git repository, each of its
 * syncs must give what a syncer starting from nothing gives on a store with the same history.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import { Syncer, type SyncOutcome } from "../../src/repo/syncer.js";
import { makeRepo, removeTempDirs, tempDir } from "../helpers/git.js";
import { mutateFleet, randomFleet, randomNumbers, setMess } from "../model/random-fleet.js";
import { steppingClock } from "./harness.js";

afterAll(removeTempDirs);

/** What a sync outcome says, without the times. */
function said(outcome: SyncOutcome) {
  switch (outcome.kind) {
    case "applied":
      return {
        kind: outcome.kind,
        head: outcome.head,
        generations: outcome.generations,
        retired: outcome.retired,
        unchanged: outcome.unchanged,
        changedAssignments: outcome.changedAssignments,
        superseded: outcome.superseded,
      };
    case "invalid":
      return { kind: outcome.kind, head: outcome.head, diagnostics: outcome.diagnostics };
    default:
      return { kind: outcome.kind, head: outcome.head };
  }
}

describe("syncer - by difference", () => {
  it("syncer - over a random history, a long-lived syncer gives the generations and diagnostics of a fresh one", async () => {
    const random = randomNumbers(7);
    setMess(0.05);
    let files = randomFleet(random);
    const repo = makeRepo({ files: Object.fromEntries(files) });
    const open = (name: string) => {
      const state = tempDir(`steward-${name}-`);
      const hub = new SqliteStore(join(state, "hub.db"));
      return { state, hub, store: hub.generations };
    };
    const long = open("long");
    const fresh = open("fresh");
    const syncer = new Syncer({
      store: long.store,
      source: { kind: "path", path: repo.dir },
      cacheDir: join(long.state, "git"),
      clock: steppingClock(),
    });
    const kinds = new Set<string>();
    let generations = 0;
    for (let step = 0; step < 30; step++) {
      const outcome = said(await syncer.sync());
      const again = new Syncer({
        store: fresh.store,
        source: { kind: "path", path: repo.dir },
        cacheDir: join(fresh.state, "git"),
        clock: steppingClock(),
      });
      const expected = said(await again.sync());
      again.close();
      expect(outcome, `step ${step}`).toEqual(expected);
      kinds.add(outcome.kind);
      if (outcome.kind === "applied") generations += outcome.generations.length;
      // One commit, or sometimes several at once (the head wins, the others are superseded).
      const commits = random() < 0.2 ? 3 : 1;
      for (let i = 0; i < commits; i++) {
        const next = mutateFleet(random, files);
        const changes: Record<string, string | null> = {};
        for (const path of new Set([...files.keys(), ...next.keys()]))
          if (files.get(path) !== next.get(path)) changes[path] = next.get(path) ?? null;
        files = next;
        repo.commit(`step ${step}.${i}`, changes, { allowEmpty: true });
      }
    }
    expect([...kinds].sort()).toEqual(["applied", "invalid"]);
    expect(generations).toBeGreaterThan(30);
    syncer.close();
    await long.hub.close();
    await fresh.hub.close();
  });
});
