// A simulated fleet for bench:web: a real fleet repository (written with `git fast-import`), the real
// syncer and hub with its SQLite store, and the local transport with an agent per node that applies
// nothing and answers at once (its reports are simulated, as in bench/nats-agents.mjs's echo agent).
// Some nodes fail one assignment permanently, with a command's evidence, so the fleet has failures
// and conditions as a real one does; `rollOut` starts a canary rollout that holds most of the fleet.
// Imports the build in dist/.
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { recordServedRevision } from "../dist/cli/served.js";
import { Hub } from "../dist/hub/hub.js";
import { SqliteStore } from "../dist/hub/store/sqlite.js";
import { Syncer } from "../dist/repo/syncer.js";
import { LocalTransport } from "../dist/transport/local.js";
import { commitStream, FLEET_YAML } from "./fleet.mjs";

export const nodeName = (i) => `node-${String(i).padStart(4, "0")}`;
export const assignmentName = (a) => ["base", "web", "metrics", "backup", "proxy", "cache"][a] ?? `app-${a}`;

const REGIONS = ["eu-west", "eu-north", "us-east", "us-west", "ap-south"];

function nodeYaml(i) {
  return `apiVersion: steward.dev/v1
kind: Node
metadata:
  name: ${nodeName(i)}
  labels:
    bench: "yes"
    region: ${REGIONS[i % REGIONS.length]}
spec:
  transport: local
  roots: [/srv]
`;
}

function assignmentYaml(a, version, rollout = "") {
  const name = assignmentName(a);
  return `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: ${name}
spec:
  selector: {matchLabels: {bench: "yes"}}
${rollout}  resources:
    - kind: file
      name: conf
      path: /srv/${name}.conf
      content: "version ${version}"
`;
}

/** Whether the simulated agent of node `i` fails assignment `a` (about 1 node in 100, on the last assignment). */
export const failsOn = (i, a, assignments) => a === assignments - 1 && i % 97 === 13;

/** An agent that records what it was given and reports it converged, except the failures above. */
function echoAgent(node, index, assignments) {
  const applied = new Map();
  const failed = new Map();
  const report = () => {
    const takenAt = new Date().toISOString();
    const instances = [];
    for (const [assignment, { generation, hash }] of applied)
      instances.push({
        assignment,
        generation,
        hash,
        observedGeneration: generation,
        state: "running",
        converged: true,
        resources: [],
        probes: [],
      });
    for (const [assignment, { generation }] of failed)
      instances.push({
        assignment,
        generation: generation - 1,
        observedGeneration: generation,
        state: "running",
        converged: false,
        resources: [
          {
            name: "conf",
            kind: "file",
            status: "failed",
            failureClass: "permanent",
            reason: "WriteRefused",
            message: "cannot write /srv/conf: read-only file system",
            evidence: "EROFS: read-only file system, open '/srv/.conf.steward-1-1.tmp'",
            counters: { consecutiveFailures: 1, everApplied: false, lastFailureAt: takenAt },
          },
        ],
        probes: [],
      });
    return {
      apiVersion: "steward.dev/v1",
      kind: "Report",
      node,
      takenAt,
      agent: { version: "echo" },
      instances,
    };
  };
  return {
    async apply(bundle) {
      const assignment = bundle.spec.assignment;
      const a = Array.from({ length: assignments }, (_, n) => assignmentName(n)).indexOf(assignment);
      const now = new Date().toISOString();
      const base = {
        attemptId: bundle.attemptId,
        node,
        assignment,
        generation: bundle.generation,
        startedAt: now,
        finishedAt: now,
      };
      if (failsOn(index, a, assignments)) {
        failed.set(assignment, { generation: bundle.generation });
        return {
          result: {
            ...base,
            outcome: "failed",
            failureClass: "permanent",
            reason: "WriteRefused",
            message: "cannot write /srv/conf: read-only file system",
            resources: [
              {
                name: "conf",
                kind: "file",
                action: "failed",
                failureClass: "permanent",
                reason: "WriteRefused",
                message: "cannot write /srv/conf: read-only file system",
                evidence: "EROFS: read-only file system, open '/srv/.conf.steward-1-1.tmp'",
              },
            ],
          },
          report: report(),
        };
      }
      applied.set(assignment, { generation: bundle.generation, hash: bundle.hash });
      return { result: { ...base, outcome: "succeeded", resources: [] }, report: report() };
    },
    observe: async () => report(),
    /** A report where `assignment` drifted (someone edited its file): what a watcher sees turn. */
    drift(assignment) {
      const r = report();
      for (const instance of r.instances)
        if (instance.assignment === assignment) {
          instance.converged = false;
          instance.resources = [
            {
              name: "conf",
              kind: "file",
              status: "drifted",
              diff: ["content differs"],
              counters: { consecutiveFailures: 0, everApplied: true },
            },
          ];
        }
      return r;
    },
  };
}

