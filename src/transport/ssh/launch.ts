/**
 * Running the agent on a host, one shot. A short POSIX sh launcher checks what the agent needs (a
 * steward command, or Node.js >= 20 and the uploaded agent), says `steward-ssh: started` on standard
 * error, and only then `exec`s the agent. So the transport knows exactly when the attempt was handed
 * over: a failure before that line means nothing ran; the session dropping after it is ambiguous.
 *
 * The agent's state is under the SSH user's home, named explicitly (`--state`): `$XDG_STATE_HOME/steward`
 * when that is set, else `~/.local/state/steward`. The launcher still starts in `$HOME`, where agents
 * before this one kept their state (`.steward/agent`): an agent that finds it there moves it.
 *
 * `interpretRun` is pure: it turns what the command did into what the transport does next.
 */
import { DispatchError } from "../../hub/transport.js";
import type { AgentReply, Report } from "../../model/generated.js";
import { AGENT_SCHEMA_ID, schemaFindings, validatorFor } from "../../model/schema.js";
import { AGENT_FILE_NAME } from "./artifact.js";
import type { ExecOutcome } from "./connection.js";

/** What the launcher prints on standard error just before it hands over to the agent. */
export const STARTED_LINE = "steward-ssh: started";

/** Exit statuses the launcher uses when it stops before the agent starts. */
export const LAUNCHER_EXIT = { noNode: 190, oldNode: 191, noAgent: 192, noSteward: 193 } as const;

/** The oldest Node.js major version the single-file agent runs on. */
export const MIN_NODE_MAJOR = 20;

/** How the agent is started on a host. */
export type AgentLaunch =
  /** `spec.ssh.steward`: a command the operator installed. */
  | { kind: "installed"; command: string }
  /** The uploaded single-file agent, `$HOME/.steward/bin/<id>/steward-agent.mjs`, run with `node`. */
  | { kind: "uploaded"; id: string };

/** Quotes a string for POSIX sh. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The remote path (under `$HOME`) of the uploaded agent with this id. */
export function uploadedAgentPath(id: string): string {
  return `.steward/bin/${id}/${AGENT_FILE_NAME}`;
}

/** The shell lines that set `$state`, the agent's state directory on the host (see the module comment). */
export const STATE_LINES = [
  'case "$XDG_STATE_HOME" in /*) state="$XDG_STATE_HOME/steward" ;; *) state="$HOME/.local/state/steward" ;; esac',
];

/**
 * The launcher for `steward <args>`. It runs from `$HOME` (where an older agent's state is found and
 * moved), passes the state directory explicitly, and never reads standard input itself, so the
 * bundle reaches the agent untouched.
 */
export function launcherScript(launch: AgentLaunch, args: readonly string[]): string {
  // An operator's steward command that names its own --state keeps it.
  const ownState = launch.kind === "installed" && /(^|\s)--state(\s|=)/.test(launch.command);
  const argv = [...(ownState ? [] : ['--state "$state"']), ...args.map(shellQuote)].join(" ");
  const lines = ['cd "$HOME" 2>/dev/null || :', ...STATE_LINES];
  if (launch.kind === "installed") {
    const program = launch.command.trim().split(/\s+/)[0] ?? "";
    lines.push(
      `if ! command -v ${shellQuote(program)} >/dev/null 2>&1; then echo "steward-ssh: no-steward ${program.replace(/["$`\\]/g, "")} not found on PATH=$PATH" >&2; exit ${LAUNCHER_EXIT.noSteward}; fi`,
      `echo "${STARTED_LINE}" >&2`,
      `exec ${launch.command} ${argv}`,
    );
  } else {
    // The usual case first and without spawning anything: the agent is there and node is on PATH.
    // The agent checks node's version itself as its first statement (build-agent.mjs's banner).
    const start = [`echo "${STARTED_LINE}" >&2`, `exec node "$agent" ${argv}`];
    lines.push(
      `agent="$HOME/${uploadedAgentPath(launch.id)}"`,
      `if [ -f "$agent" ] && command -v node >/dev/null 2>&1; then ${start.join("; ")}; fi`,
      `if ! command -v node >/dev/null 2>&1; then echo "steward-ssh: no-node node not found on PATH=$PATH" >&2; exit ${LAUNCHER_EXIT.noNode}; fi`,
      `v=$(node --version 2>/dev/null)`,
      `case "$v" in v[2-9][0-9].*|v[1-9][0-9][0-9]*) ;; *) echo "steward-ssh: old-node node $v found at $(command -v node)" >&2; exit ${LAUNCHER_EXIT.oldNode};; esac`,
      `echo "steward-ssh: no-agent $agent" >&2`,
      `exit ${LAUNCHER_EXIT.noAgent}`,
    );
  }
  return `${lines.join("\n")}\n`;
}

