/**
 * `steward nats config --fsync always|DURATION`: how often JetStream flushes its store to disk
 * (`jetstream { sync_interval }`). By default nats-server syncs every 2 minutes, so a power failure
 * can lose writes it has already acknowledged; `always` syncs each write before the ack.
 *
 * nats-server 2.10 added the field; 2.9 (Debian's 2.9.10) refuses to start with it ("unknown
 * field"), so it is written only for a server known to take it. Pure, but for `installedNatsServerVersion`.
 */
import { execFileSync } from "node:child_process";
import { UsageError } from "../../model/errors.js";
import { locateNatsServer } from "./server.js";

/** `always`, or a Go duration nats-server takes (`500ms`, `10s`, `1m`, `1h30m`). */
export type Fsync = "always" | { duration: string };

const DURATION = /^(\d+(ms|s|m|h))+$/;

/** Parses `--fsync`; throws UsageError on anything else (`soon`, `0s`, `10`). */
export function parseFsync(value: string): Fsync {
  if (value === "always") return "always";
  if (DURATION.test(value) && /[1-9]/.test(value)) return { duration: value };
  throw new UsageError(
    `--fsync ${value} is neither \`always\` nor a duration: give \`always\` (sync every write before it is acknowledged) or an interval such as 10s or 1m (nats-server's default is 2m)`,
  );
}

export interface NatsServerVersion {
  major: number;
  minor: number;
  patch: number;
}

/** The version in `nats-server --version`'s output (`nats-server: v2.9.10`); undefined if none. */
export function parseNatsServerVersion(output: string): NatsServerVersion | undefined {
  const match = /\bv?(\d+)\.(\d+)\.(\d+)/.exec(output);
  if (!match) return undefined;
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]) };
}

/** The first nats-server that takes `sync_interval`. */
export const SYNC_INTERVAL_SINCE: NatsServerVersion = { major: 2, minor: 10, patch: 0 };

/** True when this nats-server version takes `jetstream { sync_interval }`. */
export function takesSyncInterval(version: NatsServerVersion): boolean {
  if (version.major !== SYNC_INTERVAL_SINCE.major) return version.major > SYNC_INTERVAL_SINCE.major;
  return version.minor >= SYNC_INTERVAL_SINCE.minor;
}

/** The `sync_interval` line of a jetstream block. */
export function syncIntervalLine(fsync: Fsync): string {
  return `  sync_interval: ${fsync === "always" ? "always" : JSON.stringify(fsync.duration)}`;
}

/** What `--fsync` writes for a server of `version` (undefined: not known), and why not when it does not. */
export function planFsync(
  fsync: Fsync,
  version: NatsServerVersion | undefined,
): { write: true; warning?: string } | { write: false; warning: string } {
  const asked = fsync === "always" ? "always" : fsync.duration;
  if (!version)
    return {
      write: true,
      warning: `--fsync ${asked}: no nats-server here to check its version, so sync_interval is written; a server before 2.10 refuses to start with it ("unknown field") — remove the line there`,
    };
  const have = `${version.major}.${version.minor}.${version.patch}`;
  if (takesSyncInterval(version)) return { write: true };
  return {
    write: false,
    warning: `--fsync ${asked} left out: nats-server ${have} here refuses sync_interval (added in 2.10), so JetStream keeps its default of syncing every 2 minutes and a power failure can lose acknowledged writes — install nats-server 2.10 or later and run this again`,
  };
}

/** `nats-server --version` of the installed server; undefined when there is none or it says no version. */
export function installedNatsServerVersion(
  env: NodeJS.ProcessEnv = process.env,
): NatsServerVersion | undefined {
  let binary: string;
  try {
    binary = locateNatsServer(env);
  } catch {
    return undefined;
  }
  try {
    return parseNatsServerVersion(execFileSync(binary, ["--version"], { encoding: "utf8", timeout: 10_000 }));
  } catch {
    return undefined;
  }
}
