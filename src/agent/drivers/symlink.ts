/**
 * `symlink`: a link at `path` to `target`. The target must stay inside the node's roots (an absolute
 * target is mapped under `--root` like any path; a relative one is checked where it lands). The link
 * is replaced atomically (a new link under a temporary name, renamed over the old one).
 */
import { readlinkSync, renameSync, symlinkSync, unlinkSync } from "node:fs";
import { posix } from "node:path";
import type { SymlinkResource } from "../../model/generated.js";
import type { Applied, Driver, DriverContext, Plan } from "../driver.js";
import { permanent } from "../failure.js";
import {
  absentPlan,
  lstatOrUndefined,
  type NodeType,
  removeToTrash,
  typeConflict,
  typeOf,
} from "../fsnode.js";
import { createTemporary, settleTemporary } from "../temporary.js";

/** What is at a symlink resource's path. */
export interface SymlinkObservation {
  exists: boolean;
  type?: NodeType;
  /** Where the link points now (as written in the link). */
  target?: string;
  /** What the link's text must be on this host (the declared target, mapped under `--root`). */
  wanted: string;
}

/** The link text for a declared target on this host, refusing targets that leave the node's roots. */
function linkText(resource: SymlinkResource, ctx: DriverContext): string {
  const target = resource.target;
  if (target.startsWith("/")) {
    ctx.paths.confined(target);
    return ctx.paths.host(target);
  }
  const landing = posix.normalize(posix.join(posix.dirname(resource.path), target));
  try {
    ctx.paths.confined(landing);
  } catch {
    throw permanent(
      "TargetOutsideRoots",
      `symlink ${resource.path} → ${target} lands on ${landing}, outside the node's roots (${ctx.paths.roots.join(", ")})`,
    );
  }
  return target;
}

/** The `symlink` driver. */
export const symlinkDriver: Driver<SymlinkResource, SymlinkObservation, SymlinkObservation> = {
  kind: "symlink",

  async observe(resource, ctx) {
    const host = ctx.paths.confined(resource.path);
    const wanted = linkText(resource, ctx);
    const stats = lstatOrUndefined(host);
    if (!stats) return { exists: false, wanted };
    const type = typeOf(stats);
    if (type !== "symlink") return { exists: true, type, wanted };
    return { exists: true, type, target: readlinkSync(host), wanted };
  },

  plan(resource, observed): Plan {
    if (resource.ensure === "absent")
      return absentPlan(resource.path, observed, ["symlink"], `link → ${observed.target}`);
    if (!observed.exists) return { action: "create", diff: [`absent → link to ${resource.target}`] };
    if (observed.type !== "symlink")
      return { action: "update", diff: [], conflict: typeConflict(resource.path, observed.type!, "symlink") };
    if (observed.target !== observed.wanted)
      return { action: "update", diff: [`target ${observed.target} → ${observed.wanted}`] };
    return { action: "none", diff: [] };
  },

  async apply(resource, plan, observed, ctx): Promise<Applied> {
    const host = ctx.paths.confined(resource.path);
    if (plan.action === "remove") return removeToTrash(host, resource.path, ctx);
    ctx.paths.ensureParent(host);
    replaceLink(host, observed.wanted);
    ctx.dirty.add(posix.dirname(host));
    return { action: observed.exists ? "updated" : "created" };
  },

  async capture(_resource, observed) {
    return observed;
  },

  async restore(resource, before, ctx) {
    const host = ctx.paths.confined(resource.path);
    if (!before.exists) unlinkSync(host);
    else if (before.type === "symlink" && before.target !== undefined) replaceLink(host, before.target);
    ctx.dirty.add(posix.dirname(host));
  },
};

function replaceLink(host: string, text: string): void {
  const { temporary: tmp } = createTemporary(host, "link", (name) => symlinkSync(text, name));
  try {
    renameSync(tmp, host);
  } catch (error) {
    unlinkSync(tmp);
    throw error;
  } finally {
    settleTemporary(tmp);
  }
}