/** What the agent answers: `apply` replies with result and report, `observe` with a report, `identity` with the host's public identity. */
export type Expectation = "reply" | "report" | "identity";

/** A host's public identity as `steward agent identity --json` prints it. */
export interface HostIdentityAnswer {
  nkey: string;
  age: string;
}

/** What a run means for the transport. */
export type RunVerdict =
  | { kind: "reply"; reply: AgentReply }
  | { kind: "report"; report: Report }
  | { kind: "identity"; identity: HostIdentityAnswer }
  /** The uploaded agent is not on the host yet (nothing ran): upload it to `path` and run again. */
  | { kind: "agentMissing"; path: string }
  /** Nothing ran; `error` says whether to retry. */
  | { kind: "refused"; error: DispatchError }
  /**
   * The agent refused the request itself (exit 2 with its one-line error: a bundle it cannot apply,
   * the wrong node, an option it does not know): it applied nothing, and asking again will not help.
   */
  | { kind: "rejected"; message: string }
  /** The agent started and no answer came back: the attempt is ambiguous. */
  | { kind: "lost"; reason: string; message: string };

/** Facts about the run besides the command's own outcome. */
export interface RunContext {
  node: string;
  /** `user@host:port`, for messages. */
  label: string;
  /** The launcher's started line was seen. */
  started: boolean;
  /** The transport gave up waiting (per-host timeout) and closed the session. */
  timedOut: boolean;
  timeoutMs: number;
}

function launcherMessage(stderr: string, tag: string): string {
  const line = stderr.split("\n").find((text) => text.startsWith(`steward-ssh: ${tag} `));
  return line ? line.slice(`steward-ssh: ${tag} `.length) : "";
}

function tail(stderr: string): string {
  const text = stderr
    .split("\n")
    .filter((line) => line.trim() && line !== STARTED_LINE)
    .slice(-3)
    .join(" | ");
  return text.length > 400 ? `…${text.slice(-400)}` : text;
}

/** Parses and validates the agent's standard output; a string is the reason it is not an answer. */
export function parseAnswer(
  stdout: string,
  expect: Expectation,
): { reply: AgentReply } | { report: Report } | { identity: HostIdentityAnswer } | { problem: string } {
  let value: unknown;
  const text = stdout.trim();
  if (!text) return { problem: "printed nothing on standard output" };
  try {
    value = JSON.parse(text);
  } catch {
    // Tolerate lines before the answer (a chatty login script): the answer is the last line.
    const last = text.split("\n").pop() ?? "";
    try {
      value = JSON.parse(last);
    } catch {
      return { problem: `printed something that is not JSON (${JSON.stringify(text.slice(0, 80))})` };
    }
  }
  if (expect === "identity") {
    const identity = value as Partial<HostIdentityAnswer> | null;
    return typeof identity?.nkey === "string" &&
      /^U[A-Z2-7]{55}$/.test(identity.nkey) &&
      typeof identity.age === "string" &&
      /^age1[02-9ac-hj-np-z]{58}$/.test(identity.age)
      ? { identity: { nkey: identity.nkey, age: identity.age } }
      : { problem: "printed something that is not a host identity ({nkey, age})" };
  }
  if (expect === "report" && value && typeof value === "object" && "report" in value && !("kind" in value))
    value = (value as { report: unknown }).report;
  const definition = expect === "reply" ? "AgentReply" : "Report";
  const findings = schemaFindings(validatorFor(AGENT_SCHEMA_ID, definition), value);
  if (findings.length > 0)
    return {
      problem: `printed an answer that does not match the ${definition} schema: ${findings[0]?.message ?? ""}`,
    };
  return expect === "reply" ? { reply: value as AgentReply } : { report: value as Report };
}

