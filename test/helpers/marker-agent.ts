/**
 * A small real agent for transport tests until they can run the full Agent: applying a bundle
 * writes the instance's generation and hash to a marker file under its root, observing reads the
 * marker files back (never its memory), and attempt ids are kept in a state file so a redelivered
 * attempt replays its result instead of applying again. `applied` lists every real apply.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ulid } from "ulid";
import { contentHash } from "../../src/model/canonical.js";
import { DEFAULT_BUDGET } from "../../src/model/fleet.js";
import type {
  AgentReply,
  AttemptResult,
  Bundle,
  InstanceReport,
  InstanceSpec,
  Node,
  Report,
} from "../../src/model/generated.js";
import { bundleFor, type Instance, instanceKey } from "../../src/model/render.js";
import type { AgentRuntime } from "../../src/transport/nats/agent.js";

interface Marker {
  generation: number;
  hash: string;
  state: "running" | "stopped";
  attemptId: string;
}

export interface MarkerAgentOptions {
  /** Milliseconds each apply takes. */
  applyDelayMs?: number;
  /** Makes apply throw (an Agent that crashes mid-attempt). */
  crash?: boolean;
  /** Makes only the first N applies throw. */
  crashTimes?: number;
  /** Service-like resources in the bundle make the instance's heartbeat run. */
  withService?: boolean;
}

export class MarkerAgent implements AgentRuntime {
  /** Every apply that really ran (replays excluded), in order. */
  readonly applied: { attemptId: string; assignment: string; generation: number }[] = [];
  /** Applies begun (replays excluded), finished or not. */
  started = 0;
  /** Attempts handed to apply again after they ran (a redelivery): answered by replaying the result. */
  replayed = 0;
  /** Applies that threw (`crash`, `crashTimes`). */
  crashed = 0;
  private seq = 0;

  constructor(
    readonly node: string,
    readonly root: string,
    readonly options: MarkerAgentOptions = {},
  ) {
    mkdirSync(join(root, "markers"), { recursive: true });
  }

  private get attemptsFile(): string {
    return join(this.root, "attempts.json");
  }

  private attempts(): Record<string, AttemptResult> {
    return existsSync(this.attemptsFile) ? JSON.parse(readFileSync(this.attemptsFile, "utf8")) : {};
  }

  async apply(bundle: Bundle): Promise<AgentReply> {
    if (this.options.crash || this.crashed < (this.options.crashTimes ?? 0)) {
      this.crashed++;
      throw new Error("agent crashed mid-apply");
    }
    const known = this.attempts()[bundle.attemptId];
    if (known) {
      this.replayed++;
      return { result: { ...known, duplicate: true }, report: await this.observe() };
    }
    const startedAt = new Date().toISOString();
    this.started++;
    if (this.options.applyDelayMs) await new Promise((r) => setTimeout(r, this.options.applyDelayMs));
    const marker: Marker = {
      generation: bundle.generation,
      hash: bundle.hash,
      state: bundle.spec.state,
      attemptId: bundle.attemptId,
    };
    writeFileSync(join(this.root, "markers", `${bundle.spec.assignment}.json`), JSON.stringify(marker));
    this.applied.push({
      attemptId: bundle.attemptId,
      assignment: bundle.spec.assignment,
      generation: bundle.generation,
    });
    const result: AttemptResult = {
      attemptId: bundle.attemptId,
      node: this.node,
      assignment: bundle.spec.assignment,
      generation: bundle.generation,
      outcome: "succeeded",
      resources: bundle.spec.resources.map((r) => ({
        name: "path" in r ? r.path : r.kind,
        kind: r.kind,
        action: "updated",
      })),
      startedAt,
      finishedAt: new Date().toISOString(),
    };
    writeFileSync(this.attemptsFile, JSON.stringify({ ...this.attempts(), [bundle.attemptId]: result }));
    return { result, report: await this.observe() };
  }

  async observe(): Promise<Report> {
    const instances: InstanceReport[] = [];
    for (const file of readdirSync(join(this.root, "markers")).sort()) {
      const marker = JSON.parse(readFileSync(join(this.root, "markers", file), "utf8")) as Marker;
      const kind = this.options.withService ? "service" : "file";
      instances.push({
        assignment: file.replace(/\.json$/, ""),
        generation: marker.generation,
        hash: marker.hash,
        state: marker.state,
        converged: true,
        resources: [
          { name: "main", kind, status: "ok", counters: { consecutiveFailures: 0, everApplied: true } },
        ],
        probes: [],
        lastAttempt: { attemptId: marker.attemptId, generation: marker.generation, outcome: "succeeded" },
      });
    }
    return {
      apiVersion: "steward.dev/v1",
      kind: "Report",
      node: this.node,
      takenAt: new Date().toISOString(),
      seq: ++this.seq,
      agent: { version: "test" },
      instances,
    };
  }
}

/**
 * A bundle for `assignment` on `node` at `generation`, with content that differs per generation.
 * `countRuns` adds a command (run once per generation by the real Agent) that appends the attempt id
 * to `<root>/srv/runs/<assignment>.log`, so a test can count what really ran.
 */
export function testBundle(
  node: string,
  assignment: string,
  generation: number,
  state: InstanceSpec["state"] = "running",
  options: { countRuns?: boolean } = {},
): Bundle {
  const spec: InstanceSpec = {
    assignment,
    node,
    state,
    dependsOn: [],
    roots: ["/srv"],
    resources: [
      { kind: "file", path: `/srv/${assignment}.conf`, content: `generation ${generation}\n` },
      ...(options.countRuns
        ? [
            {
              kind: "command" as const,
              name: "count-runs",
              run: [
                "sh",
                "-c",
                `mkdir -p "$STEWARD_ROOT/srv/runs" && echo "$STEWARD_GENERATION $STEWARD_ATTEMPT" >> "$STEWARD_ROOT/srv/runs/${assignment}.log"`,
              ],
            },
          ]
        : []),
    ],
    probes: [],
  };
  const instance: Instance = {
    key: instanceKey(assignment, node),
    assignment,
    node,
    spec,
    hash: contentHash(spec),
    rollout: {},
    budget: DEFAULT_BUDGET,
    file: `assignments/${assignment}.yaml`,
  };
  return bundleFor(instance, generation, ulid(), new Date());
}

/** The runs the counting command of `testBundle(..., { countRuns: true })` recorded: "generation attemptId". */
export function countedRuns(root: string, assignment: string): string[] {
  const file = join(root, "srv", "runs", `${assignment}.log`);
  return existsSync(file) ? readFileSync(file, "utf8").trim().split("\n") : [];
}

/** A node declared with the nats transport. */
export function natsNode(name: string): Node {
  return {
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: { name },
    spec: { transport: "nats", roots: ["/srv"] },
  };
}
