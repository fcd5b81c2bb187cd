/**
 * The `ssh` transport: for hosts that run no daemon. For each attempt the hub connects (pinned host
 * keys, key authentication, through a jump host when the Node says so), runs the agent one shot with
 * the bundle on standard input, and reads the AgentReply (result and full report) from standard output.
 * A host without steward gets the single-file agent uploaded first.
 *
 * Failure classes, as the hub acts on them:
 * - before the agent started: `dispatch` rejects with a DispatchError — `transient` for refused,
 *   timed-out, unreachable or reset connections; `permanent` for an unknown, changed or revoked host
 *   key, refused credentials, no usable Node.js, a missing steward command (none heal by retrying);
 * - after it started: `dispatch` has resolved; a dropped session, a timeout or an agent that died
 *   without answering is `events.lost` (ambiguous: the hub asks for a report before trying again);
 * - an answer is delivered whatever the exit status: its result says the class.
 *
 * Each failure to reach a node is also a `TransportHealth` degraded event (once per reason), and the
 * next answer from it a recovered one.
 */
import type { DispatchError as DispatchErrorType, Transport, TransportEvents } from "../../hub/transport.js";
import { DispatchError } from "../../hub/transport.js";
import type { Bundle, Node, Report } from "../../model/generated.js";
import { refusedResult } from "../refused.js";
import { type AgentArtifact, AgentArtifactError, loadAgentArtifact } from "./artifact.js";
import {
  connect,
  type HostKeyPolicy,
  type SshConnection,
  type SshCredentials,
  type SshEndpoint,
  stillTrusted,
} from "./connection.js";
import { installAgent } from "./install.js";
import {
  type AgentLaunch,
  type Expectation,
  interpretRun,
  launcherScript,
  type RunVerdict,
  STARTED_LINE,
} from "./launch.js";
import { HostPool, type PoolLoad } from "./pool.js";

/** One host finished a job: what fan-out progress reports. */
export interface SshProgress {
  node: string;
  kind: "apply" | "observe";
  /** The attempt, for `apply`. */
  attemptId?: string;
  /** `answered`: the agent replied. `lost`: it started and the outcome is unknown. `refused`: nothing ran. */
  outcome: "answered" | "lost" | "refused";
  /** The DispatchError's or the loss's reason, when not answered. */
  reason?: string;
  durationMs: number;
  /** Jobs still waiting and running across all hosts after this one. */
  load: PoolLoad;
}

/** A pino-shaped logger; steward never logs bundles (they may carry secrets). */
export interface SshLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

/** Resolved settings of an SshTransport (see `createSshTransport` for the options and defaults). */
export interface SshTransportSettings {
  credentials: SshCredentials;
  hostKeys: HostKeyPolicy;
  concurrency: number;
  connectTimeoutMs: number;
  /** Per-host limit for one job: connect, upload and the agent's run together. */
  hostTimeoutMs: number;
  /** How long `stop` waits for running jobs before cutting them off. */
  stopGraceMs: number;
  /** How long a node's connection is kept open after a job for the next one; 0 closes at once. */
  idleMs: number;
  /** The single-file agent to upload. */
  agentFile: string;
  onProgress?: (progress: SshProgress) => void;
  logger?: SshLogger;
  now: () => Date;
}

/** `steward agent apply|observe` for this node: the agent refuses bundles for another node and reports under this name. */
function agentArgs(command: "apply" | "observe", node: string): string[] {
  return command === "apply"
    ? ["agent", "apply", "--node", node, "--bundle", "-", "--json"]
    : ["agent", "observe", "--node", node, "--json"];
}

/** Where to connect for a Node: its `spec.ssh`, with defaults (port 22, user root, jump user = user). */
export function endpointsOf(node: Node): { target: SshEndpoint; jump?: SshEndpoint } {
  const name = node.metadata.name;
  const ssh = node.spec.ssh;
  if (!ssh)
    throw new DispatchError(
      `node "${name}" uses transport ssh but has no spec.ssh — add spec.ssh.host and spec.ssh.hostKey to its Node document`,
      "permanent",
      "NoSshTarget",
    );
  const user = ssh.user ?? "root";
  const target: SshEndpoint = { host: ssh.host, port: ssh.port ?? 22, user };
  if (ssh.hostKey) target.hostKey = ssh.hostKey;
  if (!ssh.jump) return { target };
  const jump: SshEndpoint = { host: ssh.jump.host, port: ssh.jump.port ?? 22, user: ssh.jump.user ?? user };
  if (ssh.jump.hostKey) jump.hostKey = ssh.jump.hostKey;
  return { target, jump };
}

type Answer = Extract<RunVerdict, { kind: "reply" | "report" | "identity" | "rejected" | "lost" }>;

