/**
 * `steward up`: the whole product on one machine — SQLite in the state directory, the agent in
 * process (the local transport) applying under `--root` (each node in `<root>/<node>/`), and without
 * `--repo` the example fleet copied into a fresh Git repository under the state directory (its local
 * agents get the example's demo identities, see demo-identities.ts). It shows each node converging; `--once` ends, as soon as nothing else is moving or when `--timeout`
 * passes, with the answer `steward status` gives for what this hub reaches: right (exit 0),
 * converging (exit 3: a failure within budget, with the time of its next retry, or work still in
 * flight at the timeout) or not right (exit 1). Nodes on transports this hub does not run are
 * listed, not counted.
 */
import { cpSync, existsSync, mkdirSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, Option } from "commander";
import type { ConditionRecord } from "../hub/records.js";
import { DISPLAY_STATES, type DisplayState } from "../hub/states.js";
import type { InstanceView } from "../hub/views.js";
import { EnvironmentError } from "../model/errors.js";
import type { StatusFlags } from "../status/settings.js";
import type { Palette } from "./colour.js";
import { OPERATOR_TOKENS_HELP } from "./hub.js";
import type { CliIo, GlobalOptions } from "./io.js";
import { addOutputOptions, isMachine, type OutputOptions, outputFormat } from "./output.js";
import { addStatusFlags } from "./status-flags.js";

/** The example fleet shipped with steward. */
export const EXAMPLE_REPO = fileURLToPath(new URL("../../examples/repo/", import.meta.url));

/**
 * Makes `dir` a Git repository holding the example fleet (once): the embedded default of `steward
 * up`. An existing repository is left as it is — it may hold the user's own commits.
 */
export async function ensureExampleRepo(dir: string, source = EXAMPLE_REPO): Promise<"created" | "existing"> {
  if (existsSync(join(dir, ".git"))) return "existing";
  if (!existsSync(source))
    throw new EnvironmentError(
      `the example fleet is missing from this installation (${source}): pass --repo PATH`,
    );
  const git = (await import("isomorphic-git")).default;
  const fs = await import("node:fs");
  mkdirSync(dir, { recursive: true });
  cpSync(source, dir, { recursive: true });
  await git.init({ fs, dir, defaultBranch: "main" });
  const files = await git.statusMatrix({ fs, dir });
  for (const [path] of files) await git.add({ fs, dir, filepath: path });
  await git.commit({
    fs,
    dir,
    message: "The example fleet, from steward up\n",
    author: { name: "steward up", email: "steward@localhost" },
  });
  return "created";
}

/** Where `steward up --once` stands. */
export interface UpOutcome {
  /** Nothing is moving any more: the outcome is known. */
  done: boolean;
  /** Every instance this hub reaches converged. */
  converged: boolean;
  reachable: InstanceView[];
  unreachable: InstanceView[];
}

/** States that change by themselves (an attempt in flight, not started yet, a report awaited). */
const MOVING: ReadonlySet<DisplayState> = new Set(["converging", "verifying", "ambiguous"]);
/** States of an instance whose attempt failed: retried later at best, so not moving now. */
const FAILED: ReadonlySet<DisplayState> = new Set(["failing", "stuck", "blocked", "interrupted"]);

/** The outcome so far: done when nothing that this hub reaches is still moving. */
export function upOutcome(reaches: (node: string) => boolean, instances: InstanceView[]): UpOutcome {
  const reachable = instances.filter((i) => reaches(i.node));
  const unreachable = instances.filter((i) => !reaches(i.node));
  const converged = reachable.every((i) => i.converged);
  // A node held behind a canary or a batch moves on by itself unless what it waits for has failed:
  // behind a failed canary (or a batch whose slot is taken by a failed node) it waits on nothing
  // that will change. Behind a converged canary it is soaking, which ends by itself.
  // An instance waiting for its dependencies (on its own node) is dispatched by the hub's next
  // reconcile once they converge — also when the report that says so has only just come in — unless
  // one of its node's instances has failed.
  const failed = reachable.filter((i) => FAILED.has(i.state));
  const failedAssignments = new Set(failed.map((i) => i.assignment));
  const failedNodes = new Set(failed.map((i) => i.node));
  const moving = reachable.some(
    (i) =>
      !i.converged &&
      (MOVING.has(i.state) ||
        (i.state === "waiting" && !failedNodes.has(i.node)) ||
        (i.state === "held" &&
          (i.holdReason === "canary" || i.holdReason === "batch") &&
          !failedAssignments.has(i.assignment))),
  );
  return { done: converged || !moving, converged, reachable, unreachable };
}

