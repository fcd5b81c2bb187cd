import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitNotesStatusWriter, readStatusNote } from "../../src/status/gitnotes.js";
import { StatusPublisher } from "../../src/status/publisher.js";
import { assignmentYaml, file, nodes } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";
import { notesPublisher } from "./helpers/notes.js";

const app = (content: string, extra: object = {}) =>
  assignmentYaml("app", { nodes: ["n1", "n2"], resources: [file("conf", content)], ...extra });

describe("hub - commit statuses", () => {
  it("hub - publishes each revision's statuses as it progresses: success once converged, failure naming condition, node and attempt", async () => {
    let publisher: StatusPublisher | undefined;
    const gitdir = join(fs.mkdtempSync(join(process.env.TMPDIR ?? "/tmp", "steward-notes-")), "fleet.git");
    execFileSync("git", ["init", "-q", "--bare", gitdir]);
    const h = await startHarness({
      files: { ...nodes("n1", "n2"), "assignments/app.yaml": app("v1") },
      hubOptions: (store) => {
        publisher ??= new StatusPublisher({
          store,
          writers: [new GitNotesStatusWriter({ fs, gitdir })],
          debounceMs: 0,
        });
        return { statusSink: publisher, statusIntervalMs: 1_000 };
      },
    });
    const notes = async (sha: string) =>
      Object.fromEntries(
        (await readStatusNote({ fs, gitdir, sha })).map((s) => [s.context, `${s.state}: ${s.description}`]),
      );
    const good = await h.commit("v1");
    await h.settle();
    await h.advance(1_000);
    await publisher!.flushNow();
    expect(await notes(good.sha)).toEqual({
      "steward/fleet": "success: 2/2 nodes at generation 1, probes passing",
      "steward/app": "success: 2/2 nodes at generation 1, probes passing",
    });

    h.write({
      "assignments/app.yaml": app("v2", {
        resources: [file("conf", "v2"), { kind: "command", name: "reload", run: ["/nonexistent/reload"] }],
      }),
    });
    const bad = await h.commit("v2");
    await h.settle();
    await h.advance(1_000);
    await publisher!.flushNow();
    const attempt = (await h.intent("app@n1")).lastAttemptId;
    expect((await notes(bad.sha))["steward/app"]).toMatch(
      new RegExp(`^failure: Blocked on n1 \\(\\+1 more\\), attempt ${attempt}: generation 2: `),
    );
    publisher!.close();
  });

  it("hub - a status destination that fails raises StatusWriteFailing until it recovers", async () => {
    const h = await startHarness({ files: { ...nodes("n1") } });
    const since = h.clock.now();
    await h.hub.statusHealth({
      provider: "github:api.github.com/acme/fleet",
      failing: true,
      reason: "ForgeUnavailable",
      message: "HTTP 502",
      since,
    });
    expect(await h.store.conditions.list({ status: "open" })).toMatchObject([
      {
        type: "StatusWriteFailing",
        subjectKind: "status",
        subject: "github:api.github.com/acme/fleet",
        reason: "ForgeUnavailable",
      },
    ]);
    await h.hub.statusHealth({
      provider: "github:api.github.com/acme/fleet",
      failing: false,
      since,
      recoveredAt: h.clock.now(),
    });
    expect(await h.store.conditions.list({ status: "open" })).toEqual([]);
  });

  it("hub - a failure status's description carries the line of the evidence that names the error", async () => {
    const notes = notesPublisher();
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          // A real Node crash: its output starts with the script's location and the source line.
          resources: [
            {
              kind: "command",
              name: "migrate",
              run: [process.execPath, "-e", 'throw new Error("schema v7 needs v6")'],
            },
          ],
          budget: { attempts: 1, within: "1h" },
        }),
      },
      hubOptions: notes.hubOptions,
    });
    const commit = await h.commit("migrate");
    await h.settle();
    await h.advance(1_000);
    await notes.publisher().flushNow();
    const attempt = (await h.intent("app@n1")).lastAttemptId;
    const [note] = (await notes.read(commit.sha)).filter((s) => s.context === "steward/app");
    expect(note).toMatchObject({ state: "failure" });
    expect(note!.description).toMatch(
      new RegExp(`^Stuck on n1, attempt ${attempt}: migrate: Error: schema v7 needs v6 \\(generation 1: `),
    );
    notes.publisher().close();
  });
});