/** The SSH adapter of the hub's Transport port. */
export class SshTransport implements Transport {
  readonly name = "ssh" as const;
  private events: TransportEvents | undefined;
  private readonly pool: HostPool;
  private readonly observed = new Map<string, Date>();
  private readonly degraded = new Map<string, string>();
  private readonly kept = new Map<
    string,
    { connection: SshConnection; identity: string; timer: NodeJS.Timeout }
  >();
  private artifact: AgentArtifact | undefined;
  /** Nodes whose host identity was collected (or tried) since the transport started. */
  private readonly identified = new Set<string>();
  private stopping = false;

  constructor(private readonly settings: SshTransportSettings) {
    this.pool = new HostPool(settings.concurrency);
  }

  async start(events: TransportEvents): Promise<void> {
    this.events = events;
    this.stopping = false;
  }

  /**
   * Runs `steward agent apply` for the bundle on the node. Resolves once the agent has started (the
   * attempt is handed over); the reply follows through `events.result` and `events.report`, a loss
   * through `events.lost`. Rejects with a DispatchError when nothing ran.
   */
  dispatch(bundle: Bundle, node: Node): Promise<void> {
    const events = this.started();
    const name = node.metadata.name;
    return new Promise<void>((accept, refuse) => {
      let accepted = false;
      const onStarted = () => {
        accepted = true;
        accept();
      };
      this.onHost(node, "apply", bundle.attemptId, async (signal) => {
        let answer: Answer;
        try {
          answer = await this.runAgent(
            node,
            agentArgs("apply", name),
            JSON.stringify(bundle),
            "reply",
            signal,
            onStarted,
          );
        } catch (error) {
          const failure = await this.refused(node, error);
          refuse(failure);
          return { outcome: "refused", reason: failure.reason };
        }
        // An answer or a loss means the agent ran, whether or not its started line got through.
        if (!accepted) onStarted();
        if (answer.kind === "lost") {
          this.settings.logger?.warn(
            { node: name, attemptId: bundle.attemptId, reason: answer.reason },
            answer.message,
          );
          await events.lost(bundle.attemptId, name, answer.message);
          return { outcome: "lost", reason: answer.reason };
        }
        if (answer.kind === "rejected") {
          this.settings.logger?.warn({ node: name, attemptId: bundle.attemptId }, answer.message);
          await events.result(
            refusedResult(
              bundle,
              name,
              { reason: "BundleRefused", message: answer.message },
              this.settings.now(),
            ),
          );
          return { outcome: "answered", reason: "BundleRefused" };
        }
        if (answer.kind === "reply") {
          await events.result(answer.reply.result);
          await this.delivered(node, answer.reply.report);
        }
        return { outcome: "answered" };
      }).catch((error: unknown) => {
        // Only a failing event handler gets here; the attempt itself was settled above.
        this.settings.logger?.warn(
          { node: name, attemptId: bundle.attemptId, error: String(error) },
          "event handler failed",
        );
        if (!accepted) refuse(error);
      });
    });
  }

  /**
   * Runs `steward agent observe` on the node and delivers the report (a heartbeat too). Resolves
   * after `events.report` has been handled; rejects with a DispatchError when no report came.
   */
  async requestReport(node: Node): Promise<void> {
    this.started();
    let failure: DispatchErrorType | undefined;
    await this.onHost(node, "observe", undefined, async (signal) => {
      let answer: Answer;
      try {
        answer = await this.runAgent(
          node,
          agentArgs("observe", node.metadata.name),
          undefined,
          "report",
          signal,
          () => {},
        );
      } catch (error) {
        failure = await this.refused(node, error);
        return { outcome: "refused", reason: failure.reason };
      }
      if (answer.kind === "lost") {
        // Observing changes nothing, so a lost observation is simply no report: retry later.
        failure = new DispatchError(answer.message, "transient", answer.reason);
        return { outcome: "lost", reason: answer.reason };
      }
      if (answer.kind === "rejected") {
        failure = await this.refused(node, new DispatchError(answer.message, "permanent", "AgentRejected"));
        return { outcome: "refused", reason: failure.reason };
      }
      if (answer.kind === "report") await this.delivered(node, answer.report);
      return { outcome: "answered" };
    });
    if (failure) throw failure;
  }

  /** When the node last answered with a report (over this transport, since it started), if ever. */
  lastObserved(node: string): Date | undefined {
    return this.observed.get(node);
  }

  /** Every node's last report time: the hub raises staleness from these. */
  lastObservedTimes(): ReadonlyMap<string, Date> {
    return this.observed;
  }

  /** Stops taking work, lets running jobs finish within the grace period, then cuts them off. */
  async stop(): Promise<void> {
    this.stopping = true;
    const cutOff = setTimeout(() => this.pool.abortAll("transport stopping"), this.settings.stopGraceMs);
    await this.pool.idle();
    clearTimeout(cutOff);
    this.closeKept();
  }

