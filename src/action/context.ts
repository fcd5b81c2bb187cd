/**
 * What the GitHub Action is asked to do: its inputs (`INPUT_<NAME>` variables, named as in
 * action.yml and upper-cased by the runner: `INPUT_GITHUB-TOKEN`) and the environment a runner sets
 * (`GITHUB_WORKSPACE`, `GITHUB_EVENT_PATH`, `GITHUB_STEP_SUMMARY`, `GITHUB_OUTPUT`, `GITHUB_API_URL`,
 * `GITHUB_REPOSITORY`...). Reading them is all this module does; `run.ts` does the work.
 */
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { relative, resolve, sep } from "node:path";
import { StewardError } from "../model/errors.js";

/** An input or an environment variable of the Action is wrong or missing. */
export class ActionInputError extends StewardError {
  override readonly name = "ActionInputError";
  constructor(message: string, data?: Record<string, unknown>) {
    super("E_ACTION_INPUT", message, data ? { data } : {});
  }
}

/** Where the base revision came from, for the summary. */
export type BaseOrigin = "input" | "pull_request" | "merge_group" | "push" | "parent";

/** The pull request the run is for (from the event). */
export interface PullRequestRef {
  number: number;
  baseSha?: string;
  headSha?: string;
}

/** Everything `runAction` needs to know, resolved from inputs and the runner's environment. */
export interface ActionContext {
  /** GITHUB_WORKSPACE (the current directory when run by hand). */
  workspace: string;
  /** The fleet repository checkout, absolute. */
  repoDir: string;
  /** The same, relative to the workspace with `/` separators (`""` for the workspace itself). */
  repoPath: string;
  /** The base commit-ish; absent: the first parent of `head` (an empty fleet for a root commit). */
  base?: string;
  baseOrigin: BaseOrigin;
  /** The head commit-ish (input `head`, default `HEAD`: what actions/checkout checked out). */
  head: string;
  comment: boolean;
  failOnWarnings: boolean;
  /** For the comment; never printed. */
  token?: string;
  apiUrl: string;
  repository?: { owner: string; repo: string };
  pullRequest?: PullRequestRef;
  /** GITHUB_STEP_SUMMARY and GITHUB_OUTPUT: files the runner reads after the step. */
  summaryFile?: string;
  outputFile?: string;
  /** Where the plan JSON is written (RUNNER_TEMP). */
  tempDir: string;
  /** The run's page, linked from the comment. */
  runUrl?: string;
}

/** The inputs action.yml declares (a test holds the two lists equal). */
export const ACTION_INPUTS = ["path", "base", "head", "comment", "github-token", "fail-on-warnings"] as const;

/** One of the Action's inputs. */
export type ActionInputName = (typeof ACTION_INPUTS)[number];

/** An input's value as the runner passes it (`INPUT_` + name upper-cased; spaces become `_`). */
export function input(env: NodeJS.ProcessEnv, name: ActionInputName): string {
  return (env[`INPUT_${name.replace(/ /g, "_").toUpperCase()}`] ?? "").trim();
}

const TRUE = ["true", "True", "TRUE"];
const FALSE = ["false", "False", "FALSE"];

/** A boolean input, accepting what YAML 1.2 calls true and false (as @actions/core does). */
export function booleanInput(env: NodeJS.ProcessEnv, name: ActionInputName, fallback: boolean): boolean {
  const value = input(env, name);
  if (value === "") return fallback;
  if (TRUE.includes(value)) return true;
  if (FALSE.includes(value)) return false;
  throw new ActionInputError(`input ${name} is ${JSON.stringify(value)}: give true or false`, {
    name,
    value,
  });
}

/** The parts of a webhook event payload the Action reads. */
interface EventPayload {
  number?: number;
  before?: string;
  pull_request?: { number?: number; base?: { sha?: string }; head?: { sha?: string } };
  merge_group?: { base_sha?: string };
}

function readEvent(path: string | undefined): EventPayload {
  if (!path) return {};
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ActionInputError(
      `GITHUB_EVENT_PATH ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? error}): run the Action in a workflow, or unset GITHUB_EVENT_PATH and give the base input`,
    );
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    return parsed !== null && typeof parsed === "object" ? (parsed as EventPayload) : {};
  } catch {
    throw new ActionInputError(
      `GITHUB_EVENT_PATH ${path} is not JSON: run the Action in a workflow, or unset GITHUB_EVENT_PATH`,
    );
  }
}

const NO_COMMIT = /^0{40}$/;

/** The base the event implies: the pull request's base, a merge group's base, or a push's `before`. */
function eventBase(
  event: EventPayload,
): { base: string; origin: BaseOrigin } | { base: undefined; origin: "parent" } {
  const pr = event.pull_request?.base?.sha;
  if (pr) return { base: pr, origin: "pull_request" };
  const group = event.merge_group?.base_sha;
  if (group) return { base: group, origin: "merge_group" };
  // A new branch is pushed with `before` all zeros: there is nothing before it.
  if (event.before && !NO_COMMIT.test(event.before)) return { base: event.before, origin: "push" };
  return { base: undefined, origin: "parent" };
}

function repositoryOf(value: string | undefined): ActionContext["repository"] {
  const match = value ? /^([^/\s]+)\/([^/\s]+)$/.exec(value) : null;
  return match ? { owner: match[1]!, repo: match[2]! } : undefined;
}

/**
 * Resolves the Action's inputs and environment. Throws ActionInputError for a bad input or an
 * unreadable event; never reads the repository itself.
 */
export function actionContext(env: NodeJS.ProcessEnv, cwd: string): ActionContext {
  const workspace = resolve(cwd, env.GITHUB_WORKSPACE || ".");
  const repoDir = resolve(workspace, input(env, "path") || ".");
  const repoPath = relative(workspace, repoDir).split(sep).join("/");
  const event = readEvent(env.GITHUB_EVENT_PATH);
  const given = input(env, "base");
  const implied = eventBase(event);
  const prNumber = event.pull_request?.number ?? event.number;
  const context: ActionContext = {
    workspace,
    repoDir,
    repoPath,
    baseOrigin: given ? "input" : implied.origin,
    head: input(env, "head") || "HEAD",
    comment: booleanInput(env, "comment", false),
    failOnWarnings: booleanInput(env, "fail-on-warnings", false),
    apiUrl: (env.GITHUB_API_URL || "https://api.github.com").replace(/\/+$/, ""),
    tempDir: env.RUNNER_TEMP || tmpdir(),
  };
  const base = given || implied.base;
  if (base) context.base = base;
  const token = input(env, "github-token");
  if (token) context.token = token;
  const repository = repositoryOf(env.GITHUB_REPOSITORY);
  if (repository) context.repository = repository;
  if (event.pull_request && typeof prNumber === "number") {
    const pullRequest: PullRequestRef = { number: prNumber };
    if (event.pull_request.base?.sha) pullRequest.baseSha = event.pull_request.base.sha;
    if (event.pull_request.head?.sha) pullRequest.headSha = event.pull_request.head.sha;
    context.pullRequest = pullRequest;
  }
  if (env.GITHUB_STEP_SUMMARY) context.summaryFile = env.GITHUB_STEP_SUMMARY;
  if (env.GITHUB_OUTPUT) context.outputFile = env.GITHUB_OUTPUT;
  if (env.GITHUB_SERVER_URL && env.GITHUB_REPOSITORY && env.GITHUB_RUN_ID)
    context.runUrl = `${env.GITHUB_SERVER_URL.replace(/\/+$/, "")}/${env.GITHUB_REPOSITORY}/actions/runs/${env.GITHUB_RUN_ID}`;
  return context;
}
