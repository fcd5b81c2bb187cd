import { afterAll, afterEach, describe, expect, it } from "vitest";
import { removeTempDirs } from "../helpers/git.js";
import { assignmentYaml, smallFleet } from "./fleet.js";
import { type Harness, harness, MODES } from "./harness.js";

const web = (content: string) => ({
  "assignments/web.yaml": assignmentYaml("web", { selector: { role: "web" }, content }),
});

describe.each(MODES)("force-push over %s", (mode) => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });
  afterAll(removeTempDirs);

  it("force-push - a rewritten branch is refused, the last good revision kept, and one open event records it", async () => {
    h = await harness(mode, smallFleet());
    const a = h.repo.rev();
    await h.syncer.sync();
    const b = h.commit("web v2", web("web v2\n"));
    await h.syncer.sync();
    const before = await h.store.currentInstances();

    h.repo.git("reset", "-q", "--hard", a);
    const c = h.commit("web v3, rewritten", web("web v3\n"));
    const refused = await h.syncer.sync();
    expect(refused).toMatchObject({ kind: "refused", reason: "force-push", head: c, lastGood: b });
    expect(await h.store.currentInstances()).toEqual(before);
    expect(await h.store.syncState("main")).toMatchObject({ head: c, lastGood: b });
    expect(await h.store.revision(c)).toBeUndefined();
    const [event, ...others] = await h.store.openEvents("main");
    expect(others).toEqual([]);
    expect(event).toMatchObject({ kind: "force-push", head: c, lastGood: b });
    expect(event?.message).toContain(`still serving ${b.slice(0, 12)}`);

    // Polling again changes nothing; a further commit on the rewritten history updates the same event.
    expect(await h.syncer.sync()).toMatchObject({ kind: "up-to-date", head: c, lastGood: b });
    const d = h.commit("more on the rewritten history", web("web v4\n"));
    expect(await h.syncer.sync()).toMatchObject({ kind: "refused", head: d });
    expect(await h.store.openEvents("main")).toEqual([expect.objectContaining({ id: event!.id, head: d })]);
    expect(await h.store.currentInstances()).toEqual(before);
  });

  it("force-push - resetting to an older commit never lowers a generation; accepting it makes a new one", async () => {
    h = await harness(mode, smallFleet());
    const a = h.repo.rev();
    await h.syncer.sync();
    const v1 = (await h.store.currentInstances()).get("web@web-1")!.hash;
    h.commit("web v2", web("web v2\n"));
    await h.syncer.sync();

    h.repo.git("reset", "-q", "--hard", a);
    h.push();
    expect(await h.syncer.sync()).toMatchObject({ kind: "refused", head: a });
    expect((await h.store.currentInstances()).get("web@web-1")).toMatchObject({ generation: 2 });

    const adopted = await h.syncer.sync({ acceptRewrite: true });
    expect(adopted).toMatchObject({ kind: "applied", head: a });
    expect((await h.store.currentInstances()).get("web@web-1")).toMatchObject({
      generation: 3,
      hash: v1,
      revision: a,
    });
    expect(await h.store.openEvents("main")).toEqual([]);
    expect(await h.store.syncState("main")).toMatchObject({ head: a, lastGood: a });
  });

  it("force-push - the event resolves when the branch descends from the last good revision again", async () => {
    h = await harness(mode, smallFleet());
    const a = h.repo.rev();
    await h.syncer.sync();
    const b = h.commit("web v2", web("web v2\n"));
    await h.syncer.sync();

    h.repo.git("reset", "-q", "--hard", a);
    h.commit("a mistake", web("oops\n"));
    expect(await h.syncer.sync()).toMatchObject({ kind: "refused" });

    h.repo.git("reset", "-q", "--hard", b);
    const e = h.commit("web v3 on top of the good history", web("web v3\n"));
    const outcome = await h.syncer.sync();
    expect(outcome).toMatchObject({ kind: "applied", head: e });
    expect((await h.store.currentInstances()).get("web@web-1")).toMatchObject({ generation: 3 });
    expect(await h.store.openEvents("main")).toEqual([]);
  });
});