  private started(): TransportEvents {
    if (!this.events) throw new Error("SshTransport: start(events) must be called before dispatching");
    return this.events;
  }

  /** Runs a job on the node's slot and reports progress when it finishes. */
  private async onHost(
    node: Node,
    kind: SshProgress["kind"],
    attemptId: string | undefined,
    job: (signal: AbortSignal) => Promise<{ outcome: SshProgress["outcome"]; reason?: string }>,
  ): Promise<void> {
    const name = node.metadata.name;
    await this.pool.run(name, this.settings.hostTimeoutMs, async (signal) => {
      const began = Date.now();
      const done = await job(signal);
      if (done.outcome === "answered") await this.collectIdentity(node, signal);
      this.settings.onProgress?.({
        node: name,
        kind,
        ...(attemptId ? { attemptId } : {}),
        ...done,
        durationMs: Date.now() - began,
        load: this.pool.load,
      });
    });
  }

  /**
   * On first contact (the first answer since the transport started), asks the host for its public
   * identity (`steward agent identity`, which makes it there once) and hands it to the hub, which
   * compares it with the Node document. Tried once per node and run: a host that cannot say (an
   * older steward) is logged, and its jobs go on.
   */
  private async collectIdentity(node: Node, signal: AbortSignal): Promise<void> {
    const name = node.metadata.name;
    const events = this.events;
    if (!events?.identity || this.identified.has(name) || signal.aborted) return;
    this.identified.add(name);
    try {
      const answer = await this.runAgent(
        node,
        ["agent", "identity", "--json"],
        undefined,
        "identity",
        signal,
        () => {},
      );
      if (answer.kind === "identity") await events.identity(name, answer.identity);
      else
        this.settings.logger?.warn(
          { node: name, answer: answer.kind },
          `node "${name}": could not collect the host's identity (${answer.kind === "rejected" || answer.kind === "lost" ? answer.message : answer.kind})`,
        );
    } catch (error) {
      this.settings.logger?.warn(
        { node: name, error: error instanceof Error ? error.message : String(error) },
        `node "${name}": could not collect the host's identity`,
      );
    }
  }

  private launchFor(node: Node): AgentLaunch {
    const command = node.spec.ssh?.steward;
    if (command) return { kind: "installed", command };
    if (!this.artifact) {
      try {
        this.artifact = loadAgentArtifact(this.settings.agentFile);
      } catch (error) {
        if (!(error instanceof AgentArtifactError)) throw error;
        throw new DispatchError(
          `node "${node.metadata.name}": ${error.message}`,
          "permanent",
          "AgentNotBuilt",
          {
            cause: error,
          },
        );
      }
    }
    return { kind: "uploaded", id: this.artifact.id };
  }

  /** Connects, runs the launcher (uploading the agent once if the host has none) and interprets the run. */
  private async runAgent(
    node: Node,
    args: readonly string[],
    stdin: string | undefined,
    expect: Expectation,
    signal: AbortSignal,
    onStarted: () => void,
  ): Promise<Answer> {
    const name = node.metadata.name;
    if (this.stopping)
      throw new DispatchError(
        `node "${name}": the SSH transport is stopping`,
        "transient",
        "TransportStopped",
      );
    const { credentials } = this.settings;
    if (!credentials.privateKey && !credentials.agentSocket)
      throw new DispatchError(
        `node "${name}": the hub has no SSH credentials — start it with --ssh-key FILE, or with ssh-agent running (SSH_AUTH_SOCK)`,
        "permanent",
        "NoCredentials",
      );
    const { target, jump } = endpointsOf(node);
    const identity = JSON.stringify([target, jump ?? null]);
    let { connection, reused } = await this.connectionFor(
      name,
      identity,
      (kept) => stillTrusted(kept, target, jump, { hostKeys: this.settings.hostKeys, node: name }),
      () =>
        connect(target, jump, {
          credentials,
          hostKeys: this.settings.hostKeys,
          timeoutMs: this.settings.connectTimeoutMs,
          node: name,
          signal,
        }),
    );
    const cutOff = () => connection.close();
    if (signal.aborted) cutOff();
    signal.addEventListener("abort", cutOff);
    try {
      // After connecting, so a host-key or credential problem is what the operator hears first.
      const launch = this.launchFor(node);
      for (let round = 0; ; round++) {
        let started = false;
        let seen = "";
        const script = launcherScript(launch, args);
        const run = () =>
          connection.exec(script, {
            ...(stdin !== undefined ? { stdin } : {}),
            onStderr: (text) => {
              if (started) return;
              seen = (seen + text).slice(-4096);
              if (seen.includes(STARTED_LINE)) {
                started = true;
                onStarted();
              }
            },
          });
        const outcome = await run()
          .catch(async (error: unknown) => {
            // A kept connection may have died while idle; no channel opened, so nothing ran: reconnect once.
            if (!reused || signal.aborted) throw error;
            connection.close();
            reused = false;
            connection = await connect(target, jump, {
              credentials,
              hostKeys: this.settings.hostKeys,
              timeoutMs: this.settings.connectTimeoutMs,
              node: name,
              signal,
            });
            return run();
          })
          .catch((error: unknown) => {
            if (error instanceof DispatchError) throw error;
            throw new DispatchError(
              `node "${name}" (${connection.label}): could not open a session (${error instanceof Error ? error.message : String(error)}) — retrying`,
              "transient",
              "SessionFailed",
              { cause: error },
            );
          });
        const verdict = interpretRun(outcome, expect, {
          node: name,
          label: connection.label,
          started,
          timedOut: signal.aborted,
          timeoutMs: this.settings.hostTimeoutMs,
        });
        if (verdict.kind === "refused") throw verdict.error;
        if (verdict.kind !== "agentMissing") return verdict;
        if (launch.kind !== "uploaded" || !this.artifact || round > 0)
          throw new DispatchError(
            `node "${name}" (${connection.label}): the agent is still missing at ${verdict.path} after uploading it`,
            "permanent",
            "AgentInstallFailed",
          );
        this.settings.logger?.info(
          { node: name, path: verdict.path, sha256: this.artifact.sha256 },
          "uploading the agent",
        );
        await installAgent(connection, this.artifact, verdict.path, name);
      }
    } finally {
      signal.removeEventListener("abort", cutOff);
      if (signal.aborted) connection.close();
      else this.park(name, identity, connection);
    }
  }

