import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type FakeForge, startGithubForge } from "../helpers/forge-openapi.js";
import { removeTempDirs, tempDir } from "../helpers/git.js";
import { assignmentYaml, fleetYaml, nodeYaml, smallFleet } from "../repo/fleet.js";
import { ENTRY, manifest, positionOf, pullRequest, runStep, workflowCommands } from "./harness.js";

afterAll(removeTempDirs);

let forge: FakeForge | undefined;
afterEach(async () => {
  await forge?.close();
  expect(forge?.problems ?? []).toEqual([]);
  forge = undefined;
});

const TOKEN = "ghs_test_token";

const rollout = `  rollout:
    canary:
      nodes: [web-2]
      soak: 30s
    maxInFlight: 1
    maxFailures: 1
`;

/** web's config; the second line would be a workflow command if the log printed it bare. */
const webContent = (version: string) => `web ${version}\n::error::injected\n`;

function web(version: string, extra = ""): string {
  return assignmentYaml("web", {
    selector: { role: "web" },
    content: webContent(version),
    extra: rollout + extra,
  });
}

function baseFleet(): Record<string, string> {
  return {
    ...smallFleet(),
    "nodes/web-3.yaml": nodeYaml("web-3", { role: "web" }),
    "assignments/web.yaml": web("v1"),
  };
}

/** web v2 everywhere, db retired, web-4 joins: 3 new generations, 1 retired, 1 added. */
const change = {
  "assignments/web.yaml": web("v2"),
  "assignments/db.yaml": null,
  "nodes/web-4.yaml": nodeYaml("web-4", { role: "web" }),
};

/** web.yaml with a file mode the schema refuses ("644" for "0644"). */
function badMode(): string {
  return web("v1").replace(
    "      path: /srv/web/config.txt\n",
    '      path: /srv/web/config.txt\n      mode: "644"\n',
  );
}

/** A clone of the pull request's repository checked out at `feature`, at `path` in a new workspace. */
function checkoutAt(dir: string, path: string, depth?: number): string {
  const workspace = tempDir("steward-workspace-");
  const args = ["clone", "-q", "-b", "feature"];
  if (depth) args.push("--depth", String(depth));
  execFileSync("git", [...args, `file://${dir}`, join(workspace, path)], {
    env: { PATH: process.env.PATH, HOME: workspace, GIT_CONFIG_NOSYSTEM: "1" },
    stdio: "pipe",
  });
  return workspace;
}

/** The step on pull request 7, with the repository checked out at `fleet` in the workspace. */
function runInCheckout(pr: ReturnType<typeof pullRequest>) {
  return runStep({
    workspace: checkoutAt(pr.repo.dir, "fleet"),
    inputs: { path: "fleet" },
    event: { number: 7, base: pr.base, head: pr.head },
  });
}

describe("action - the bundle on its own", () => {
  it("action - a checkout of the Action (its bundle, no node_modules) reports YAML errors at their line and honours ignore globs", async () => {
    // As GitHub checks out `uses: owner/steward@v1`: action.yml and action/dist, nothing installed.
    const action = tempDir("steward-action-checkout-");
    mkdirSync(join(action, "action", "dist"), { recursive: true });
    copyFileSync(ENTRY, join(action, "action", "dist", "index.mjs"));
    const broken = {
      ...baseFleet(),
      "steward.yaml": fleetYaml('ignore:\n  - "docs/**"'),
      "docs/not-steward.yaml": "just: some yaml\n",
      // A duplicate key is reported by the positional parser, which loads the `yaml` library.
      "nodes/db-1.yaml": `${nodeYaml("db-1")}metadata:\n  name: db-1\n`,
    };
    const pr = pullRequest(baseFleet(), broken);
    const run = await runStep({
      workspace: pr.repo.dir,
      event: { number: 7, base: pr.base, head: pr.head },
      entry: join(action, "action", "dist", "index.mjs"),
    });
    expect(run.stderr).not.toMatch(/Cannot find (module|package)/);
    expect(run.outputs.valid).toBe("false");
    expect(workflowCommands(run.stdout).join("\n")).toMatch(
      /::error file=nodes\/db-1\.yaml,line=\d+,col=\d+.*duplicate key/,
    );
    expect(run.stdout).not.toContain("docs/not-steward.yaml");
  });
});