/** How an instance stands in a progress line: `✓` when converged, else its display state's symbol and words. */
function progressMark(instance: InstanceView, colours?: Palette): string {
  const info = DISPLAY_STATES[instance.state];
  const text =
    instance.state === "converged"
      ? info.symbol
      : `${info.label}${instance.state === "held" && instance.holdReason ? ` (${instance.holdReason})` : ""}`;
  return colours ? colours.state(instance.state, text) : text;
}

/** One line per node: its instances and how each stands. */
export function progressLines(
  outcome: UpOutcome,
  unreachableTransports: Map<string, string>,
  colours?: Palette,
): string[] {
  const byNode = new Map<string, InstanceView[]>();
  for (const instance of outcome.reachable)
    byNode.set(instance.node, [...(byNode.get(instance.node) ?? []), instance]);
  const width = Math.max(4, ...[...byNode.keys(), ...unreachableTransports.keys()].map((n) => n.length));
  const lines: string[] = [];
  for (const [node, list] of [...byNode].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const done = list.filter((i) => i.converged).length;
    const parts = list.map((i) => `${i.assignment} ${progressMark(i, colours)}`);
    lines.push(`  ${node.padEnd(width)}  ${`${done}/${list.length}`.padEnd(5)}  ${parts.join("  ")}`);
  }
  const unreachableByNode = new Map<string, string[]>();
  for (const instance of outcome.unreachable)
    unreachableByNode.set(instance.node, [
      ...(unreachableByNode.get(instance.node) ?? []),
      instance.assignment,
    ]);
  for (const [node, assignments] of [...unreachableByNode].sort(([a], [b]) => (a < b ? -1 : 1)))
    lines.push(
      `  ${node.padEnd(width)}  -      not dispatched: transport ${unreachableTransports.get(node) ?? "?"} is not enabled in this hub (${assignments.join(", ")})`,
    );
  return lines;
}

/**
 * The open conditions that speak of what this hub reaches: a node it does not reach is listed by
 * `steward up` and left to `steward status`, and so are its conditions (its `TransportDegraded`).
 */
export function reachedConditions(
  conditions: readonly ConditionRecord[],
  reaches: (node: string) => boolean,
): ConditionRecord[] {
  return conditions.filter((c) => {
    if (c.type === "NodeSilent") return false;
    const node = c.node ?? (c.subjectKind === "node" ? c.subject : undefined);
    return node === undefined || reaches(node);
  });
}

interface UpOptions extends StatusFlags, OutputOptions {
  transport: "local" | "nats";
  open?: boolean;
  operatorTokens?: string;
  repo?: string;
  root?: string;
  once?: boolean;
  timeout: string;
  listen: string;
}

