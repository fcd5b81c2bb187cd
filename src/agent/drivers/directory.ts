/**
 * `directory`: a directory (created with its parents), with mode and ownership. `ensure: absent`
 * moves the whole directory to the state directory's trash, recoverable. Anything else at the path
 * is a conflict for a person.
 */
import { chmodSync, chownSync, mkdirSync, rmdirSync } from "node:fs";
import { posix } from "node:path";
import type { DirectoryResource } from "../../model/generated.js";
import type { Applied, Driver, Plan } from "../driver.js";
import {
  absentPlan,
  applyOwnership,
  lstatOrUndefined,
  type NodeType,
  type Ownership,
  ownershipDiff,
  ownershipOf,
  removeToTrash,
  targetOwnership,
  typeConflict,
  typeOf,
} from "../fsnode.js";

/** What is at a directory resource's path. */
export interface DirectoryObservation {
  exists: boolean;
  type?: NodeType;
  ownership?: Ownership;
}

/** The `directory` driver. */
export const directoryDriver: Driver<DirectoryResource, DirectoryObservation, DirectoryObservation> = {
  kind: "directory",

  async observe(resource, ctx) {
    const stats = lstatOrUndefined(ctx.paths.confined(resource.path));
    if (!stats) return { exists: false };
    const type = typeOf(stats);
    return type === "directory"
      ? { exists: true, type, ownership: ownershipOf(stats) }
      : { exists: true, type };
  },

  plan(resource, observed): Plan {
    if (resource.ensure === "absent") return absentPlan(resource.path, observed, ["directory"], "present");
    if (!observed.exists) return { action: "create", diff: ["absent → directory"] };
    if (observed.type !== "directory")
      return {
        action: "update",
        diff: [],
        conflict: typeConflict(resource.path, observed.type!, "directory"),
      };
    const diff = ownershipDiff(resource, observed.ownership!);
    return diff.length === 0 ? { action: "none", diff } : { action: "update", diff };
  },

  async apply(resource, plan, observed, ctx): Promise<Applied> {
    const host = ctx.paths.confined(resource.path);
    if (plan.action === "remove") return removeToTrash(host, resource.path, ctx);
    if (!observed.exists) {
      ctx.paths.ensureParent(host);
      const target = targetOwnership(resource, undefined, 0o755);
      mkdirSync(host, { mode: target.mode });
      ctx.paths.forget(host);
      // mkdir's mode is narrowed by the umask; the declared mode is exact.
      chmodSync(host, target.mode);
      if (target.uid !== undefined || target.gid !== undefined)
        chownSync(host, target.uid ?? -1, target.gid ?? -1);
      ctx.dirty.add(posix.dirname(host));
      return { action: "created" };
    }
    applyOwnership(host, resource, observed.ownership);
    return { action: "updated" };
  },

  async capture(_resource, observed) {
    return observed;
  },

  async restore(resource, before, ctx) {
    const host = ctx.paths.confined(resource.path);
    if (!before.exists) {
      // Created by this attempt: removed again only if still empty (never destroys content).
      try {
        rmdirSync(host);
      } catch {
        // Not empty: something else wrote into it; leave it.
      }
      ctx.paths.forget(host);
      return;
    }
    if (before.ownership && lstatOrUndefined(host)) {
      chownSync(host, before.ownership.uid, before.ownership.gid);
      chmodSync(host, Number.parseInt(before.ownership.mode, 8));
    }
  },
};