describe("action", () => {
  it("action - a valid pull request: per node the instances with a unified diff and the canary in the summary, outputs counted", async () => {
    const pr = pullRequest(baseFleet(), change);
    const run = await runStep({
      workspace: pr.repo.dir,
      event: { number: 7, base: pr.base, head: pr.head },
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.outputs).toEqual({
      valid: "true",
      "changed-instances": "5",
      "plan-json": expect.stringMatching(/plan\.json$/),
    });
    expect(Object.keys(run.outputs).sort()).toEqual(Object.keys(manifest().outputs).sort());
    const plan = JSON.parse(readFileSync(run.outputs["plan-json"]!, "utf8"));
    expect(plan.from.sha).toBe(pr.base);
    expect(plan.to).toEqual({ sha: pr.head, subject: "the change" });
    expect(plan.plan.summary).toEqual({ added: 1, retired: 1, changed: 3, unchanged: 0, nodes: 5 });

    const s = run.summary;
    expect(s).toContain("## steward: fleet repository ✅ valid");
    expect(s).toContain(
      `Head \`${pr.head.slice(0, 12)}\` (the change) is valid; compared with \`${pr.base.slice(0, 12)}\` (initial), the pull request's base.`,
    );
    expect(s).toContain("1 added, 3 new generations, 1 retired, 0 unchanged (5 nodes affected)");
    for (const node of ["db-1", "web-1", "web-2", "web-3", "web-4"])
      expect(s).toContain(`#### node \`${node}\``);
    expect(s).toContain("- **db@db-1**: retired (no longer managed; nothing is deleted)");
    expect(s).toContain("- **web@web-1**: new generation\n  - changed `file config`");
    expect(s).toContain("- **web@web-4**: added");
    expect(s).toContain(
      "    ```diff\n    --- a/srv/web/config.txt\n    +++ b/srv/web/config.txt\n    @@ -1,2 +1,2 @@\n    -web v1\n    +web v2\n     ::error::injected\n    ```",
    );
    expect(s).toContain(
      "| web | apply | 4 | canary web-2 (soak 30s) → web-1 → web-3 → web-4; pause after 2 failures |",
    );

    // The log: the plan folded in a group, and no line of a fleet file taken for a command.
    expect(workflowCommands(run.stdout)).toEqual(["::group::steward plan", "::endgroup::"]);
    // A diff's context line: the runner would take it for a command but for ::stop-commands::.
    expect(run.stdout).toMatch(/^ +::error::injected$/m);
    expect(run.stdout).toContain("  web (apply): canary web-2 (soak 30s) → web-1 → web-3 → web-4");
  });

  it("action - an invalid head: exit 1, an annotation at the exact line prefixed with the path, and a summary naming the error", async () => {
    const broken = badMode();
    const pr = pullRequest(baseFleet(), { "assignments/web.yaml": broken });
    const run = await runInCheckout(pr);
    expect(run.code).toBe(1);
    const { line, column } = positionOf(broken, '"644"');
    expect(workflowCommands(run.stdout)).toEqual([
      `::error file=fleet/assignments/web.yaml,line=${line},col=${column},title=steward schema/pattern::spec.resources[0].mode must match ^0[0-7]{3}$ (got "644"). Fix: Permissions as an octal string, e.g. "0644".`,
      "::group::steward plan",
      "::endgroup::",
    ]);
    expect(run.outputs).toMatchObject({ valid: "false", "changed-instances": "0" });
    expect(run.summary).toContain("## steward: fleet repository `fleet` ❌ invalid");
    expect(run.summary).toContain(
      `Head \`${pr.head.slice(0, 12)}\` (the change) has 1 error and 0 warnings: nothing is planned until they are fixed.`,
    );
    expect(run.summary).toContain(
      `\`\`\`\nfleet/assignments/web.yaml:${line}:${column}: error: spec.resources[0].mode must match ^0[0-7]{3}$ (got "644") [schema/pattern]\n      fix: Permissions as an octal string, e.g. "0644".\n\`\`\``,
    );
    expect(run.summary).not.toContain("steward plan:");
    expect(JSON.parse(readFileSync(run.outputs["plan-json"]!, "utf8")).invalid).toMatchObject({
      side: "to",
      sha: pr.head,
    });
  });

  it("action - the head's symlink out of the repository and unbounded duration are annotated where they are, as validate reports them", async () => {
    const pr = pullRequest(baseFleet(), {
      "steward.yaml": fleetYaml("mode: apply\nheartbeat:\n  interval: 0s"),
    });
    symlinkSync("/etc/passwd", join(pr.repo.dir, "nodes/users.yaml"));
    pr.push("and a link out of the repository", {});
    const run = await runInCheckout(pr);
    expect(run.code).toBe(1);
    expect(workflowCommands(run.stdout)).toEqual([
      '::error file=fleet/nodes/users.yaml,line=1,col=1,title=steward file/symlink-outside::symlink "nodes/users.yaml" points to "/etc/passwd", outside the repository: steward does not follow links out of it. Fix: put the file itself in the repository in place of the link, or remove the link',
      '::error file=fleet/steward.yaml,line=8,col=15,title=steward duration/range::spec.heartbeat.interval must be from 1s to 1h (got "0s"). Fix: use a duration from 1s to 1h',
      "::group::steward plan",
      "::endgroup::",
    ]);
    expect(run.outputs).toMatchObject({ valid: "false" });
  });

  it("action - an invalid base still lets the head be checked: the plan starts from an empty fleet and says so", async () => {
    const pr = pullRequest(
      { ...baseFleet(), "assignments/web.yaml": badMode() },
      { "assignments/web.yaml": web("v1") },
    );
    const run = await runStep({ workspace: pr.repo.dir, event: { number: 7, base: pr.base, head: pr.head } });
    expect(run.code).toBe(0);
    expect(run.outputs).toMatchObject({ valid: "true", "changed-instances": "4" });
    expect(workflowCommands(run.stdout)[0]).toBe(
      `::warning::the base ${pr.base.slice(0, 12)} is invalid: the plan starts from an empty fleet`,
    );
    expect(run.summary).toContain(
      `> The base \`${pr.base.slice(0, 12)}\` is itself invalid (1 error), so the plan starts from an empty fleet: every instance of the head shows as added.`,
    );
    expect(run.summary).toContain("assignments/web.yaml:");
    expect(run.summary).toContain(`### steward plan: \`(empty)\` → \`${pr.head.slice(0, 12)}\``);
    expect(run.summary).toContain("4 added, 0 new generations, 0 retired, 0 unchanged (4 nodes affected)");
  });

  it("action - warnings are annotated and pass, unless fail-on-warnings", async () => {
    const cache = assignmentYaml("cache", { selector: { role: "cache" } });
    const pr = pullRequest(baseFleet(), { "assignments/cache.yaml": cache });
    const event = { number: 7, base: pr.base, head: pr.head };
    const { line, column } = positionOf(cache, "role: cache");
    const warning = `::warning file=assignments/cache.yaml,line=${line},col=${column},title=steward selector/no-match::selector of assignment "cache" matches no node: it will run nowhere. Fix: fix the labels, or label the nodes it is meant for`;

    const lenient = await runStep({ workspace: pr.repo.dir, event });
    expect(lenient.code).toBe(0);
    expect(workflowCommands(lenient.stdout)[0]).toBe(warning);
    expect(lenient.outputs).toMatchObject({ valid: "true", "changed-instances": "0" });
    expect(lenient.summary).toContain("✅ valid");
    expect(lenient.summary).toContain("is valid with 1 warning");

    const strict = await runStep({ workspace: pr.repo.dir, event, inputs: { "fail-on-warnings": "true" } });
    expect(strict.code).toBe(1);
    expect(workflowCommands(strict.stdout)[0]).toBe(warning);
    expect(strict.outputs).toMatchObject({ valid: "false" });
    expect(strict.summary).toContain("❌ invalid");
    expect(strict.summary).toContain("Warnings fail this check (`fail-on-warnings: true`).");
  });

  it("action - the pull request comment is created once, then updated in place on the next push", async () => {
    forge = await startGithubForge({ token: TOKEN });
    // Others' comments fill the first page, so the Action's own is found only by paging on.
    for (let id = 1; id <= 120; id++)
      forge.comments.push({
        id,
        repository: "acme/fleet",
        issueNumber: 7,
        body: `review note ${id}`,
        login: "octocat",
        createdAt: "2026-01-01T00:00:00Z",
        updatedAt: "2026-01-01T00:00:00Z",
      });
    forge.comments.push({
      id: 500,
      repository: "acme/fleet",
      issueNumber: 8,
      body: "<!-- steward-plan -->\nanother pull request's plan",
      login: "github-actions[bot]",
      createdAt: "2026-01-01T00:00:00Z",
      updatedAt: "2026-01-01T00:00:00Z",
    });
    const pr = pullRequest(baseFleet(), change);
    const step = () =>
      runStep({
        workspace: pr.repo.dir,
        inputs: { comment: "true" },
        event: { number: 7, base: pr.base, head: pr.head },
        apiUrl: forge!.url,
        token: TOKEN,
      });
    const own = () => forge!.comments.filter((c) => c.body.startsWith("<!-- steward-plan -->\n"));

    const first = await step();
    expect(first.code).toBe(0);
    expect(own().map((c) => c.issueNumber)).toEqual([8, 7]);
    const created = own()[1]!;
    expect(first.stdout).toContain(
      `comment created: https://github.com/acme/fleet/pull/7#issuecomment-${created.id}`,
    );
    expect(created.body).toContain("## steward: fleet repository ✅ valid");
    expect(created.body).toContain("+web v2");
    expect(created.body).toContain("[workflow run](https://github.com/acme/fleet/actions/runs/4242)");

    pr.push("web v3", { "assignments/web.yaml": web("v3") });
    const second = await step();
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(
      `comment updated: https://github.com/acme/fleet/pull/7#issuecomment-${created.id}`,
    );
    expect(own()).toHaveLength(2);
    expect(created.body).toContain(pr.head.slice(0, 12));
    expect(created.body).toContain("+web v3");
    expect(forge.comments.find((c) => c.id === 500)!.body).toBe(
      "<!-- steward-plan -->\nanother pull request's plan",
    );

    expect(forge.requests.map((r) => `${r.operationId} ${r.params.page ?? ""}`.trim())).toEqual([
      "issues/list-comments",
      "issues/list-comments 2",
      "issues/create-comment",
      "issues/list-comments",
      "issues/list-comments 2",
      "issues/update-comment",
    ]);
    expect(forge.requests.every((r) => r.headers.authorization === `token ${TOKEN}`)).toBe(true);
    expect(forge.requests.at(-1)!.params).toMatchObject({
      owner: "acme",
      repo: "fleet",
      comment_id: created.id,
    });
  });

  it("action - a comment GitHub refuses is a warning; the check still passes and the summary is written", async () => {
    forge = await startGithubForge({ token: TOKEN });
    const pr = pullRequest(baseFleet(), change);
    const run = await runStep({
      workspace: pr.repo.dir,
      inputs: { comment: "true" },
      event: { number: 7, base: pr.base, head: pr.head },
      apiUrl: forge.url,
      token: "ghs_read_only",
    });
    expect(run.code).toBe(0);
    expect(workflowCommands(run.stdout).at(-1)).toMatch(
      /^::warning::cannot comment on pull request #7 of acme\/fleet: HTTP 401 Bad credentials.*pull-requests: write/,
    );
    expect(run.stdout).not.toContain("ghs_read_only");
    expect(run.summary).toContain("✅ valid");
    expect(forge.comments).toEqual([]);
  });

  it("action - a shallow clone without the base is one error line naming fetch-depth: 0", async () => {
    const pr = pullRequest(baseFleet(), change);
    const workspace = checkoutAt(pr.repo.dir, ".", 1);
    const run = await runStep({ workspace, event: { number: 7, base: pr.base, head: pr.head } });
    expect(run.code).toBe(1);
    expect(workflowCommands(run.stdout)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^::error::steward: .*${pr.base}.*; the base must be in the clone: use actions/checkout with fetch-depth: 0$`,
        ),
      ),
    ]);
    expect(run.stderr).toBe("");
    expect(run.summary).toBe("");
  });

  it("action - a bad input is one error line naming the input and its values", async () => {
    const pr = pullRequest(baseFleet(), change);
    const run = await runStep({
      workspace: pr.repo.dir,
      inputs: { comment: "yes" },
      event: { number: 7, base: pr.base, head: pr.head },
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('::error::steward: input comment is "yes": give true or false\n');
    expect(run.stderr).toBe("");
  });
});