  /**
   * The node's kept connection when it still leads to the same place and the keys it was trusted
   * with are still the ones held now (a pin changed in Git, a key removed from known_hosts: a new
   * connection, checked anew), else a new one. Keeping a connection for `idleMs` after a job (like
   * OpenSSH's ControlPersist) spares the next dispatch or observation the handshake: most of a
   * fan-out's cost on fast hosts.
   */
  private async connectionFor(
    name: string,
    identity: string,
    trusted: (kept: SshConnection) => boolean,
    open: () => Promise<SshConnection>,
  ): Promise<{ connection: SshConnection; reused: boolean }> {
    const kept = this.kept.get(name);
    if (kept) {
      this.kept.delete(name);
      clearTimeout(kept.timer);
      if (kept.identity === identity && !kept.connection.closed && trusted(kept.connection))
        return { connection: kept.connection, reused: true };
      kept.connection.close();
    }
    return { connection: await open(), reused: false };
  }

  private park(name: string, identity: string, connection: SshConnection): void {
    if (this.stopping || connection.closed || this.settings.idleMs <= 0) {
      connection.close();
      return;
    }
    const timer = setTimeout(() => {
      if (this.kept.get(name)?.connection === connection) this.kept.delete(name);
      connection.close();
    }, this.settings.idleMs);
    timer.unref();
    this.kept.set(name, { connection, identity, timer });
  }

  private closeKept(): void {
    for (const kept of this.kept.values()) {
      clearTimeout(kept.timer);
      kept.connection.close();
    }
    this.kept.clear();
  }

  /** Delivers a report, counts it as a heartbeat, and clears a degraded state. */
  private async delivered(node: Node, report: Report): Promise<void> {
    const events = this.started();
    const name = node.metadata.name;
    await events.report(report);
    const at = this.settings.now();
    this.observed.set(name, at);
    await events.heartbeat(name, at);
    const was = this.degraded.get(name);
    if (was) {
      this.degraded.delete(name);
      await events.health({
        status: "recovered",
        node: name,
        reason: was,
        message: `node "${name}" answers over SSH again`,
      });
    }
  }

  /** Turns any failure before the agent started into a DispatchError and raises degraded health once per reason. */
  private async refused(node: Node, error: unknown): Promise<DispatchErrorType> {
    const name = node.metadata.name;
    const failure =
      error instanceof DispatchError
        ? error
        : new DispatchError(
            `node "${name}": ${error instanceof Error ? error.message : String(error)}`,
            "transient",
            "SshFailed",
            { cause: error },
          );
    const was = this.degraded.get(name);
    if (failure.reason !== "TransportStopped" && was !== failure.reason) {
      this.degraded.set(name, failure.reason);
      // The hub keeps one condition per reason: the earlier failure no longer happens, this one does.
      if (was)
        await this.started().health({
          status: "recovered",
          node: name,
          reason: was,
          message: `node "${name}" now fails otherwise: ${failure.reason}`,
        });
      await this.started().health({
        status: "degraded",
        node: name,
        reason: failure.reason,
        message: failure.message,
      });
    }
    this.settings.logger?.warn(
      { node: name, reason: failure.reason, failureClass: failure.failureClass },
      failure.message,
    );
    return failure;
  }
}
