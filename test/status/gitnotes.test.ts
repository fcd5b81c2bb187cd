import * as fs from "node:fs";
import { join } from "node:path";
import * as isogit from "isomorphic-git";
import http from "isomorphic-git/http/node";
import { afterEach, describe, expect, it } from "vitest";
import { type CommitStatus, FLEET_CONTEXT, revisionStatuses } from "../../src/hub/status.js";
import { GitNotesStatusWriter, readStatusNote } from "../../src/status/gitnotes.js";
import { ManualClock } from "./clock.js";
import { elapse, startPublisher } from "./fixtures.js";
import {
  bareRemote,
  type GitHttpServer,
  git,
  gitOverHttp,
  gitWithInput,
  startGitHttp,
  tempDir,
  workingRepo,
} from "./git-remote.js";

let server: GitHttpServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A fleet repo served over `git http-backend`, and the hub's isomorphic-git clone of it. */
async function servedFleet() {
  const root = tempDir();
  const source = workingRepo(join(root, "work"), [
    { "steward.yaml": "kind: Fleet\n" },
    { "assignments/web.yaml": "kind: Assignment\n" },
  ]);
  bareRemote(root, "fleet", source.dir);
  server = await startGitHttp(root);
  const url = `${server.url}/fleet.git`;
  const hub = join(root, "hub");
  await isogit.clone({ fs, http, dir: hub, url, singleBranch: true, noCheckout: true });
  return { root, url, hub, shas: source.shas };
}

/** A fresh CLI clone with the remote's notes, as a user would read them. */
async function readerClone(root: string, url: string, name: string): Promise<string> {
  const dir = join(root, name);
  await gitOverHttp(root, "clone", "-q", url, dir);
  await gitOverHttp(dir, "fetch", "-q", "origin", "refs/notes/steward:refs/notes/steward");
  return dir;
}

const status = (
  sha: string,
  context: string,
  state: CommitStatus["state"],
  description: string,
): CommitStatus => ({
  sha,
  context,
  state,
  description,
});

