/**
 * Test harness for the agent: a temporary root and state directory per test, bundles built from
 * plain resource lists, and a cleanup that kills every process the agent started (services run
 * detached, so nothing else would).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, type AgentOptions } from "../../src/agent/agent.js";
import { contentHash } from "../../src/model/canonical.js";
import type { Bundle, InstanceSpec, Probe, Resource } from "../../src/model/generated.js";

export interface Sandbox {
  dir: string;
  /** What `--root` maps absolute paths under. */
  root: string;
  state: string;
  /** The host path of an absolute resource path. */
  host(path: string): string;
  agent(options?: Partial<AgentOptions>): Agent;
  /** Kills every service process started under this sandbox and removes the directory. */
  close(): Promise<void>;
}

let attemptCounter = 0;

/** A fresh attempt id (ULID-like; only uniqueness matters to the agent). */
export function attemptId(): string {
  attemptCounter += 1;
  return `01TEST${Date.now().toString(36).toUpperCase()}${String(attemptCounter).padStart(6, "0")}`;
}

export interface BundleInput {
  assignment?: string;
  node?: string;
  generation?: number;
  state?: "running" | "stopped";
  version?: string;
  roots?: string[];
  resources: Resource[];
  probes?: Probe[];
  budget?: { attempts?: number; withinMs?: number };
  attemptId?: string;
}

/** A bundle as the hub would send it (names default to paths, like rendering does). */
export function bundle(input: BundleInput): Bundle {
  const spec: InstanceSpec = {
    assignment: input.assignment ?? "demo",
    node: input.node ?? "node-1",
    state: input.state ?? "running",
    dependsOn: [],
    roots: input.roots ?? ["/etc/demo", "/srv"],
    resources: input.resources.map(
      (r) => ({ ...r, name: r.name ?? ("path" in r ? r.path : r.kind) }) as Resource,
    ),
    probes: input.probes ?? [],
  };
  if (input.version !== undefined) spec.version = input.version;
  const result: Bundle = {
    apiVersion: "steward.dev/v1",
    kind: "Bundle",
    attemptId: input.attemptId ?? attemptId(),
    generation: input.generation ?? 1,
    hash: contentHash(spec),
    spec,
    issuedAt: new Date().toISOString(),
  };
  if (input.budget) result.budget = input.budget;
  return result;
}

/**
 * A bundle as the hub renders one that uses secrets: their ciphertext, by repository path, in
 * `spec.secrets` (text as text, binary as base64).
 */
export function secretBundle(input: BundleInput, secrets: Record<string, Buffer | string>): Bundle {
  const made = bundle(input);
  made.spec.secrets = Object.fromEntries(
    Object.entries(secrets).map(([path, content]) => {
      const bytes = Buffer.from(content);
      const text = bytes.toString("utf8");
      return [
        path,
        Buffer.from(text, "utf8").equals(bytes)
          ? { content: text }
          : { content: bytes.toString("base64"), encoding: "base64" as const },
      ];
    }),
  );
  made.hash = contentHash(made.spec);
  return made;
}

/** A sandbox whose host has its identity made (`steward agent identity`), and that identity's recipient. */
export async function sandboxWithIdentity(): Promise<{ box: Sandbox; recipient: string }> {
  const box = sandbox();
  const { ensureHostIdentity } = await import("../../src/agent/identity.js");
  return { box, recipient: (await ensureHostIdentity(box.state)).identity.age };
}

/** The same bundle, redelivered as a new attempt (new id). */
export function again(previous: Bundle): Bundle {
  return { ...previous, attemptId: attemptId() };
}

/** Kills the process groups of every service recorded in a state directory. */
export function killServices(state: string): void {
  let assignments: string[] = [];
  try {
    assignments = readdirSync(join(state, "services"));
  } catch {
    return;
  }
  for (const assignment of assignments) {
    for (const file of readdirSync(join(state, "services", assignment))) {
      try {
        const { pid } = JSON.parse(readFileSync(join(state, "services", assignment, file), "utf8")) as {
          pid: number;
        };
        process.kill(-pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
}

export function sandbox(): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), "steward-agent-test-"));
  const root = join(dir, "root");
  const state = join(dir, "state");
  const agents: Agent[] = [];
  return {
    dir,
    root,
    state,
    host: (path) => join(root, path),
    agent(options = {}) {
      const agent = new Agent({ node: "node-1", stateDir: state, root, probeSettleMs: 3000, ...options });
      agents.push(agent);
      return agent;
    },
    async close() {
      for (const agent of agents) await agent.stop();
      killServices(state);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits until `check` returns a truthy value (polling), or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => T | Promise<T>,
  timeoutMs = 10_000,
  what = "condition",
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A free TCP port on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}
