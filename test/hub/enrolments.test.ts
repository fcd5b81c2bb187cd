/**
 * Admitting a host is a commit: `steward enrolments` lists the hosts that asked to join (as the hub
 * recorded them), `approve` writes the Node document into a real fleet repository — on the branch
 * steward/enrol-NAME to merge, on the tracked branch with --commit, or only printed — and `deny`
 * refuses a host from then on. The conditions resolve by observation once the tracked branch declares
 * the key, or close with the denial.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { statePathsIn } from "../../src/cli/hub-state.js";
import { systemClock } from "../../src/hub/clock.js";
import { conditionViolations } from "../../src/hub/conditions.js";
import { recordDeclaredFleet } from "../../src/hub/desired.js";
import { receiveEnrolment, reviewEnrolments } from "../../src/hub/enrolment/enrolments.js";
import type { EnrolmentInput } from "../../src/hub/enrolment/records.js";
import { idFactory } from "../../src/hub/ids.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import { directorySource, loadRepo } from "../../src/model/load.js";
import { runCli } from "../helpers/cli.js";
import { makeRepo, removeTempDirs, tempDir } from "../helpers/git.js";
import { assignmentYaml, fleetYaml, nodeYaml } from "./helpers/fleet.js";

afterAll(() => removeTempDirs());

const key = (c: string) => `U${c.repeat(55)}`;
const age = (c: string) => `age1${c.repeat(58)}`;
const facts = { hostname: "h", os: "Debian GNU/Linux 12", arch: "x64", agentVersion: "0.1.0" };
const ask = (node: string, c: string, labels: Record<string, string> = {}): EnrolmentInput => ({
  node,
  identity: { nkey: key(c), age: age(c.toLowerCase()) },
  labels,
  facts,
});

describe("enrolments - approve writes the Node document into Git, deny refuses the host", () => {
  const repo = makeRepo({
    files: {
      "steward.yaml": fleetYaml({ enrolment: { roots: ["/srv/web"] } }),
      "nodes/web-1.yaml": `# web-1 runs the shop front; ask Ana before moving it.\n${nodeYaml("web-1", { transport: "nats", roots: ["/srv/web"], identity: { nkey: key("C"), age: age("c") } })}`,
      "assignments/web.yaml": assignmentYaml("web", {
        selector: { matchLabels: { role: "web" } },
        resources: [{ kind: "file", path: "/srv/web/index.html", content: "hi\n" }],
      }),
    },
  });
  const state = tempDir("steward-enrol-state-");
  const store = new SqliteStore(statePathsIn(state).db);
  const ctx = () => ({ store, now: new Date().toISOString(), newId: idFactory(systemClock) });
  const env = { STEWARD_GIT_AUTHOR_NAME: "Ana", STEWARD_GIT_AUTHOR_EMAIL: "ana@example.net", USER: "ana" };
  const steward = (...args: string[]) => runCli(["--state", state, ...args], repo.dir, env);
  /** What the hub does after a sync: record the served revision's declarations, then look again. */
  const declare = async () => {
    const loaded = await loadRepo(directorySource(repo.dir));
    expect(loaded.ok, JSON.stringify(loaded.diagnostics)).toBe(true);
    const changes = await recordDeclaredFleet(store, repo.rev(), loaded.desired!, new Date().toISOString());
    await reviewEnrolments(ctx(), changes.nodes);
  };
  afterAll(() => store.close());

  it("enrolments - a new host is queued as a task; approve writes nodes/NAME.yaml on steward/enrol-NAME, main untouched", async () => {
    await declare();
    expect(await receiveEnrolment(ctx(), ask("web-3", "A", { role: "web" }))).toMatchObject({
      status: "queued",
    });
    const [condition] = await store.conditions.list({ type: "EnrolmentRequested", status: "open" });
    expect(condition).toMatchObject({ subject: "web-3", resolver: "operator" });
    expect(await store.tasks.ofCondition(condition!.id)).toMatchObject({
      status: "open",
      type: "EnrolmentRequested",
    });
    expect(await receiveEnrolment(ctx(), ask("web-3", "A", { role: "web" }))).toMatchObject({
      status: "duplicate",
    });

    const listed = await steward("enrolments");
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/web-3\s+UAAAAAAAAAAA…\s+queued\s+.*role=web/);

    const main = repo.rev();
    const printed = await steward("enrolments", "approve", "web-3", "--print");
    expect(printed.code).toBe(0);
    expect(parse(printed.stdout)).toEqual({
      apiVersion: "steward.dev/v1",
      kind: "Node",
      metadata: { name: "web-3", labels: { role: "web" } },
      spec: { transport: "nats", roots: ["/srv/web"], identity: { nkey: key("A"), age: age("a") } },
    });
    expect(repo.git("branch", "--list", "steward/*")).toBe("");

    const approved = await steward("enrolments", "approve", "web-3");
    expect(approved.stderr).toBe("");
    expect(approved.code).toBe(0);
    expect(approved.stdout).toMatch(
      /approved "web-3" .*wrote nodes\/web-3\.yaml in commit [0-9a-f]{12} on steward\/enrol-web-3/,
    );
    expect(repo.rev()).toBe(main);
    expect(repo.git("show", "steward/enrol-web-3:nodes/web-3.yaml")).toBe(printed.stdout.trim());
    expect(repo.git("log", "-1", "--format=%an %s", "steward/enrol-web-3")).toBe(
      "Ana Admit node web-3 (steward enrolments approve)",
    );
    expect(repo.rev("steward/enrol-web-3^")).toBe(main);
    // The task is answered with what was done; the condition waits for the commit on main.
    expect(await store.tasks.ofCondition(condition!.id)).toMatchObject({
      status: "resolved",
      resolvedBy: "ana",
    });
    expect(await store.conditions.get(condition!.id)).toMatchObject({ status: "open" });
    expect(await receiveEnrolment(ctx(), ask("web-3", "A", { role: "web" }))).toMatchObject({
      status: "duplicate",
      message: expect.stringMatching(
        /^approved by ana: waiting for commit [0-9a-f]{12} \(nodes\/web-3\.yaml on steward\/enrol-web-3\)/,
      ),
    });
    const again = await steward("enrolments", "approve", "web-3", "--key", key("A"));
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/the branch steward\/enrol-web-3 exists already: merge or delete it/);

    // A person merges the pull request; the hub syncs it: the host is admitted.
    repo.git("merge", "-q", "--ff-only", "steward/enrol-web-3");
    await declare();
    expect(await store.conditions.get(condition!.id)).toMatchObject({ status: "resolved" });
    expect(await store.enrolments.request("web-3", key("A"))).toMatchObject({ status: "admitted" });
    expect(await receiveEnrolment(ctx(), ask("web-3", "A"))).toMatchObject({
      status: "admitted",
      admit: { node: "web-3", nkey: key("A") },
    });
    expect(await conditionViolations(store)).toEqual([]);
  });

  it("enrolments - a name declared with another key is a conflict; approve --commit gives the node the new key in place", async () => {
    expect(await receiveEnrolment(ctx(), ask("web-1", "D"))).toMatchObject({
      status: "refused",
      message: expect.stringMatching(
        /^the fleet declares node "web-1" with another key \(UCCCCCCCCCCC…\): refused — a person decides \(task \w+\)/,
      ),
    });
    const conflict = await store.conditions.findOpen("IdentityConflict", "node", "web-1");
    expect(conflict).toMatchObject({ reason: "NameDeclaredWithAnotherKey", resolver: "operator" });
    expect(await store.tasks.ofCondition(conflict!.id)).toMatchObject({ status: "open" });
    const before = repo.rev();
    const approved = await steward("enrolments", "approve", "web-1", "--commit");
    expect(approved.stderr).toBe("");
    expect(approved.code).toBe(0);
    expect(approved.stdout).toMatch(/its identity in nodes\/web-1\.yaml in commit \w+ on main/);
    expect(repo.rev("HEAD^")).toBe(before);
    // Edited in place: the comment, labels and roots stay; only the identity is new.
    const text = readFileSync(join(repo.dir, "nodes/web-1.yaml"), "utf8");
    expect(text).toMatch(/^# web-1 runs the shop front; ask Ana before moving it\.\n/);
    expect(parse(text).spec).toEqual({
      transport: "nats",
      roots: ["/srv/web"],
      identity: { nkey: key("D"), age: age("d") },
    });
    expect(repo.git("status", "--porcelain")).toBe("");
    await declare();
    expect(await store.conditions.get(conflict!.id)).toMatchObject({ status: "resolved" });
    expect(await receiveEnrolment(ctx(), ask("web-1", "D"))).toMatchObject({ status: "admitted" });
    expect(await receiveEnrolment(ctx(), ask("web-1", "C"))).toMatchObject({ status: "refused" });
  });

  it("enrolments - deny refuses the host from then on, resolving its task and closing its condition", async () => {
    await receiveEnrolment(ctx(), ask("web-4", "E"));
    const condition = (await store.conditions.findOpen("EnrolmentRequested", "node", "web-4"))!;
    const denied = await steward("enrolments", "deny", "web-4", "--reason", "not one of ours");
    expect(denied.code).toBe(0);
    expect(denied.stdout).toMatch(/denied "web-4" .* by ana: not one of ours/);
    expect(await store.conditions.get(condition.id)).toMatchObject({
      status: "resolved",
      resolver: "operator",
    });
    expect(await store.tasks.ofCondition(condition.id)).toMatchObject({
      status: "resolved",
      action: "denied: not one of ours",
    });
    expect(await receiveEnrolment(ctx(), ask("web-4", "E"))).toEqual({
      status: "refused",
      message: 'ana denied this host joining as "web-4": not one of ours',
    });
    expect((await steward("enrolments")).stdout).not.toMatch(/web-4/);
    expect((await steward("enrolments", "--all")).stdout).toMatch(/web-4\s+\S+\s+denied/);
    expect(await conditionViolations(store)).toEqual([]);
  });

  it("enrolments - mistakes are one line with the fix, exit 2, and nothing written", async () => {
    const cases: [string[], RegExp][] = [
      [
        ["enrolments", "approve", "nobody"],
        /^steward: no host asked to join as "nobody": run `steward enrolments`/,
      ],
      [["enrolments", "approve", "web-3", "--roots", "srv"], /"srv" is not an absolute directory/],
      [["enrolments", "approve", "web-3", "--commit", "--print"], /--commit and --print exclude each other/],
      [["enrolments", "deny", "web-3"], /required option '--reason <text>' not specified/],
    ];
    for (const [args, message] of cases) {
      const run = await steward(...args);
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stderr.trim().split("\n").length).toBeLessThanOrEqual(2);
    }
    // Without roots anywhere a new node cannot be written.
    repo.commit("no enrolment roots", { "steward.yaml": fleetYaml({}) });
    await declare();
    await receiveEnrolment(ctx(), ask("web-5", "F"));
    const rootless = await steward("enrolments", "approve", "web-5");
    expect(rootless.code).toBe(1);
    expect(rootless.stderr).toMatch(
      /node "web-5" needs roots .*: pass --roots DIR\[,DIR\.\.\.\], or declare spec\.enrolment\.roots in steward\.yaml/,
    );
    expect(repo.git("branch", "--list", "steward/enrol-web-5")).toBe("");
  });
});
