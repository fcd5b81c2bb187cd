/**
 * `package`: a Debian package, observed in the dpkg database (`dpkg-query`), installed or removed
 * with apt-get. Removal keeps configuration files (`remove`, never `purge`): recoverable. A package
 * or version that does not exist fails permanently; a network or lock problem is transient.
 */
import type { PackageResource } from "../../model/generated.js";
import type { Applied, Driver, Plan } from "../driver.js";
import { runEvidence } from "../evidence.js";
import { permanent, type ResourceFailure, transient } from "../failure.js";
import type { RunResult } from "../runner.js";
import { runTool } from "../tools.js";

/** A package as the dpkg database has it. */
export interface PackageObservation {
  installed: boolean;
  version?: string;
  /** dpkg's status abbreviation, e.g. `ii` (installed) or `rc` (removed, configuration kept). */
  status?: string;
}

const INSTALL_HINT = "the package resource needs a Debian-based host (dpkg and apt)";

/** Reads the dpkg status line format `<abbrev>\t<version>`. Pure. */
export function parseDpkgQuery(stdout: string): PackageObservation {
  const [abbrev = "", version = ""] = stdout.replace(/\n$/, "").split("\t");
  const status = abbrev.trim();
  if (status.startsWith("ii") || status.startsWith("hi")) return { installed: true, version, status };
  return { installed: false, ...(status ? { status } : {}) };
}

/** Classifies a failed apt-get run by what it printed. Pure. */
export function aptFailure(name: string, result: RunResult): ResourceFailure {
  const output = `${result.stdout}\n${result.stderr}`;
  const evidence = runEvidence(result);
  if (
    /Unable to locate package|has no installation candidate|Version '[^']*' for '[^']*' was not found|No packages found/i.test(
      output,
    )
  )
    return permanent(
      "PackageNotFound",
      `package ${name} (or the requested version) is not available from the configured sources`,
      evidence,
    );
  if (/Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock/i.test(output))
    return transient("PackageManagerLocked", "another package manager holds the dpkg lock", evidence);
  if (
    /Temporary failure resolving|Failed to fetch|Could not resolve|Could not connect|Connection failed|Unable to connect|Network is unreachable/i.test(
      output,
    )
  )
    return transient("NetworkError", `apt-get could not reach the package sources for ${name}`, evidence);
  if (result.timedOut) return transient("CommandTimedOut", `apt-get for ${name} timed out`, evidence);
  return transient("PackageManagerFailed", `apt-get for ${name} exited with ${result.exitCode}`, evidence);
}

/** The `package` driver. */
export const packageDriver: Driver<PackageResource, PackageObservation> = {
  kind: "package",

  async observe(resource, ctx) {
    const result = await runTool(
      ctx,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format, not a template.
      ["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\t${Version}\n", resource.name],
      INSTALL_HINT,
      { timeoutMs: 30_000 },
    );
    // Exit 1: "no packages found matching": never installed.
    if (result.exitCode === 1) return { installed: false };
    if (result.exitCode !== 0)
      throw transient(
        "PackageDatabaseUnreadable",
        `dpkg-query failed for ${resource.name}`,
        runEvidence(result),
      );
    return parseDpkgQuery(result.stdout);
  },

  plan(resource, observed): Plan {
    if (resource.ensure === "absent")
      return observed.installed
        ? { action: "remove", diff: [`installed ${observed.version} → absent`] }
        : { action: "none", diff: [] };
    if (!observed.installed)
      return { action: "create", diff: [`not installed → ${resource.version ?? "installed"}`] };
    if (resource.version !== undefined && resource.version !== observed.version)
      return { action: "update", diff: [`version ${observed.version} → ${resource.version}`] };
    return { action: "none", diff: [] };
  },

  async apply(resource, plan, _observed, ctx): Promise<Applied> {
    const options = (ctx.tools.aptOptions ?? []).flatMap((option) => ["-o", option]);
    const env = { ...ctx.env, DEBIAN_FRONTEND: "noninteractive" };
    if (plan.action === "remove") {
      const result = await runTool(
        ctx,
        ["apt-get", "remove", "-y", "-q", ...options, resource.name],
        INSTALL_HINT,
        {
          env,
          timeoutMs: 15 * 60_000,
        },
      );
      if (result.exitCode !== 0) throw aptFailure(resource.name, result);
      return { action: "removed", message: "configuration files kept (apt-get remove, not purge)" };
    }
    const spec = resource.version !== undefined ? `${resource.name}=${resource.version}` : resource.name;
    const argv = ["apt-get", "install", "-y", "-q", "--no-install-recommends", ...options];
    if (resource.version !== undefined) argv.push("--allow-downgrades");
    const result = await runTool(ctx, [...argv, spec], INSTALL_HINT, { env, timeoutMs: 15 * 60_000 });
    if (result.exitCode !== 0) throw aptFailure(resource.name, result);
    return { action: plan.action === "create" ? "created" : "updated" };
  },
};