/**
 * Starts a fleet of `nodes × assignments` instances in `dir` and waits until its first revision
 * settled. Returns the hub, its store, `commit(files, message)` (synced and taken in at once) and
 * `drift(node, assignment)` (a simulated report of drift on one instance).
 */
export async function startWebFleet({ dir, nodes, assignments }) {
  const repo = join(dir, "fleet.git");
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: dir };
  const git = (args, input) => execFileSync("git", args, { cwd: repo, env, input, maxBuffer: 1 << 30 });
  mkdirSync(dir, { recursive: true });
  execFileSync("git", ["init", "-q", "--bare", "-b", "main", repo], { env });
  const files = [["steward.yaml", FLEET_YAML]];
  for (let i = 0; i < nodes; i++) files.push([`nodes/${nodeName(i)}.yaml`, nodeYaml(i)]);
  for (let a = 0; a < assignments; a++)
    files.push([`assignments/${assignmentName(a)}.yaml`, assignmentYaml(a, 1)]);
  git(["fast-import", "--quiet"], commitStream("main", "The simulated fleet, first revision", files));

  const store = new SqliteStore(join(dir, "hub.db"));
  const syncer = new Syncer({
    store: store.generations,
    source: { kind: "path", path: repo },
    cacheDir: join(dir, "git"),
  });
  const agents = new Map();
  const local = new LocalTransport({
    stateDir: join(dir, "state"),
    heartbeatIntervalMs: 3_600_000,
    agentFor: (node) => {
      const agent = echoAgent(node, Number(node.slice(5)), assignments);
      agents.set(node, agent);
      return agent;
    },
  });
  const hub = new Hub({ store, transports: [local], logger: pino({ level: "silent" }), resyncIntervalMs: 0 });
  await hub.start();
  const analyses = new Map();
  const takeIn = async () => {
    await syncer.sync();
    const declared = await recordServedRevision(store, syncer, analyses, new Date());
    await hub.takeInRevisions();
    if (declared) await hub.declarationsChanged(declared);
  };
  const settle = async () => {
    for (let quiet = 0; quiet < 3; ) {
      await hub.idle();
      await new Promise((resolve) => setTimeout(resolve, 20));
      const activity = hub.activity;
      quiet = activity.queued + activity.relaying + activity.handling === 0 ? quiet + 1 : 0;
    }
  };
  await takeIn();
  await settle();
  let parent = git(["rev-parse", "refs/heads/main"]).toString().trim();
  return {
    hub,
    store,
    local,
    settle,
    /** Commits `files` ([path, content] pairs) on main and has the hub take the revision in. */
    async commit(changed, message) {
      git(["fast-import", "--quiet"], commitStream("main", message, changed, parent));
      parent = git(["rev-parse", "refs/heads/main"]).toString().trim();
      await takeIn();
      return parent;
    },
    /** A new version of assignment `a`, rolled out behind `canary` canaries that soak for an hour. */
    rollOut(a, version, canary) {
      const rollout = `  rollout:\n    canary: {count: ${canary}, soak: 1h}\n`;
      return this.commit(
        [[`assignments/${assignmentName(a)}.yaml`, assignmentYaml(a, version, rollout)]],
        `${assignmentName(a)} ${version}: a canary of ${canary}, then the rest`,
      );
    },
    /** Has node `i` report that `assignment` drifted; resolves once the report is recorded. */
    drift(i, assignment) {
      return hub.eventsFor("local").report(agents.get(nodeName(i)).drift(assignment));
    },
    async close() {
      await hub.stop();
      syncer.close();
      await store.close();
    },
  };
}
