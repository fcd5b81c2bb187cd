import { posix } from "node:path";

/** True when an absolute path has `.` or `..` segments, doubled or trailing slashes: it is not canonical. */
export function hasDotSegments(path: string): boolean {
  return path.split("/").some((segment) => segment === ".." || segment === ".");
}

/** True when `path` is `root` or below it. Both must be absolute and canonical. */
export function isInside(path: string, root: string): boolean {
  const normalRoot = root.length > 1 && root.endsWith("/") ? root.slice(0, -1) : root;
  if (normalRoot === "/") return path.startsWith("/");
  return path === normalRoot || path.startsWith(`${normalRoot}/`);
}

/** The first root that contains `path`, if any. */
export function containingRoot(path: string, roots: readonly string[]): string | undefined {
  // Most paths are canonical already; normalising only the others keeps this cheap per node.
  const normal = hasDotSegments(path) || path.includes("//") ? posix.normalize(path) : path;
  return roots.find((root) => isInside(normal, root));
}
