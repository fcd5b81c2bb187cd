/**
 * Shared pieces of the SSH transport tests: Node documents for loopback sshd servers, and a recorder
 * of the events a transport delivers that a test can wait on.
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ulid } from "ulid";
import { afterAll, beforeAll } from "vitest";
import { DispatchError, type TransportEvents, type TransportHealth } from "../../../src/hub/transport.js";
import { contentHash } from "../../../src/model/canonical.js";
import type {
  AttemptResult,
  Bundle,
  InstanceSpec,
  Node,
  Report,
  Resource,
  SshTarget,
} from "../../../src/model/generated.js";
import {
  createSshTransport,
  type SshTransport,
  type SshTransportOptions,
} from "../../../src/transport/ssh/index.js";
import { tempDir } from "../../helpers/git.js";
import { type Sshd, type SshdFleet, startSshdFleet } from "../../helpers/sshd.js";
import { packagedAgent, startSteward } from "../../hub/helpers/process.js";

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");

/** A Node document reaching `server` over SSH; its root holds the node's managed files. */
export function sshNode(
  name: string,
  server: Sshd,
  options: { pin?: boolean; hostKey?: string; steward?: string; jump?: SshTarget["jump"] } = {},
): Node {
  const ssh: SshTarget = { host: server.host, port: server.port, user: server.user };
  if (options.hostKey) ssh.hostKey = options.hostKey;
  else if (options.pin !== false) ssh.hostKey = server.hostKey.publicKey;
  if (options.steward) ssh.steward = options.steward;
  if (options.jump) ssh.jump = options.jump;
  return {
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: { name },
    spec: {
      transport: "ssh",
      ssh,
      roots: [`${server.root}/managed`],
      vars: { root: `${server.root}/managed` },
    },
  };
}

export type RecordedEvent =
  | { type: "report"; report: Report }
  | { type: "result"; result: AttemptResult }
  | { type: "heartbeat"; node: string; at: Date }
  | { type: "lost"; attemptId: string; node: string; reason: string }
  | { type: "health"; health: TransportHealth };

/** TransportEvents that remember everything, in order, and let a test wait for an event. */
export class EventLog implements TransportEvents {
  readonly events: RecordedEvent[] = [];
  private waiters: { match: (event: RecordedEvent) => boolean; resolve: (event: RecordedEvent) => void }[] =
    [];

  report(report: Report): void {
    this.push({ type: "report", report });
  }
  result(result: AttemptResult): void {
    this.push({ type: "result", result });
  }
  heartbeat(node: string, at: Date): void {
    this.push({ type: "heartbeat", node, at });
  }
  lost(attemptId: string, node: string, reason: string): void {
    this.push({ type: "lost", attemptId, node, reason });
  }
  health(health: TransportHealth): void {
    this.push({ type: "health", health });
  }

  of<T extends RecordedEvent["type"]>(type: T): Extract<RecordedEvent, { type: T }>[] {
    return this.events.filter((event): event is Extract<RecordedEvent, { type: T }> => event.type === type);
  }

  /** Resolves with the first event (already seen or still to come) that matches. */
  waitFor<T extends RecordedEvent["type"]>(
    type: T,
    match: (event: Extract<RecordedEvent, { type: T }>) => boolean = () => true,
    timeoutMs = 20_000,
  ): Promise<Extract<RecordedEvent, { type: T }>> {
    const test = (event: RecordedEvent) =>
      event.type === type && match(event as Extract<RecordedEvent, { type: T }>);
    const seen = this.events.find(test);
    if (seen) return Promise.resolve(seen as Extract<RecordedEvent, { type: T }>);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${type} event within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({
        match: test,
        resolve: (event) => {
          clearTimeout(timer);
          resolve(event as Extract<RecordedEvent, { type: T }>);
        },
      });
    });
  }

  private push(event: RecordedEvent): void {
    this.events.push(event);
    const ready = this.waiters.filter((waiter) => waiter.match(event));
    this.waiters = this.waiters.filter((waiter) => !waiter.match(event));
    for (const waiter of ready) waiter.resolve(event);
  }
}

let builtAgent: string | undefined;

/**
 * The single-file agent, built once per test process by scripts/build-agent.mjs into a temp dir (so
 * tests never depend on a stale dist/). Returns the file's path; its `.sha256` lies beside it.
 */
