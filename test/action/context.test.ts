import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { actionContext } from "../../src/action/context.js";
import { removeTempDirs, tempDir } from "../helpers/git.js";

afterAll(removeTempDirs);

const A = "a".repeat(40);
const B = "b".repeat(40);

function withEvent(event: unknown, env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const path = join(tempDir(), "event.json");
  writeFileSync(path, JSON.stringify(event));
  return { GITHUB_WORKSPACE: "/work/space", GITHUB_EVENT_PATH: path, ...env };
}

const cases: { name: string; env: () => NodeJS.ProcessEnv; base?: string; origin: string; pr?: number }[] = [
  {
    name: "a pull request plans from its base",
    env: () => withEvent({ number: 7, pull_request: { number: 7, base: { sha: A }, head: { sha: B } } }),
    base: A,
    origin: "pull_request",
    pr: 7,
  },
  {
    name: "the base input wins over the event",
    env: () => withEvent({ pull_request: { number: 7, base: { sha: A } } }, { INPUT_BASE: "main~2" }),
    base: "main~2",
    origin: "input",
    pr: 7,
  },
  {
    name: "a merge queue plans from the queue's base",
    env: () => withEvent({ merge_group: { base_sha: A } }),
    base: A,
    origin: "merge_group",
  },
  {
    name: "a push plans from the commit before it",
    env: () => withEvent({ before: A, after: B }),
    base: A,
    origin: "push",
  },
  {
    name: "a new branch's push (before all zeros) plans from the head's parent",
    env: () => withEvent({ before: "0".repeat(40), after: B }),
    origin: "parent",
  },
  {
    name: "no event at all plans from the head's parent",
    env: () => ({ GITHUB_WORKSPACE: "/work/space" }),
    origin: "parent",
  },
];

describe("action context", () => {
  it.each(cases)("action context - $name", ({ env, base, origin, pr }) => {
    const context = actionContext(env(), "/elsewhere");
    expect(context.base).toBe(base);
    expect(context.baseOrigin).toBe(origin);
    expect(context.pullRequest?.number).toBe(pr);
    expect(context.head).toBe("HEAD");
  });

  it("action context - the path input is resolved in the workspace and kept relative for annotations", () => {
    const context = actionContext(
      { GITHUB_WORKSPACE: "/work/space", INPUT_PATH: "./deploy/fleet/" },
      "/elsewhere",
    );
    expect(context.repoDir).toBe("/work/space/deploy/fleet");
    expect(context.repoPath).toBe("deploy/fleet");
    expect(actionContext({ GITHUB_WORKSPACE: "/work/space", INPUT_PATH: "." }, "/").repoPath).toBe("");
  });

  it("action context - an unreadable or malformed event is one clear error", () => {
    expect(() => actionContext({ GITHUB_EVENT_PATH: "/nonexistent/event.json" }, "/")).toThrow(
      /^GITHUB_EVENT_PATH \/nonexistent\/event.json cannot be read \(ENOENT\)/,
    );
    const path = join(tempDir(), "event.json");
    writeFileSync(path, "{not json");
    expect(() => actionContext({ GITHUB_EVENT_PATH: path }, "/")).toThrow(/is not JSON/);
  });
});
