/**
 * A hub on real parts for tests (closed when the test finishes): a SQLite file, the local transport with real agents applying under a
 * temporary root, and a fleet repo directory whose commits are synced into the hub's database. The
 * clock is fake, so backoff and leases are driven by `advance` instead of sleeping.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import pino from "pino";
import { expect, onTestFinished } from "vitest";
import { Agent } from "../../../src/agent/agent.js";
import { recordServedRevision } from "../../../src/cli/served.js";
import { conditionViolations } from "../../../src/hub/conditions.js";
import type { Timing } from "../../../src/hub/decide.js";
import type { DeclarationChanges } from "../../../src/hub/desired.js";
import { Hub, type HubOptions } from "../../../src/hub/hub.js";
import type { IntentRecord } from "../../../src/hub/records.js";
import { SqliteStore } from "../../../src/hub/store/sqlite.js";
import type { Store } from "../../../src/hub/store/store.js";
import type { Transport } from "../../../src/hub/transport.js";
import type { AnalysisCache } from "../../../src/model/load.js";
import { Syncer, type SyncOutcome } from "../../../src/repo/syncer.js";
import { LocalTransport } from "../../../src/transport/local.js";
import { FakeClock } from "./clock.js";

/** What a harness commit did: the commit, the sync's outcome and the declarations it changed. */
export interface SyncedRevision {
  sha: string;
  outcome: SyncOutcome;
  declarations?: DeclarationChanges;
}

export interface HarnessOptions {
  /** Fleet repo files, by path relative to the repo root. */
  files: Record<string, string>;
  timing?: Partial<Timing>;
  /** Wraps the local transport (fault injection). */
  wrap?: (transport: LocalTransport) => Transport;
  /** Log lines are collected here when given. */
  logLines?: Record<string, unknown>[];
  /** More hub options (a status sink, say), given the store. */
  hubOptions?: (store: Store) => Partial<HubOptions>;
  /** The hub's store (default: a SQLite file in the harness's directory); closed with the harness. */
  store?: () => Promise<Store>;
}

export interface Harness {
  dir: string;
  repo: string;
  root: string;
  /** The hub's store: SQLite unless the harness was given another (`db` is then undefined). */
  store: Store & { db?: SqliteStore["db"] };
  hub: Hub;
  local: LocalTransport;
  clock: FakeClock;
  /** False between stopHub and startHub: commits are only written to the database then. */
  running: boolean;
  /** Writes (or with `null`, deletes) repo files. */
  write(files: Record<string, string | null>): void;
  /** Commits the repo's current content (real git) and syncs it with the real syncer, then tells the hub. */
  commit(message?: string): Promise<SyncedRevision>;
  /** Waits until the hub and every agent have nothing left to do now. */
  settle(): Promise<void>;
  /** Advances the fake clock and settles. */
  advance(ms: number): Promise<void>;
  /** Stops the hub (and its agents), as a hub process going down. */
  stopHub(): Promise<void>;
  /** A new hub on the same database, state and root; `beforeStart` may prepare its transport. */
  startHub(beforeStart?: (local: LocalTransport) => void | Promise<void>): Promise<void>;
  intent(key: string): Promise<IntentRecord>;
  /** Has the node's agent send a fresh full report, and settles. */
  report(node: string): Promise<void>;
  /** A file under a node's root. */
  read(node: string, path: string): string | undefined;
  close(): Promise<void>;
}

export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), "steward-hub-"));
  const repo = join(dir, "repo");
  const root = join(dir, "root");
  const clock = new FakeClock(Date.now());
  const store: Store & { db?: SqliteStore["db"] } = options.store
    ? await options.store()
    : new SqliteStore(join(dir, "hub.db"));
  const logger = options.logLines
    ? pino({ level: "debug" }, { write: (line: string) => options.logLines!.push(JSON.parse(line)) })
    : pino({ level: "silent" });
  const build = () => {
    const local = new LocalTransport({
      root,
      stateDir: join(dir, "state"),
      clock,
      agentFor: (node, paths, agentClock) =>
        new Agent({
          node,
          root: paths.root!,
          stateDir: paths.stateDir,
          clock: () => agentClock.now(),
          probeSettleMs: 0,
        }),
    });
    const transport = options.wrap ? options.wrap(local) : local;
    const hub = new Hub({
      store,
      transports: [transport],
      clock,
      timing: options.timing,
      random: () => 0.5,
      logger,
      ...options.hubOptions?.(store),
    });
    return { local, hub };
  };
  const write = (files: Record<string, string | null>) => {
    for (const [path, content] of Object.entries(files)) {
      const full = join(repo, path);
      if (content === null) rmSync(full, { force: true });
      else {
        mkdirSync(dirname(full), { recursive: true });
        writeFileSync(full, content);
      }
    }
  };
  write(options.files);
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.com", ...args], {
      cwd: repo,
      stdio: "pipe",
    });
  git("init", "-q", "-b", "main");
  const syncer = new Syncer({
    store: store.generations,
    source: { kind: "path", path: repo },
    branch: "main",
    cacheDir: join(dir, "git"),
    clock,
  });
  const analyses: AnalysisCache = new Map();
  const settle = async () => {
    for (let quiet = 0; quiet < 3; ) {
      await harness.hub.idle();
      await harness.local.settled();
      await new Promise((resolve) => setTimeout(resolve, 5));
      const activity = harness.hub.activity;
      quiet = activity.queued + activity.relaying + activity.handling === 0 ? quiet + 1 : 0;
    }
  };
  const first = build();
  let prepared: ReturnType<typeof build> | undefined = first;
  const harness: Harness = {
    dir,
    repo,
    root,
    store,
    hub: first.hub,
    local: first.local,
    clock,
    running: false,
    write,
    async commit(message = "change") {
      git("add", "-A");
      git("commit", "-q", "--allow-empty", "-m", message);
      const outcome = await syncer.sync();
      const declarations = await recordServedRevision(store, syncer, analyses, clock.now());
      if (harness.running) {
        await harness.hub.takeInRevisions();
        if (declarations) await harness.hub.declarationsChanged(declarations);
      }
      const synced: SyncedRevision = { sha: outcome.head, outcome };
      if (declarations) synced.declarations = declarations;
      return synced;
    },
    settle,
    async advance(ms: number) {
      clock.advance(ms);
      await settle();
    },
    async stopHub() {
      await harness.hub.stop();
      harness.running = false;
    },
    async startHub(beforeStart) {
      const next = prepared ?? build();
      prepared = undefined;
      harness.hub = next.hub;
      harness.local = next.local;
      await beforeStart?.(next.local);
      await next.hub.start();
      harness.running = true;
      await settle();
    },
    async intent(key: string) {
      const desired = await store.desired.instance(key);
      if (!desired) throw new Error(`no instance ${key}`);
      const intent = await store.intents.get(key, desired.generation);
      if (!intent) throw new Error(`no intent for ${key} at generation ${desired.generation}`);
      return intent;
    },
    async report(node: string) {
      await harness.local.requestReport((await store.nodes.get(node))!.spec);
      await settle();
    },
    read(node: string, path: string) {
      try {
        return readFileSync(join(root, node, path), "utf8");
      } catch {
        return undefined;
      }
    },
    async close() {
      await harness.hub.stop();
      syncer.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await harness.startHub();
  // Closed when the test ends, after checking that every condition kept its invariants.
  onTestFinished(async () => {
    try {
      expect(await conditionViolations(store)).toEqual([]);
    } finally {
      await harness.close();
    }
  });
  return harness;
}
