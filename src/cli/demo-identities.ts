/**
 * The example fleet's demo identities (examples/identities, published with steward and never to be
 * used elsewhere): `steward up` installs one into a local node's agent when the node's document
 * declares its recipient and the agent has no identity of its own, so the example's secrets
 * decrypt on its local agents with nothing to set up. An agent's own identity is never replaced.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeFileAtomicSync } from "../agent/atomic.js";
import { identityFiles } from "../agent/identity.js";
import type { NodeRecord } from "../hub/records.js";
import { agentStateDir } from "../transport/local.js";

/** Where the demo identities are shipped. */
export const DEMO_IDENTITIES = fileURLToPath(new URL("../../examples/identities/", import.meta.url));

/** What `installDemoIdentities` did, by node. */
export interface DemoIdentities {
  /** Local nodes whose agent got its demo identity now. */
  installed: string[];
  /** Local nodes that declare a demo identity while their agent holds another: their secrets will not open. */
  differing: string[];
}

/**
 * Installs the demo identity of every local node that declares one into its agent's state
 * directory (`<stateDir>/agents/<node>/identity/age.key`, mode 0600), unless it has one already.
 */
export async function installDemoIdentities(
  nodes: readonly NodeRecord[],
  stateDir: string,
  dir = DEMO_IDENTITIES,
): Promise<DemoIdentities> {
  const done: DemoIdentities = { installed: [], differing: [] };
  if (!existsSync(dir)) return done;
  const { identityToRecipient } = await import("age-encryption");
  const byRecipient = new Map<string, string>();
  for (const name of readdirSync(dir).filter((file) => file.endsWith(".key"))) {
    const text = readFileSync(join(dir, name), "utf8");
    const identity = text.split("\n").find((line) => line.startsWith("AGE-SECRET-KEY-1"));
    if (identity) byRecipient.set(await identityToRecipient(identity.trim()), text);
  }
  for (const node of nodes) {
    const declared = node.spec.spec.identity?.age;
    const demo = declared ? byRecipient.get(declared) : undefined;
    if (node.transport !== "local" || node.removedAt || !demo) continue;
    const files = identityFiles(agentStateDir(stateDir, node.name));
    if (existsSync(files.age)) {
      const { readAgeIdentity } = await import("../agent/identity.js");
      const own = readAgeIdentity(agentStateDir(stateDir, node.name));
      if (own && (await identityToRecipient(own)) !== declared) done.differing.push(node.name);
      continue;
    }
    mkdirSync(files.dir, { recursive: true, mode: 0o700 });
    writeFileAtomicSync(files.age, demo, { mode: 0o600 });
    done.installed.push(node.name);
  }
  return done;
}
