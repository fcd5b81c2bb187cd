import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MailboxPoster, readMailbox } from "../../../src/transport/nats/mailbox.js";
import { MAILBOX_STREAM, subjects } from "../../../src/transport/nats/subjects.js";
import { natsNode, testBundle } from "../../helpers/marker-agent.js";
import { type NatsTestBed, startNatsTestBed } from "../../helpers/nats-testbed.js";

/** The attempt ids `node`'s mailbox holds, in the order they were stored. */
async function attemptIdsIn(jsm: JetStreamManager, node: string): Promise<string[]> {
  return (await readMailbox(jsm.direct, node)).map(
    (e) => (JSON.parse(new TextDecoder().decode(e.data)) as { attemptId: string }).attemptId,
  );
}

describe("nats mailbox", { timeout: 60_000 }, () => {
  let bed: NatsTestBed;

  beforeAll(async () => {
    bed = await startNatsTestBed({ nodes: ["n1", "n2", "n3"] });
  });

  afterAll(async () => {
    await bed?.dispose();
  });

  it("nats mailbox - an attempt that arrives while another applies waits in hand and runs once", async () => {
    const { hub, recorded } = bed;
    const runs = await bed.startAgent("n1", { applyDelayMs: 1_500 });
    const first = testBundle("n1", "app-a", 1);
    await hub.dispatch(first, natsNode("n1"));
    await recorded.until(() => runs.applied.length === 0 && runs.started > 0, "the first apply under way");
    const second = testBundle("n1", "app-b", 1);
    await hub.dispatch(second, natsNode("n1"));
    await recorded.until(
      () => [first, second].every((b) => recorded.results.some((r) => r.attemptId === b.attemptId)),
      "both results",
    );
    expect(runs.applied.map((a) => a.attemptId)).toEqual([first.attemptId, second.attemptId]);
    // Pushed and read from the mailbox (the list changed as app-b joined it), taken once.
    expect(runs.replayed).toBe(0);
    expect(recorded.results.filter((r) => r.attemptId === second.attemptId)).toHaveLength(1);
    // Both answered: neither is left for the agent to take again.
    await recorded.until(async () => (await hub.mailbox("n1")).length === 0, "the mailbox emptied");
  });

  it("nats mailbox - an answered attempt is taken out of the mailbox: an agent that starts again takes nothing twice", async () => {
    const { hub, recorded } = bed;
    const before = await bed.startAgent("n2");
    const bundle = testBundle("n2", "web", 1);
    await hub.dispatch(bundle, natsNode("n2"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === bundle.attemptId), "the result");
    await recorded.until(async () => (await hub.mailbox("n2")).length === 0, "the mailbox emptied");
    expect(before.applied).toHaveLength(1);
    await bed.stopAgent("n2");
    const after = await bed.startAgent("n2");
    // A newer attempt behind it shows the agent has read its mailbox and is taking work again.
    const next = testBundle("n2", "web", 2);
    await hub.dispatch(next, natsNode("n2"));
    await recorded.until(() => after.applied.length === 1, "the next attempt applied");
    expect(after.applied.map((a) => a.attemptId)).toEqual([next.attemptId]);
    expect(after.replayed).toBe(0);
  });

  it("nats mailbox - an attempt the Agent fails on is taken again from the mailbox a second later, until it is answered", async () => {
    const { hub, recorded } = bed;
    const runs = await bed.startAgent("n3", { crashTimes: 2 });
    const bundle = testBundle("n3", "db", 1);
    await hub.dispatch(bundle, natsNode("n3"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === bundle.attemptId), "the result");
    expect(runs.crashed).toBe(2);
    expect(runs.applied.map((a) => a.attemptId)).toEqual([bundle.attemptId]);
  });

  it("nats mailbox - an Agent failing on every try is left to the hub after five", async () => {
    const { hub, recorded } = bed;
    const runs = await bed.startAgent("n3", { crash: true });
    const bundle = testBundle("n3", "db", 2);
    await hub.dispatch(bundle, natsNode("n3"));
    await recorded.until(() => runs.crashed === 5, "five tries");
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(runs.crashed).toBe(5);
    expect(recorded.results.some((r) => r.attemptId === bundle.attemptId)).toBe(false);
    // Still the newest attempt in the mailbox: an agent that starts again takes it.
    const fixed = await bed.startAgent("n3");
    await recorded.until(
      () => fixed.applied.some((a) => a.attemptId === bundle.attemptId),
      "applied after a restart",
    );
  });

  it("nats mailbox - two writers of one node's list (two hub replicas) keep each other's assignments", async () => {
    const [a, b] = await Promise.all([
      connect({ servers: bed.server.url }),
      connect({ servers: bed.server.url }),
    ]);
    try {
      const posters = await Promise.all(
        [a, b].map(
          async (nc) =>
            new MailboxPoster({
              js: jetstream(nc),
              jsm: await jetstreamManager(nc),
              timeoutMs: 2_000,
            }),
        ),
      );
      const posts = [];
      for (let i = 0; i < 6; i++) {
        const bundle = testBundle("n9", `app-${i}`, 1);
        posts.push(
          (posters[i % 2] as MailboxPoster).post("n9", `app-${i}`, bundle.attemptId, JSON.stringify(bundle)),
        );
      }
      await Promise.all(posts);
      const jsm = await jetstreamManager(a);
      const list = await jsm.direct.getMessage(MAILBOX_STREAM, { last_by_subj: subjects.mailbox("n9") });
      expect(list?.json()).toEqual({
        node: "n9",
        assignments: ["app-0", "app-1", "app-2", "app-3", "app-4", "app-5"],
      });
      // Every attempt is there to read, in the order they were stored.
      const entries = await readMailbox(jsm.direct, "n9");
      expect(entries.map((e) => e.subject).sort()).toEqual(
        [0, 1, 2, 3, 4, 5].map((i) => subjects.attempt("n9", `app-${i}`)),
      );
      expect(entries.map((e) => e.seq)).toEqual(entries.map((e) => e.seq).sort((x, y) => x - y));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("nats mailbox - answered attempts are taken out a few at a time: only the answered one, never a newer attempt posted since, and an answer delivered twice is harmless", async () => {
    const nc = await connect({ servers: bed.server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const poster = new MailboxPoster({ js: jetstream(nc), jsm, timeoutMs: 2_000, settlesInFlight: 2 });
      const ids = (version: number) =>
        Array.from({ length: 10 }, (_, i) => testBundle("n8", `app-${i}`, version));
      const first = ids(1);
      for (const [i, bundle] of first.entries())
        await poster.post("n8", `app-${i}`, bundle.attemptId, JSON.stringify(bundle));
      // app-0..4 get a newer attempt before their first is answered.
      const second = ids(2).slice(0, 5);
      for (const [i, bundle] of second.entries())
        await poster.post("n8", `app-${i}`, bundle.attemptId, JSON.stringify(bundle));
      for (const [i, bundle] of first.entries()) poster.settle("n8", `app-${i}`, bundle.attemptId);
      const left = () => attemptIdsIn(jsm, "n8");
      await bed.recorded.until(async () => (await left()).length === 5, "the five answered taken out");
      expect((await left()).sort()).toEqual(second.map((b) => b.attemptId).sort());
      // app-0 and app-1 answered, each twice (a result delivered again).
      for (const i of [0, 1, 0, 1]) poster.settle("n8", `app-${i}`, second[i]!.attemptId);
      await bed.recorded.until(async () => (await left()).length === 3, "app-0 and app-1 taken out");
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await left()).sort()).toEqual(
        second
          .slice(2)
          .map((b) => b.attemptId)
          .sort(),
      );
    } finally {
      await nc.close();
    }
  });
  it("nats mailbox - an answer to an attempt another process posted (a replica, or this hub before a restart) is found on its subject and taken out, unless a newer attempt replaced it", async () => {
    const nc = await connect({ servers: bed.server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const before = new MailboxPoster({ js: jetstream(nc), jsm, timeoutMs: 2_000 });
      const bundles = Array.from({ length: 3 }, (_, i) => testBundle("elsewhere-1", `app-${i}`, 1));
      for (const bundle of bundles)
        await before.post("elsewhere-1", bundle.spec.assignment, bundle.attemptId, JSON.stringify(bundle));
      // app-2 gets a newer attempt (from the process before) before its first is answered.
      const newer = testBundle("elsewhere-1", "app-2", 2);
      await before.post("elsewhere-1", "app-2", newer.attemptId, JSON.stringify(newer));
      const after = new MailboxPoster({ js: jetstream(nc), jsm, timeoutMs: 2_000 });
      for (const bundle of bundles) after.settle("elsewhere-1", bundle.spec.assignment, bundle.attemptId);
      const left = () => attemptIdsIn(jsm, "elsewhere-1");
      await bed.recorded.until(async () => (await left()).length === 1, "app-0 and app-1 taken out");
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await left()).toEqual([newer.attemptId]);
    } finally {
      await nc.close();
    }
  });

  it("nats mailbox - thousands of answers queued at once (the tail of a rollout) are all taken out", async () => {
    const nc = await connect({ servers: bed.server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const poster = new MailboxPoster({ js: jetstream(nc), jsm, timeoutMs: 5_000 });
      const nodes = Array.from({ length: 450 }, (_, n) => `bulk-${n}`);
      const bundles = nodes.flatMap((node) =>
        Array.from({ length: 10 }, (_, i) => testBundle(node, `app-${i}`, 1)),
      );
      for (let i = 0; i < bundles.length; i += 500)
        await Promise.all(
          bundles
            .slice(i, i + 500)
            .map((b) => poster.post(b.spec.node, b.spec.assignment, b.attemptId, JSON.stringify(b))),
        );
      const stored = async () => (await jsm.streams.info(MAILBOX_STREAM)).state.messages;
      const posted = await stored();
      for (const b of bundles) poster.settle(b.spec.node, b.spec.assignment, b.attemptId);
      // Only the lists stay: one per node.
      await bed.recorded.until(
        async () => (await stored()) === posted - bundles.length,
        "every answer taken out",
      );
      expect(await readMailbox(jsm.direct, "bulk-449")).toEqual([]);
    } finally {
      await nc.close();
    }
  });
});
