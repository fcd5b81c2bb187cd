/** What the status tests share: a GitHub fake with its writer, and a publisher on a manual clock. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type StatusHealth, StatusWriteError, type StatusWriter } from "../../src/hub/status.js";
import { SqliteStore } from "../../src/hub/store/sqlite.js";
import type { Store } from "../../src/hub/store/store.js";
import { GithubStatusWriter } from "../../src/status/github.js";
import { StatusPublisher } from "../../src/status/publisher.js";
import { type FakeForge, startGithubForge } from "../helpers/forge-openapi.js";
import type { ManualClock } from "./clock.js";

export const SHA = "3f786850e387550fdab836ed7e6dc881de23001b";
export const NEXT_SHA = "89e6c98d92887913cadf06b2adb97f26cde4849b";
export const TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

/** A GitHub fake on the test's clock and a writer for acme/fleet on it. */
export async function startGithub(
  now: () => number = Date.now,
): Promise<{ forge: FakeForge; writer: GithubStatusWriter }> {
  const forge = await startGithubForge({ token: TOKEN, now });
  const writer = new GithubStatusWriter({
    owner: "acme",
    repo: "fleet",
    baseUrl: forge.url,
    auth: { token: TOKEN },
    now,
  });
  return { forge, writer };
}

/** A hub database file in a fresh temporary directory. */
export function databasePath(): string {
  return join(mkdtempSync(join(tmpdir(), "steward-status-")), "hub.db");
}

/** A publisher with a 1 s debounce on `clock`, recording health events. */
export function startPublisher(options: { store?: Store; writers: StatusWriter[]; clock: ManualClock }): {
  publisher: StatusPublisher;
  health: StatusHealth[];
  store: Store;
} {
  const health: StatusHealth[] = [];
  const store = options.store ?? new SqliteStore(":memory:");
  const publisher = new StatusPublisher({
    store,
    writers: options.writers,
    timers: options.clock,
    debounceMs: 1_000,
    onHealth: (event) => health.push(event),
    onError: (error) => {
      throw error;
    },
  });
  return { publisher, health, store };
}

/** The StatusWriteError a write rejected with (the test fails if it resolved). */
export async function failureOf(write: Promise<void>): Promise<StatusWriteError> {
  const error = await write.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof StatusWriteError))
    throw new Error(`expected a StatusWriteError, got ${String(error)}`);
  return error;
}

/** Moves the clock and waits until the publisher has finished what fell due. */
export async function elapse(clock: ManualClock, publisher: StatusPublisher, ms: number): Promise<void> {
  // What the publisher was doing (reading what it owes from the store) ends before time passes.
  await publisher.whenIdle();
  clock.advance(ms);
  await publisher.whenIdle();
}
