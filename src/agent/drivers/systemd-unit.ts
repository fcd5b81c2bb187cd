/**
 * `systemd-unit`: a unit's file (when `content` is given, written atomically to
 * /etc/systemd/system/<name>, which must be inside the node's roots), whether it is enabled, and
 * whether it is active per the assignment's `state`. A unit declared `enabled: false` is left to what
 * triggers it (a timer, a socket): its active state is not managed. Needs systemd as the init system:
 * without it the resource fails permanently with `SystemdNotRunning`.
 */
import { existsSync } from "node:fs";
import { posix } from "node:path";
import type { SystemdUnitResource } from "../../model/generated.js";
import { writeFileAtomic } from "../atomic.js";
import type { Applied, Driver, DriverContext, Plan } from "../driver.js";
import { runEvidence } from "../evidence.js";
import { permanent, type ResourceFailure, transient } from "../failure.js";
import { lstatOrUndefined, readContent, sha256 } from "../fsnode.js";
import type { RunResult } from "../runner.js";
import { memo, runTool } from "../tools.js";

/** A unit as systemctl (and its unit file) show it. */
export interface UnitObservation {
  /** `sha256:` of the unit file, when the resource manages its content. */
  fileHash?: string;
  loadState: string;
  activeState: string;
  subState: string;
  unitFileState: string;
}

const UNIT_DIR = "/etc/systemd/system";
const INSTALL_HINT = "the systemd-unit resource needs a host whose init system is systemd";

/** Parses `systemctl show` output (`Key=Value` lines). Pure. */
export function parseShow(stdout: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const line of stdout.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) values[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return values;
}

/** Whether systemd runs this host (what sd_booted checks); memoised per attempt. */
export async function systemdAvailable(ctx: DriverContext): Promise<ResourceFailure | undefined> {
  return memo(ctx, "systemd", async () => {
    try {
      await runTool(ctx, ["systemctl", "--version"], INSTALL_HINT, { timeoutMs: 10_000 });
    } catch (error) {
      return error as ResourceFailure;
    }
    if (!existsSync("/run/systemd/system"))
      return permanent(
        "SystemdNotRunning",
        "systemd is not the init system of this host (no /run/systemd/system): systemd-unit resources cannot apply here",
      );
    return undefined;
  });
}

function unitFailure(name: string, what: string, result: RunResult): ResourceFailure {
  const output = `${result.stdout}\n${result.stderr}`;
  if (/not found|does not exist|No such file/i.test(output))
    return permanent(
      "UnitNotFound",
      `unit ${name} does not exist: give its content or install what provides it`,
      runEvidence(result),
    );
  return transient("SystemctlFailed", `systemctl ${what} ${name} failed`, runEvidence(result));
}

async function systemctl(ctx: DriverContext, name: string, ...args: string[]): Promise<RunResult> {
  const result = await runTool(ctx, ["systemctl", ...args], INSTALL_HINT, { timeoutMs: 120_000 });
  if (result.exitCode !== 0) throw unitFailure(name, args[0]!, result);
  return result;
}

/** Whether the resource declares the unit file: its content, or a secret source decrypted on the host. */
function managesFile(resource: SystemdUnitResource): boolean {
  return resource.content !== undefined || (resource.secret === true && resource.source !== undefined);
}

function wantsActive(resource: SystemdUnitResource): boolean {
  return resource.enabled !== false;
}

/** The `systemd-unit` driver. */
export const systemdUnitDriver: Driver<SystemdUnitResource, UnitObservation> = {
  kind: "systemd-unit",

  async observe(resource, ctx) {
    const unavailable = await systemdAvailable(ctx);
    if (unavailable) throw unavailable;
    const observed: UnitObservation = { loadState: "", activeState: "", subState: "", unitFileState: "" };
    if (managesFile(resource)) {
      const host = ctx.paths.confined(`${UNIT_DIR}/${resource.name}`);
      const stats = lstatOrUndefined(host);
      if (stats?.isFile()) {
        const bytes = readContent(host, stats.size);
        // A secret unit file is known by its keyed digest only (see secrets.ts).
        observed.fileHash = resource.secret && ctx.secrets ? ctx.secrets.digestOf(bytes) : sha256(bytes);
      }
    }
    const result = await systemctl(
      ctx,
      resource.name,
      "show",
      resource.name,
      "--property=LoadState,ActiveState,SubState,UnitFileState",
    );
    const values = parseShow(result.stdout);
    observed.loadState = values.LoadState ?? "";
    observed.activeState = values.ActiveState ?? "";
    observed.subState = values.SubState ?? "";
    observed.unitFileState = values.UnitFileState ?? "";
    return observed;
  },

  plan(resource, observed, facts): Plan {
    const diff: string[] = [];
    if (managesFile(resource)) {
      const wanted = resource.secret
        ? (facts.secretDigests?.[resource.source ?? ""] ?? "unknown")
        : sha256(resource.content ?? "");
      if (observed.fileHash !== wanted)
        diff.push(`unit file ${observed.fileHash?.slice(0, 19) ?? "absent"} → ${wanted.slice(0, 19)}`);
    }
    const enabled = resource.enabled !== false;
    const isEnabled = observed.unitFileState === "enabled";
    if (enabled !== isEnabled && observed.unitFileState !== "static")
      diff.push(`${observed.unitFileState || "unknown"} → ${enabled ? "enabled" : "disabled"}`);
    if (wantsActive(resource)) {
      const active = observed.activeState === "active";
      if (facts.state === "running" && !active) diff.push(`${observed.activeState} → active`);
      if (facts.state === "stopped" && active) diff.push("active → inactive");
    }
    if (diff.length === 0) return { action: "none", diff };
    return {
      action: observed.loadState === "not-found" && managesFile(resource) ? "create" : "update",
      diff,
    };
  },

  async apply(resource, plan, observed, ctx): Promise<Applied> {
    let fileChanged = false;
    if (managesFile(resource) && plan.diff.some((line) => line.startsWith("unit file"))) {
      const host = ctx.paths.confined(`${UNIT_DIR}/${resource.name}`);
      ctx.paths.ensureParent(host);
      const content =
        resource.secret && ctx.secrets
          ? await ctx.secrets.fileBytes(resource.source!)
          : (resource.content ?? "");
      // A unit file that holds a secret is readable by root only.
      await writeFileAtomic(host, content, { mode: resource.secret ? 0o600 : 0o644 });
      ctx.dirty.add(posix.dirname(host));
      await systemctl(ctx, resource.name, "daemon-reload");
      fileChanged = true;
    }
    const enabled = resource.enabled !== false;
    if (observed.unitFileState !== "static" && enabled !== (observed.unitFileState === "enabled"))
      await systemctl(ctx, resource.name, enabled ? "enable" : "disable", resource.name);
    let action: Applied["action"] = plan.action === "create" ? "created" : "updated";
    if (wantsActive(resource)) {
      const active = observed.activeState === "active";
      if (ctx.state === "stopped" && active) {
        await systemctl(ctx, resource.name, "stop", resource.name);
        action = "stopped";
      } else if (ctx.state === "running" && !active) {
        await systemctl(ctx, resource.name, "start", resource.name);
        action = "started";
      } else if (ctx.state === "running" && fileChanged) {
        await systemctl(ctx, resource.name, "restart", resource.name);
        action = "restarted";
      }
    }
    return { action };
  },
};