/** Decides what a finished (or dropped) run means. */
export function interpretRun(outcome: ExecOutcome, expect: Expectation, context: RunContext): RunVerdict {
  const subject = `node "${context.node}" (${context.label})`;
  const answer = parseAnswer(outcome.stdout.toString("utf8"), expect);
  // A complete, valid answer settles the attempt whatever the exit status: its result says the class.
  if ("reply" in answer) return { kind: "reply", reply: answer.reply };
  if ("report" in answer) return { kind: "report", report: answer.report };
  if ("identity" in answer) return { kind: "identity", identity: answer.identity };
  // The agent's own first statement refuses an old node with the launcher's status: nothing ran.
  const oldNode = outcome.code === LAUNCHER_EXIT.oldNode && outcome.stderr.includes("steward-ssh: old-node ");
  if (!context.started || oldNode) {
    if (outcome.code === LAUNCHER_EXIT.noAgent)
      return { kind: "agentMissing", path: launcherMessage(outcome.stderr, "no-agent") };
    if (outcome.code === LAUNCHER_EXIT.noNode || outcome.code === LAUNCHER_EXIT.oldNode) {
      const found = launcherMessage(
        outcome.stderr,
        outcome.code === LAUNCHER_EXIT.noNode ? "no-node" : "old-node",
      );
      return refused(
        `${subject} has no usable Node.js (${found}; the single-file agent needs Node.js >= ${MIN_NODE_MAJOR}) — install Node.js ${MIN_NODE_MAJOR} or newer on the host, or set spec.ssh.steward to a steward command that runs there`,
        "permanent",
        "NoNodeRuntime",
      );
    }
    if (outcome.code === LAUNCHER_EXIT.noSteward)
      return refused(
        `${subject}: spec.ssh.steward names a command the host does not have (${launcherMessage(outcome.stderr, "no-steward")}) — install steward there, fix spec.ssh.steward, or remove it to use the uploaded agent`,
        "permanent",
        "StewardNotFound",
      );
    if (outcome.dropped)
      // The launcher may have reached `exec` with its started line still in flight: not provably unstarted.
      return refused(
        context.timedOut
          ? `${subject} did not finish within ${context.timeoutMs} ms and was cut off before the agent reported starting; a fresh report will settle it`
          : `${subject}: the session dropped before the agent reported starting; a fresh report will settle it`,
        "ambiguous",
        context.timedOut ? "Timeout" : "SessionDropped",
      );
    return refused(
      `${subject}: the launcher failed before starting the agent (exit ${outcome.code ?? outcome.signal}: ${tail(outcome.stderr) || "no message"}) — check the login shell and environment of the SSH user`,
      "permanent",
      "LauncherFailed",
    );
  }
  if (context.timedOut)
    return {
      kind: "lost",
      reason: "Timeout",
      message: `${subject}: the agent did not answer within ${context.timeoutMs} ms; the session was closed and the outcome is unknown`,
    };
  if (outcome.dropped)
    return {
      kind: "lost",
      reason: "SessionDropped",
      message: `${subject}: the session dropped while the agent ran; the outcome is unknown`,
    };
  // The CLI's contract: exit 2 with `steward: <message>` means refused before doing anything. An
  // internal error also exits 2, but may have come half-way: that one stays ambiguous.
  const refusal = outcome.stderr.split("\n").find((line) => line.startsWith("steward: "));
  if (outcome.code === 2 && !outcome.dropped && refusal && !refusal.startsWith("steward: internal error"))
    return {
      kind: "rejected",
      message: `${subject}: the agent refused: ${refusal.slice("steward: ".length)}`,
    };
  const stderr = tail(outcome.stderr) ? `; stderr: ${tail(outcome.stderr)}` : "";
  if (outcome.signal)
    return {
      kind: "lost",
      reason: "AgentKilled",
      message: `${subject}: the agent was killed (${outcome.signal}) before answering; the outcome is unknown${stderr}`,
    };
  return {
    kind: "lost",
    reason: "NoAnswer",
    message: `${subject}: the agent ended (exit ${outcome.code}) without a valid answer: it ${answer.problem}${outcome.truncated ? " (output cut at the size limit)" : ""}${stderr}`,
  };
}

function refused(message: string, failureClass: DispatchError["failureClass"], reason: string): RunVerdict {
  return { kind: "refused", error: new DispatchError(message, failureClass, reason) };
}