export function testAgentFile(): string {
  if (builtAgent) return builtAgent;
  const out = join(mkdtempSync(join(tmpdir(), "steward-agent-build-")), "steward-agent.mjs");
  execFileSync(process.execPath, [join(REPO_ROOT, "scripts/build-agent.mjs"), "--out", out], {
    cwd: REPO_ROOT,
    stdio: "pipe",
  });
  builtAgent = out;
  return out;
}

/** An attempt for `node`: the assignment's whole desired spec at `generation`. */
export function testBundle(
  node: Node,
  options: { assignment?: string; generation: number; resources: Resource[]; attemptId?: string },
): Bundle {
  const spec: InstanceSpec = {
    assignment: options.assignment ?? "app",
    node: node.metadata.name,
    state: "running",
    dependsOn: [],
    roots: node.spec.roots,
    resources: options.resources,
    probes: [],
  };
  return {
    apiVersion: "steward.dev/v1",
    kind: "Bundle",
    attemptId: options.attemptId ?? ulid(),
    generation: options.generation,
    hash: contentHash(spec),
    spec,
    issuedAt: new Date().toISOString(),
  };
}

/** Polls `probe` until it returns a value; fails naming `what` after `timeoutMs`. */
export async function until<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A started SSH transport that authenticates with `keyFile` only (no ssh-agent), and what it delivers. */
export async function startTransport(
  keyFile: string,
  options: SshTransportOptions = {},
): Promise<{ transport: SshTransport; events: EventLog }> {
  const events = new EventLog();
  const transport = createSshTransport({ keyFile, agentSocket: null, ...options });
  await transport.start(events);
  return { transport, events };
}

/** The DispatchError `promise` rejects with (fails the test if it resolves or rejects otherwise). */
export async function refusalOf(promise: Promise<unknown>): Promise<DispatchError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof DispatchError)) throw new Error(`expected a DispatchError, got ${String(error)}`);
  return error;
}

/**
 * Loopback hosts for one test file (started before its tests, stopped after), and a way to start a
 * transport that reaches them with the test agent.
 */
export function withHosts(count: number): {
  fleet: () => SshdFleet;
  start: (options?: SshTransportOptions) => Promise<{ transport: SshTransport; events: EventLog }>;
} {
  let fleet: SshdFleet | undefined;
  beforeAll(async () => {
    testAgentFile();
    fleet = await startSshdFleet(count);
  }, 60_000);
  afterAll(() => fleet?.stop());
  const started = () => {
    if (!fleet) throw new Error("withHosts: the hosts start in beforeAll");
    return fleet;
  };
  return {
    fleet: started,
    start: (options = {}) =>
      startTransport(started().clientKey.privateKeyFile, { agentFile: testAgentFile(), ...options }),
  };
}

/** A `steward hub` process reaching SSH nodes, with its state directory and its log. */
export interface SshHubProcess {
  hub: ChildProcess;
  /** Its working directory; the state is `<dir>/state`, the log `<dir>/hub.log`. */
  dir: string;
  state: string;
  log: () => string;
  stop: () => Promise<void>;
}

/**
 * `steward hub --ssh-key KEY --repo REPO` as the operator runs it, syncing every `syncInterval`;
 * the single-file agent is put next to the entry, where an installed package has it.
 */
export async function startSshHub(options: {
  repo: string;
  clientKeyFile: string;
  syncInterval: string;
}): Promise<SshHubProcess> {
  await packagedAgent();
  const dir = tempDir("steward-hub-ssh-");
  const state = join(dir, "state");
  const hub = await startSteward(
    [
      "--state",
      state,
      "hub",
      "--repo",
      options.repo,
      "--listen",
      "127.0.0.1:0",
      "--sync-interval",
      options.syncInterval,
      "--ssh-key",
      options.clientKeyFile,
    ],
    { cwd: dir, log: join(dir, "hub.log"), env: { SSH_AUTH_SOCK: "" } },
  );
  return {
    hub,
    dir,
    state,
    log: () => readFileSync(join(dir, "hub.log"), "utf8"),
    stop: async () => {
      hub.kill("SIGTERM");
      await new Promise((resolve) => hub.once("exit", resolve));
    },
  };
}