export function upCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  const command = new Command("up")
    .description(
      "run steward on this machine: the hub, the local agent and (without --repo) the example fleet, and show it converge",
    )
    .option("--repo <path|url>", "the fleet repository (default: the example fleet in <state>/repo)")
    .option("--root <dir>", "local nodes apply under <dir>/<node>/ (default: <state>/root)")
    .addOption(
      new Option(
        "--transport <name>",
        "how local nodes are reached: in process, or as agent processes on a local nats-server",
      )
        .choices(["local", "nats"])
        .default("local"),
    )
    .option(
      "--once",
      "exit when the outcome is known, with the answer of steward status: 0 right, 3 converging, 1 not right",
    )
    .option("--timeout <duration>", "with --once: give up after this long", "5m")
    .option(
      "--listen <host:port>",
      "HTTP address of the web view, healthz, metrics and revisions",
      "127.0.0.1:0",
    )
    .option("--open", "open the fleet's page in the desktop's browser (xdg-open)")
    .option("--operator-tokens <file>", OPERATOR_TOKENS_HELP);
  addStatusFlags(command);
  addOutputOptions(command);
  return command.action(async (options: UpOptions) => {
    const { statePaths, findRunningHub, HubAlreadyRunningError } = await import("./hub-state.js");
    const { HubRuntime, untilSignal, operatorsFlag } = await import("./hub.js");
    const { keepHeapNearLive } = await import("./heap.js");
    keepHeapNearLive();
    const { durationAtLeast, listenAddress } = await import("./hub-flags.js");
    const { instanceViews } = await import("../hub/views.js");
    const { fleetStatus } = await import("../hub/answer.js");
    const { answerExit, renderFleetStatus, statusDocument } = await import("./status.js");
    const { palette, redrawEnabled } = await import("./colour.js");
    const { serialise } = await import("./output.js");
    const pino = (await import("pino")).default;
    const format = outputFormat(options, globals());
    const colours = palette(io);
    // With -o json|yaml stdout carries the final document only; what people read goes to stderr.
    const say = isMachine(format) ? io.stderr : io.stdout;
    const paths = statePaths(io, globals());
    // Paths below the working directory are shown relative to it, as the user typed them.
    const display = (path: string) => {
      const rel = relative(io.cwd, path);
      return rel && !rel.startsWith("..") && !isAbsolute(rel) ? rel : path;
    };
    const timeoutMs = durationAtLeast("--timeout", options.timeout, 0);
    listenAddress("--listen", options.listen);
    const running = await findRunningHub(paths);
    if (running.kind === "running") throw new HubAlreadyRunningError(paths, running.hub);
    const operators = await operatorsFlag(options.operatorTokens, io.cwd);
    mkdirSync(paths.dir, { recursive: true });
    let repo = options.repo;
    if (!repo) {
      const made = await ensureExampleRepo(paths.repo);
      repo = paths.repo;
      if (made === "created")
        say(
          `steward up: the example fleet is in ${display(paths.repo)} (a Git repository: edit, commit, run again)\n`,
        );
    }
    const logFile = pino.destination({ dest: paths.log, sync: false });
    const runtime = new HubRuntime({
      paths,
      repo,
      branch: "main",
      root: resolve(io.cwd, options.root ?? paths.root),
      listen: options.listen,
      syncIntervalMs: 2_000,
      statusFlags: options,
      logger: pino({ level: io.env.STEWARD_LOG_LEVEL ?? "info" }, logFile),
      agentLog: (line) => logFile.write(`${line}\n`),
      env: io.env,
      cwd: io.cwd,
      // The agents run as this very program (whatever file it was started from).
      ...(options.transport === "nats"
        ? { localFleet: { steward: [process.execPath, process.argv[1] ?? ""] } }
        : {}),
      ...(operators ? { operators } : {}),
      beforeAgents: async (nodes) => {
        const { installDemoIdentities } = await import("./demo-identities.js");
        const demo = await installDemoIdentities(nodes, paths.dir);
        if (demo.installed.length > 0)
          say(
            `steward up: installed the example's DEMO identities (examples/identities: published, never to be used elsewhere) into the local agents of ${demo.installed.join(", ")}\n`,
          );
        for (const node of demo.differing)
          io.stderr(
            `steward up: warning: node ${node} declares a demo identity but its agent (${display(join(paths.dir, "agents", node))}) holds another: the secrets placed on ${node} will not decrypt there\n`,
          );
      },
    });
    const started = Date.now();
    try {
      const first = await runtime.start();
      if (first instanceof Error)
        throw new EnvironmentError(`cannot sync ${repo}: ${first.message}`, { cause: first });
      if (first.kind === "invalid") {
        const { renderSyncOutcome } = await import("./sync.js");
        io.stderr(await renderSyncOutcome(first));
      }
      const head = await runtime.store.desired.latestRevision();
      say(
        `steward up: ${display(repo)} at ${head?.sha.slice(0, 12) ?? "?"}${head ? ` "${head.message.split("\n")[0]}"` : ""}; hub ${runtime.http.url}; logs ${display(paths.log)}\n`,
      );
      const page = `${runtime.http.url}/`;
      say(
        `steward up: the fleet, live: ${page} (${options.once ? "until the outcome is known" : "while steward up runs"}${operators ? `; ${operators.size} operator${operators.size === 1 ? "" : "s"} may act` : ""})\n`,
      );
      if (options.open) {
        const { openInBrowser } = await import("./open.js");
        const problem = await openInBrowser(page, io.env);
        if (problem) io.stderr(`steward up: --open: ${problem}\n`);
      }
      // Nodes come and go with commits: their transports are read again at each look.
      let transports = new Map<string, string>();
      const reaches = (node: string) => runtime.transports.includes(transports.get(node) ?? "");
      const look = async () => {
        transports = new Map((await runtime.store.nodes.list()).map((n) => [n.name, n.transport]));
        return upOutcome(reaches, await instanceViews(runtime.store));
      };
      let shown: string[] = [];
      const show = (outcome: UpOutcome) => {
        const unreachable = new Map([...transports].filter(([node]) => !reaches(node)));
        const lines = progressLines(outcome, unreachable, colours);
        if (lines.join("\n") === shown.join("\n")) return;
        if (redrawEnabled(io) && !isMachine(format)) {
          // Redraw the block in place.
          if (shown.length > 0) say(`\x1b[${shown.length}A\x1b[J`);
          say(`${lines.join("\n")}\n`);
          shown = lines;
        } else {
          // Plain lines: a node's line when it changes.
          for (const line of lines) if (!shown.includes(line)) say(`${line}\n`);
          shown = lines;
        }
      };
      let stopping = false;
      if (!options.once)
        void untilSignal().then(() => {
          stopping = true;
        });
      let outcome = await look();
      while (!stopping) {
        await new Promise((wake) => setTimeout(wake, 200));
        outcome = await look();
        show(outcome);
        if (!options.once) continue;
        if (Date.now() - started > timeoutMs) break;
        if (!outcome.done) continue;
        // Convergence shows in observations first: let the hub record it (reconcile what the last
        // reports queued) before it stops, so its records say what was printed — and look again,
        // since that reconcile may have dispatched more (an instance whose dependencies converged).
        await Promise.race([runtime.hub.idle(), new Promise((wake) => setTimeout(wake, 2_000).unref())]);
        outcome = await look();
        if (outcome.done) break;
      }
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const status = fleetStatus(
        outcome.reachable,
        reachedConditions(await runtime.store.conditions.list({ status: "open" }), reaches),
      );
      const nodes = new Set(outcome.reachable.map((i) => i.node)).size;
      const unreached = new Set(outcome.unreachable.map((i) => i.node)).size;
      const notReached =
        unreached > 0
          ? `; ${unreached} node${unreached === 1 ? "" : "s"} not reached by this hub, see steward status`
          : "";
      const context =
        status.answer === "right"
          ? `${nodes} local node${nodes === 1 ? "" : "s"} in ${seconds}s${notReached}`
          : outcome.done
            ? `after ${seconds}s nothing else is moving${status.failing.length > 0 ? "; the next retry is made by the next steward up or steward hub" : ""}`
            : `timed out after ${options.timeout}`;
      if (isMachine(format))
        io.stdout(
          await serialise(
            {
              ...statusDocument(status, await runtime.store.intents.countsByStatus()),
              elapsedSeconds: Number(seconds),
            },
            format,
          ),
        );
      else
        io.stdout(renderFleetStatus(status, { now: new Date(), wide: format === "wide", colours, context }));
      exit(answerExit(status.answer));
    } finally {
      await runtime.stop();
    }
  });
}
