import { posix } from "node:path";

const dotSegment = /(^|\/)\.\.?(\/|$)/;

/** True when a path has `.` or `..` segments: it is not canonical. */
export function hasDotSegments(path: string): boolean {
  return dotSegment.test(path);
}

/** True when `path` is `root` or below it. Both must be absolute and canonical. */
export function isInside(path: string, root: string): boolean {
  const length = root.length > 1 && root.endsWith("/") ? root.length - 1 : root.length;
  if (length === 1) return path.startsWith("/");
  // `path` starts with the root and the root ends there or at a `/` (so /srv does not contain /srv2).
  return (
    path.startsWith(length === root.length ? root : root.slice(0, length)) &&
    (path.length === length || path.charCodeAt(length) === 47)
  );
}

/** The first root that contains `path`, if any. */
export function containingRoot(path: string, roots: readonly string[]): string | undefined {
  // Most paths are canonical already; normalising only the others keeps this cheap per node.
  const normal = hasDotSegments(path) || path.includes("//") ? posix.normalize(path) : path;
  return roots.find((root) => isInside(normal, root));
}
