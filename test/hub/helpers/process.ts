/**
 * Runs the steward CLI as a separate process, as a user would: the sources are bundled once per test
 * run with esbuild into a package-shaped directory (package.json, examples and node_modules linked
 * next to it), so a test can kill the process with SIGKILL and start it again.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, openSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const built = new Map<string, Promise<string>>();

/**
 * The path of a runnable `steward` entry built from the current sources. `prelude` (TypeScript,
 * imports relative to the checkout) runs before the CLI, in the same bundle: a test injects a fault
 * into the very modules the CLI uses (a crash at a chosen point, say).
 */
export function stewardEntry(prelude = ""): Promise<string> {
  let entry = built.get(prelude);
  if (entry) return entry;
  entry = (async () => {
    const pkg = mkdtempSync(join(tmpdir(), "steward-cli-"));
    for (const name of ["package.json", "node_modules", "examples", "schemas"])
      symlinkSync(join(REPO, name), join(pkg, name));
    const out = join(pkg, "dist", "cli", "steward.mjs");
    mkdirSync(dirname(out), { recursive: true });
    await build({
      stdin: {
        contents: `${prelude}\nimport { main } from "./src/cli/main.ts"; main(process.argv.slice(2)).then((code) => { process.exitCode = code; });`,
        resolveDir: REPO,
        loader: "ts",
      },
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      outfile: out,
      logLevel: "error",
    });
    return out;
  })();
  built.set(prelude, entry);
  return entry;
}

/**
 * The single-file agent beside `stewardEntry()`'s bundle, where an installed package has it (what a
 * hub serves and uploads), built once from the current sources.
 */
export async function packagedAgent(): Promise<string> {
  const entry = await stewardEntry();
  const agent = join(dirname(dirname(entry)), "steward-agent.mjs");
  if (!existsSync(agent))
    execFileSync(process.execPath, [join(REPO, "scripts/build-agent.mjs"), "--out", agent], {
      cwd: REPO,
      stdio: "pipe",
    });
  return agent;
}

/** Starts `steward ...args` (built with `prelude`, see stewardEntry); stdout and stderr go to `log`. */
export async function startSteward(
  args: string[],
  options: { cwd: string; log: string; env?: NodeJS.ProcessEnv; prelude?: string },
): Promise<ChildProcess> {
  const entry = await stewardEntry(options.prelude);
  const out = openSync(options.log, "a");
  return spawn(process.execPath, [entry, ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", out, out],
  });
}

/** Runs `steward ...args` to completion. */
export async function runSteward(
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const entry = await stewardEntry();
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [entry, ...args], {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
  });
}

/** Polls `check` until it returns (or resolves with) a value (not undefined/false) or `timeoutMs` passes. */
export async function eventually<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 30_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
