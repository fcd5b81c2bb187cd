/**
 * The repositories `steward validate` once accepted (test/helpers/holes.ts), committed to a real
 * git repository and synced by the real syncer into a running hub: the revision is invalid with
 * the same diagnostic as `validate`, it opens InvalidRevision naming file:line, and nothing is
 * applied (the node keeps the page of the last good revision). Symlinks that stay inside the
 * repository, and names that are paths with spaces, are delivered.
 */
import { describe, expect, it } from "vitest";
import { tempDir } from "../helpers/git.js";
import { BROKEN_FLEETS, LINKED_FLEET, VALID_FLEET, writeBroken, writeRepository } from "../helpers/holes.js";
import { startHarness } from "./helpers/harness.js";

describe("hub - revisions validate once accepted", () => {
  it.each(BROKEN_FLEETS.map((broken) => [broken.name, broken] as const))(
    "hub - %s is an invalid revision: InvalidRevision, nothing applied",
    async (_, broken) => {
      const h = await startHarness({ files: VALID_FLEET });
      const good = await h.commit("web v1");
      await h.settle();
      expect(await h.intent("web@web-1")).toMatchObject({ generation: 1, status: "converged" });

      writeBroken(h.repo, broken, tempDir("steward-outside-"));
      const bad = await h.commit("web v2, and a hole");
      await h.settle();
      const { file, line, column, code, message, fix } = broken.expected;
      expect(bad.outcome.kind).toBe("invalid");
      const diagnostics = bad.outcome.kind === "invalid" ? bad.outcome.diagnostics : [];
      expect(diagnostics.map((d) => [d.file, d.line, d.column, d.code])).toEqual([
        [file, line, column, code],
      ]);
      for (const part of message) expect(diagnostics[0]!.message).toContain(part);
      expect(diagnostics[0]!.fix).toContain(fix);
      const [condition] = await h.store.conditions.list({ type: "InvalidRevision", status: "open" });
      expect(condition).toMatchObject({ subject: bad.sha, reason: "ValidationFailed" });
      expect(condition!.message).toContain(`${file}:${line}:${column}: `);
      // Nothing applied: web stays at the generation and page of the last good revision.
      expect(await h.store.desired.instance("web@web-1")).toMatchObject({
        generation: 1,
        revision: good.sha,
      });
      expect(h.read("web-1", "srv/web/index.html")).toBe("v1");
    },
  );
});

describe("hub - what validate accepts, the agent accepts", () => {
  it("hub - symlinks inside the repository are delivered as what they lead to, each document once", async () => {
    const h = await startHarness({ files: VALID_FLEET });
    writeRepository(h.repo, LINKED_FLEET.files, LINKED_FLEET.links);
    const synced = await h.commit("linked fleet");
    expect(synced.outcome).toMatchObject({ kind: "applied" });
    expect(await h.store.conditions.list({ status: "open" })).toEqual([]);
    // steward.yaml is the linked Fleet document: observe mode, nothing dispatched.
    await h.settle();
    expect(await h.store.attempts.ofInstance("page@web-2")).toEqual([]);
    const generations = synced.outcome.kind === "applied" ? synced.outcome.generations : [];
    expect(generations.map((g) => g.instanceKey)).toEqual(["page@web-2", "web@web-1"]);
    expect((await h.store.desired.instance("page@web-2"))!.spec.resources[0]).toMatchObject({
      path: "/srv/page.html",
      content: "<p>linked</p>\n",
    });
  });

  it("hub - a file whose path has a space and a plus is delivered (its name is its path)", async () => {
    const h = await startHarness({
      files: {
        ...VALID_FLEET,
        "assignments/spaced.yaml":
          'apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: spaced\nspec:\n  nodes: [web-1]\n  resources:\n    - kind: file\n      path: "/srv/my file+x.conf"\n      content: spaced\n    - kind: command\n      name: after the file\n      dependsOn: ["/srv/my file+x.conf"]\n      run: [/bin/true]\n',
      },
    });
    await h.commit("a path with a space");
    await h.settle();
    expect(await h.store.conditions.list({ status: "open" })).toEqual([]);
    expect(await h.intent("spaced@web-1")).toMatchObject({ generation: 1, status: "converged" });
    expect(h.read("web-1", "srv/my file+x.conf")).toBe("spaced");
  });
});