describe("git notes status", () => {
  it("gitnotes - statuses are pushed to refs/notes/steward and read back with git log --notes=steward", async () => {
    const { root, url, hub, shas } = await servedFleet();
    const sha = shas[1]!;
    const writer = new GitNotesStatusWriter({ fs, gitdir: join(hub, ".git"), push: { url, http } });
    const clock = new ManualClock();
    const { publisher } = startPublisher({ writers: [writer], clock });
    const revision = { sha, outcome: "applied" as const, changedAssignments: ["web"] };
    const instance = (converged: boolean) => [
      { assignment: "web", node: "edge-1", generation: 2, converged },
    ];
    publisher.publish(
      revisionStatuses(revision, { instances: instance(false), publicUrl: "https://hub.example" }),
    );
    await elapse(clock, publisher, 1_000);
    publisher.publish(
      revisionStatuses(revision, { instances: instance(true), publicUrl: "https://hub.example" }),
    );
    await elapse(clock, publisher, 1_000);

    const reader = await readerClone(root, url, "reader");
    const link = `<https://hub.example/revisions/${sha}>`;
    expect(git(reader, "notes", "--ref=steward", "show", sha)).toBe(
      [
        `steward/fleet: success: 1/1 node at generation 2, probes passing ${link}`,
        `steward/web: success: 1/1 node at generation 2, probes passing ${link}`,
      ].join("\n"),
    );
    const log = git(reader, "log", "--notes=steward", "--format=%H%n%N", "-1", sha);
    expect(log).toContain("steward/fleet: success: 1/1 node at generation 2, probes passing");
    // The history of the notes ref shows the convergence: pending first, then success.
    const history = git(reader, "log", "--format=%s", "refs/notes/steward").split("\n").reverse();
    expect(history).toEqual([
      `steward: steward/fleet pending on ${sha}`,
      `steward: steward/web pending on ${sha}`,
      `steward: steward/fleet success on ${sha}`,
      `steward: steward/web success on ${sha}`,
    ]);
    // One push per batch, not one per status.
    expect(git(join(root, "fleet.git"), "rev-parse", "refs/notes/steward")).toBe(
      git(reader, "rev-parse", "refs/notes/steward"),
    );
    publisher.close();
  });

  it("gitnotes - when someone else pushed notes, ours are written again on top and theirs are kept", async () => {
    const { root, url, hub, shas } = await servedFleet();
    const writer = new GitNotesStatusWriter({ fs, gitdir: join(hub, ".git"), push: { url, http } });
    await writer.write(status(shas[1]!, FLEET_CONTEXT, "pending", "0/1 node at generation 2"));
    await writer.flush();
    // An operator annotates both commits with the CLI and pushes the notes ref.
    const operator = await readerClone(root, url, "operator");
    git(operator, "notes", "--ref=steward", "add", "-m", "reviewed by ops", shas[0]!);
    git(operator, "notes", "--ref=steward", "append", "-m", "rolled out during the freeze", shas[1]!);
    await gitOverHttp(operator, "push", "-q", "origin", "refs/notes/steward");

    await writer.write(
      status(shas[1]!, FLEET_CONTEXT, "success", "1/1 node at generation 2, probes passing"),
    );
    await writer.flush();
    const reader = await readerClone(root, url, "reader");
    expect(git(reader, "notes", "--ref=steward", "show", shas[0]!)).toBe("reviewed by ops");
    expect(git(reader, "notes", "--ref=steward", "show", shas[1]!)).toBe(
      [
        "steward/fleet: success: 1/1 node at generation 2, probes passing",
        "rolled out during the freeze",
      ].join("\n"),
    );
    expect(await readStatusNote({ fs, gitdir: join(hub, ".git"), sha: shas[1]! })).toEqual([
      status(shas[1]!, FLEET_CONTEXT, "success", "1/1 node at generation 2, probes passing"),
    ]);
  });

  it("gitnotes - without a remote the notes land in the local fleet repository", async () => {
    const repo = workingRepo(join(tempDir(), "fleet"), [{ "steward.yaml": "kind: Fleet\n" }]);
    const sha = repo.shas[0]!;
    const writer = new GitNotesStatusWriter({ fs, gitdir: join(repo.dir, ".git") });
    await writer.write(status(sha, "steward/web", "failure", "Blocked on edge-1, attempt 01J9ZQ: exit 2"));
    await writer.write(status(sha, FLEET_CONTEXT, "failure", "Blocked on edge-1, attempt 01J9ZQ: exit 2"));
    // Writing the same status again adds no commit to the notes ref.
    const before = git(repo.dir, "rev-parse", "refs/notes/steward");
    await writer.write(status(sha, FLEET_CONTEXT, "failure", "Blocked on edge-1, attempt 01J9ZQ: exit 2"));
    expect(git(repo.dir, "rev-parse", "refs/notes/steward")).toBe(before);
    expect(git(repo.dir, "log", "--notes=steward", "--format=%N", "-1")).toBe(
      [
        "steward/fleet: failure: Blocked on edge-1, attempt 01J9ZQ: exit 2",
        "steward/web: failure: Blocked on edge-1, attempt 01J9ZQ: exit 2",
      ].join("\n"),
    );
  });

  it("gitnotes - a note git stored fanned out (ab/cdef...) is found and updated in place", async () => {
    const repo = workingRepo(join(tempDir(), "fleet"), [{ "a.yaml": "a: 1\n" }]);
    const sha = repo.shas[0]!;
    git(repo.dir, "notes", "--ref=steward", "add", "-m", "steward/fleet: pending: 0/1", sha);
    // Rewrite the notes tree the way git does past ~256 notes: <2 hex>/<38 hex>.
    const blob = git(repo.dir, "rev-parse", `refs/notes/steward:${sha}`);
    const subtree = gitWithInput(repo.dir, `100644 blob ${blob}\t${sha.slice(2)}\n`, "mktree");
    const tree = gitWithInput(repo.dir, `040000 tree ${subtree}\t${sha.slice(0, 2)}\n`, "mktree");
    const commit = git(repo.dir, "commit-tree", tree, "-p", "refs/notes/steward", "-m", "fan out");
    git(repo.dir, "update-ref", "refs/notes/steward", commit);

    const writer = new GitNotesStatusWriter({ fs, gitdir: join(repo.dir, ".git") });
    expect(await readStatusNote({ fs, gitdir: join(repo.dir, ".git"), sha })).toMatchObject([
      { state: "pending" },
    ]);
    await writer.write(status(sha, FLEET_CONTEXT, "success", "1/1"));
    expect(git(repo.dir, "notes", "--ref=steward", "show", sha)).toBe("steward/fleet: success: 1/1");
    expect(git(repo.dir, "ls-tree", "-r", "--name-only", "refs/notes/steward")).toBe(
      `${sha.slice(0, 2)}/${sha.slice(2)}`,
    );
  });
});
