/**
 * A fleet repository with secrets, made as an operator makes one: each host's identity made on the
 * host (in its agent's state directory, as `steward agent identity` does), its recipient in the Node
 * document, an operator in steward.yaml, and the secrets written by `steward secret encrypt`. The
 * `db` assignment takes a TLS key as a secret file and a password as a secret value of a service
 * and of a command.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureHostIdentity, identityFiles } from "../../src/agent/identity.js";
import { assignmentYaml, fleetYaml, nodeYaml } from "../hub/helpers/fleet.js";
import { type CliRun, runCli } from "./cli.js";
import { makeRepo, type TempRepo } from "./git.js";
import { newIdentity, traces } from "./secrets.js";

export const TLS_KEY =
  "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgEndToEndTlsKeyMaterial\n-----END PRIVATE KEY-----\n";
export const DB_PASSWORD = "end-to-end-db-password-7f3a";

/** Everything a test must never find outside the hosts' own files. */
export function secretTraces(...plaintexts: string[]): string[] {
  return [...traces(TLS_KEY), ...traces(DB_PASSWORD), ...plaintexts.flatMap((text) => traces(text))];
}

export interface SecretFleet {
  repo: TempRepo;
  /** The operator's identity file. */
  operatorKey: string;
  /** Each node's agent state directory, and its recipient. */
  hosts: Map<string, { state: string; recipient: string; identityFile: string }>;
  /** Runs `steward ARGS` in-process in the repository (an operator's command), returns its exit code and output. */
  steward(argv: string[], env?: NodeJS.ProcessEnv): Promise<CliRun>;
}

/** The `db` assignment on `nodes` (its resources under /srv/db). */
export function dbAssignment(nodes: string[]): string {
  const password = { secret: "secrets/db.yaml.age", key: "password" };
  return assignmentYaml("db", {
    nodes,
    resources: [
      { kind: "directory", name: "db-dir", path: "/srv/db" },
      {
        kind: "file",
        name: "tls-key",
        path: "/srv/db/server.key",
        mode: "0600",
        source: "secrets/server.key.age",
        secret: true,
        dependsOn: ["db-dir"],
      },
      {
        kind: "command",
        name: "migrate",
        run: ["sh", "-c", 'test -n "$DB_PASSWORD" && touch "$STEWARD_ROOT/srv/db/migrated"'],
        creates: "/srv/db/migrated",
        env: { DB_PASSWORD: password },
        dependsOn: ["db-dir"],
      },
      {
        kind: "service",
        name: "db",
        exec: ["sh", "-c", "exec sleep 100000"],
        env: { DB_PASSWORD: password },
        restartOn: ["tls-key"],
        dependsOn: ["tls-key", "migrate"],
      },
    ],
  });
}

/**
 * The fleet: `nodes` (transport `transport`, each host's agent state where `agentState` says),
 * `db` placed on the first of them, the secrets encrypted for it and the operator, committed.
 */
export async function secretFleet(options: {
  dir: string;
  nodes: string[];
  transport: "local" | "nats";
  agentState: (node: string) => string;
}): Promise<SecretFleet> {
  const hosts = new Map<string, { state: string; recipient: string; identityFile: string }>();
  const files: Record<string, string> = {};
  for (const node of options.nodes) {
    const state = options.agentState(node);
    const { identity } = await ensureHostIdentity(state);
    hosts.set(node, { state, recipient: identity.age, identityFile: identityFiles(state).age });
    files[`nodes/${node}.yaml`] = nodeYaml(node, {
      transport: options.transport,
      identity: { age: identity.age },
    });
  }
  const operator = await newIdentity();
  const operatorKey = join(options.dir, "operator.key");
  writeFileSync(operatorKey, `${operator.identity}\n`, { mode: 0o600 });
  files["steward.yaml"] = fleetYaml({
    heartbeat: { interval: "1s" },
    secrets: { operators: [{ name: "alice", recipient: operator.recipient }] },
  });
  files["assignments/db.yaml"] = dbAssignment([options.nodes[0]!]);
  const repo = makeRepo();
  repo.write(files);
  const steward = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
    runCli(argv, repo.dir, { PATH: process.env.PATH, STEWARD_AGE_IDENTITY: operatorKey, ...env });
  writeFileSync(join(options.dir, "server.key"), TLS_KEY);
  writeFileSync(join(options.dir, "db.yaml"), `password: ${DB_PASSWORD}\n`);
  for (const [plaintext, out] of [
    ["server.key", "secrets/server.key.age"],
    ["db.yaml", "secrets/db.yaml.age"],
  ] as const) {
    const run = await steward([
      "secret",
      "encrypt",
      "--assignment",
      "db",
      join(options.dir, plaintext),
      "--out",
      out,
    ]);
    if (run.code !== 0) throw new Error(`steward secret encrypt failed: ${run.stderr}`);
  }
  repo.commit("a fleet with secrets");
  return { repo, operatorKey, hosts, steward };
}
