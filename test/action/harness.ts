/**
 * Runs the GitHub Action's bundled entry (action/dist/index.mjs) as a runner does: a `node` process
 * in the workspace with the environment a pull request workflow sets, every input present as
 * `INPUT_<NAME>` (defaults from action.yml, as the runner fills them in), and the step's files for
 * the summary and outputs. Pull-request-shaped repositories: a base commit on `main` and a head
 * commit on `feature`.
 */
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { type FileChanges, makeRepo, type TempRepo, tempDir } from "../helpers/git.js";

/** The default action.yml gives github-token: a workflow expression the runner evaluates. */
export const GITHUB_TOKEN_EXPRESSION = "${{ github.token }}";

const root = fileURLToPath(new URL("../..", import.meta.url));
export const ENTRY = join(root, "action/dist/index.mjs");

/** action.yml, parsed. */
export interface ActionManifest {
  inputs: Record<string, { default?: string }>;
  outputs: Record<string, { description: string }>;
  runs: { using: string; main: string };
}

export function manifest(): ActionManifest {
  return parse(readFileSync(join(root, "action.yml"), "utf8")) as ActionManifest;
}

/** A pull request: the fleet repository with `main` at `base` and `feature` at `head`, checked out. */
export interface PullRequest {
  repo: TempRepo;
  base: string;
  head: string;
  /** Commits more to `feature` (a push to the pull request); returns the new head. */
  push(message: string, files: FileChanges): string;
}

/** A repository whose `main` holds `base` and whose checked-out branch `feature` adds `change`. */
export function pullRequest(base: FileChanges, change: FileChanges): PullRequest {
  const repo = makeRepo({ files: base });
  const baseSha = repo.rev();
  repo.git("checkout", "-q", "-b", "feature");
  const pr: PullRequest = {
    repo,
    base: baseSha,
    head: repo.commit("the change", change),
    push(message, files) {
      pr.head = repo.commit(message, files);
      return pr.head;
    },
  };
  return pr;
}

/** What the runner sees of one run of the step. */
export interface StepRun {
  code: number | null;
  stdout: string;
  stderr: string;
  summary: string;
  outputs: Record<string, string>;
}

export interface StepOptions {
  /** GITHUB_WORKSPACE; the fleet repository is at `inputs.path` inside it. */
  workspace: string;
  /** Inputs by their action.yml names; the others get their defaults. */
  inputs?: Record<string, string>;
  /** The pull request the event is about. */
  event?: { number: number; base: string; head: string };
  apiUrl?: string;
  token?: string;
  repository?: string;
  /** The Action's entry to run; default the committed bundle in this checkout. */
  entry?: string;
}

/** Parses GITHUB_OUTPUT's `name<<DELIMITER` ... `DELIMITER` blocks. */
export function parseOutputs(text: string): Record<string, string> {
  const outputs: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const heredoc = /^([^<=]+)<<(.+)$/.exec(lines[i]!);
    if (!heredoc) continue;
    const end = lines.indexOf(heredoc[2]!, i + 1);
    if (end < 0) throw new Error(`output ${heredoc[1]} is not closed by ${heredoc[2]}`);
    outputs[heredoc[1]!] = lines.slice(i + 1, end).join("\n");
    i = end;
  }
  return outputs;
}

/** Runs the Action's entry once, as the runner would, and collects what it left. */
export async function runStep(options: StepOptions): Promise<StepRun> {
  const files = tempDir("steward-runner-");
  const summary = join(files, "step_summary");
  const output = join(files, "output");
  writeFileSync(summary, "");
  writeFileSync(output, "");
  const token = options.token ?? "ghs_test_token";
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: files,
    CI: "true",
    GITHUB_ACTIONS: "true",
    GITHUB_WORKSPACE: options.workspace,
    GITHUB_STEP_SUMMARY: summary,
    GITHUB_OUTPUT: output,
    GITHUB_API_URL: options.apiUrl ?? "http://127.0.0.1:9",
    GITHUB_SERVER_URL: "https://github.com",
    GITHUB_REPOSITORY: options.repository ?? "acme/fleet",
    GITHUB_RUN_ID: "4242",
    RUNNER_TEMP: files,
  };
  if (options.event) {
    const path = join(files, "event.json");
    const { number, base, head } = options.event;
    writeFileSync(
      path,
      JSON.stringify({
        action: "synchronize",
        number,
        pull_request: {
          number,
          state: "open",
          base: { ref: "main", sha: base },
          head: { ref: "feature", sha: head },
        },
        repository: { full_name: options.repository ?? "acme/fleet" },
      }),
    );
    env.GITHUB_EVENT_NAME = "pull_request";
    env.GITHUB_EVENT_PATH = path;
  }
  // The runner sets every declared input, with its default when the workflow gives none.
  for (const [name, spec] of Object.entries(manifest().inputs)) {
    const given = options.inputs?.[name] ?? spec.default ?? "";
    env[`INPUT_${name.toUpperCase()}`] = given === GITHUB_TOKEN_EXPRESSION ? token : given;
  }
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
    (resolve) => {
      execFile(
        process.execPath,
        [options.entry ?? ENTRY],
        { cwd: options.workspace, env },
        (error, stdout, stderr) =>
          resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }),
      );
    },
  );
  return {
    code,
    stdout,
    stderr,
    summary: readFileSync(summary, "utf8"),
    outputs: parseOutputs(readFileSync(output, "utf8")),
  };
}

/**
 * The workflow commands the runner would act on: lines starting with `::`, except those between
 * `::stop-commands::TOKEN` and `::TOKEN::`.
 */
export function workflowCommands(stdout: string): string[] {
  const commands: string[] = [];
  let stopped: string | undefined;
  for (const line of stdout.split("\n")) {
    if (stopped) {
      if (line === `::${stopped}::`) stopped = undefined;
      continue;
    }
    // The runner trims leading white space before looking for `::`.
    const command = line.trimStart();
    const stop = /^::stop-commands::(.+)$/.exec(command);
    if (stop) stopped = stop[1];
    else if (command.startsWith("::")) commands.push(command);
  }
  return commands;
}

/** The 1-based line and column of the first occurrence of `needle` in `text`. */
export function positionOf(text: string, needle: string): { line: number; column: number } {
  const lines = text.split("\n");
  const line = lines.findIndex((l) => l.includes(needle));
  if (line < 0) throw new Error(`${needle} not found`);
  return { line: line + 1, column: lines[line]!.indexOf(needle) + 1 };
}
