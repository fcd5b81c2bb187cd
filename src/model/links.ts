/**
 * Symlinks in a fleet repository, one rule for a working directory and for a git tree (where a
 * link is a blob of mode 120000 holding its target): a link is followed only inside the
 * repository. A link that stays inside is read as what it leads to; one that leaves the
 * repository (an absolute target, a `..` above the root, a way into `.git`), dangles or loops is
 * a problem reported at the link's path. Targets are resolved component by component, through
 * further links, as the kernel does, so a `..` after a linked directory climbs from where that
 * link leads; both sources give the same answer for the same tree.
 *
 * Links whose own name steward never reads (dot-names, `node_modules`) are not followed, as the
 * listing does not enter such directories.
 */
import type { RepoFile } from "./load.js";

/** What is at a path of the repository (repository-relative, `/`-separated), not following a link there. */
export type RepoEntry =
  | { kind: "file"; id?: string | undefined }
  | { kind: "directory" | "other" | "missing" }
  | { kind: "link"; target: string };

/** A link that is not followed, and why: said at the link's path, with the fix. */
export interface LinkProblem {
  code: "file/symlink-outside" | "file/symlink-dangling" | "file/symlink-loop";
  message: string;
  fix: string;
}

/**
 * Where a link leads: the repository path of a file (with its content id, when the source has
 * one) or of a directory (`""` is the root), or the problem that stops it.
 */
export type LinkResolution =
  | { kind: "file"; real: string; id?: string | undefined }
  | { kind: "directory"; real: string }
  | { kind: "broken"; problem: LinkProblem };

/** What the link rules read of a repository: its entries, and what is listed below a directory. */
export interface LinkedTree {
  lookup(path: string): RepoEntry;
  /**
   * The regular files (at their real paths) and the links (their paths) below directory `dir`, as
   * the source lists its root: without entering directories steward does not read.
   */
  below(dir: string): { files: readonly RepoFile[]; links: readonly string[] };
}

/** As Linux's limit on links followed in one lookup (ELOOP). */
const MAX_LINKS_FOLLOWED = 40;

const quote = JSON.stringify;

/** Whether the listing reads a directory of this name (the same rule for directories and links). */
export function followedName(name: string): boolean {
  return !name.startsWith(".") && name !== "node_modules";
}

function parentOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(0, slash);
}

/** True when `path` is `dir` or below it (`""` is the root, above everything). */
function within(path: string, dir: string): boolean {
  return dir === "" || path === dir || path.startsWith(`${dir}/`);
}

function outside(
  link: string,
  target: string,
  via?: { link: string; target: string },
  where = "outside the repository",
): LinkProblem {
  const through = via ? ` (through the link ${quote(via.link)} → ${quote(via.target)})` : "";
  return {
    code: "file/symlink-outside",
    message: `symlink ${quote(link)} points to ${quote(target)}${through}, ${where}: steward does not follow links out of it`,
    fix: "put the file itself in the repository in place of the link, or remove the link",
  };
}

function dangling(link: string, target: string, missing: string): LinkProblem {
  const where = missing === link ? "" : ` (${quote(missing)} does not exist)`;
  return {
    code: "file/symlink-dangling",
    message: `symlink ${quote(link)} points to ${quote(target)}, which is not a file or directory of the repository${where}`,
    fix: "point the link at an existing file or directory of the repository, or remove it",
  };
}

function looping(link: string, target: string, closing?: { link: string; target: string }): LinkProblem {
  const how = closing
    ? `, and the link ${quote(closing.link)} → ${quote(closing.target)} below it leads back to a directory on the way: reading it would never end`
    : ": the links form a loop and never reach a file";
  return {
    code: "file/symlink-loop",
    message: `symlink ${quote(link)} points to ${quote(target)}${how}`,
    fix: "point the link at a file or directory that does not lead back to it, or remove it",
  };
}

/** `looping` for a directory link that contains itself. */
function containsItself(link: string, target: string): LinkProblem {
  return {
    code: "file/symlink-loop",
    message: `symlink ${quote(link)} points to ${quote(target)}, a directory that contains the link itself: reading it would never end`,
    fix: "point the link at a directory that does not contain it, or remove it",
  };
}

/** Resolves the link at `link` (its target read through `tree`). */
export function resolveLink(link: string, tree: LinkedTree): LinkResolution {
  const first = tree.lookup(link);
  if (first.kind !== "link") return { kind: "broken", problem: dangling(link, link, link) };
  const target = first.target;
  // The real directory reached so far, and what is left of the target to walk.
  const reached = link.split("/");
  reached.pop();
  let pending = target.split("/");
  let followed = 1;
  let via: { link: string; target: string } | undefined;
  let last: RepoEntry = { kind: "directory" };
  if (target.startsWith("/")) return { kind: "broken", problem: outside(link, target) };
  while (pending.length > 0) {
    const name = pending.shift()!;
    if (name === "" || name === ".") continue;
    if (name === "..") {
      if (reached.length === 0) return { kind: "broken", problem: outside(link, target, via) };
      reached.pop();
      last = { kind: "directory" };
      continue;
    }
    const path = reached.length === 0 ? name : `${reached.join("/")}/${name}`;
    // The repository's own metadata, in a working directory: never its content (a git tree has none).
    if (name === ".git")
      return { kind: "broken", problem: outside(link, target, via, "into .git, the repository's metadata") };
    const entry = tree.lookup(path);
    if (entry.kind === "link") {
      if (++followed > MAX_LINKS_FOLLOWED) return { kind: "broken", problem: looping(link, target) };
      via = { link: path, target: entry.target };
      if (entry.target.startsWith("/")) return { kind: "broken", problem: outside(link, target, via) };
      pending = [...entry.target.split("/"), ...pending];
      continue;
    }
    if (entry.kind === "missing") return { kind: "broken", problem: dangling(link, target, path) };
    // A file (or a device, a submodule) with more of the path to walk is not a directory.
    if (entry.kind !== "directory" && pending.length > 0)
      return { kind: "broken", problem: dangling(link, target, path) };
    reached.push(name);
    last = entry;
  }
  const real = reached.join("/");
  if (last.kind === "file") return { kind: "file", real, id: last.id };
  if (last.kind === "directory") return { kind: "directory", real };
  return { kind: "broken", problem: dangling(link, target, real) };
}

/**
 * The files links make appear, at the paths they are seen at: a link to a file is that file (with
 * `real`, its path in the repository); a link to a directory is every file below it, and links
 * there are followed in turn; a link that leaves the repository, dangles or loops is a file with
 * its `problem` (and, when seen below a linked directory, `real`: where the link itself is).
 * Work grows with the links and what they lead to, not with the repository.
 */
export function linkedFiles(links: readonly string[], tree: LinkedTree): RepoFile[] {
  const resolutions = new Map<string, LinkResolution>();
  const resolve = (link: string) => {
    let resolution = resolutions.get(link);
    if (!resolution) {
      resolution = resolveLink(link, tree);
      resolutions.set(link, resolution);
    }
    return resolution;
  };
  const targetOf = (link: string) => {
    const entry = tree.lookup(link);
    return entry.kind === "link" ? entry.target : "";
  };
  /**
   * The files below directory `real` seen at `seen`; `entered` are the real directories whose
   * listing this one is part of: a link leading back into one of them closes a loop, and is
   * returned instead.
   */
  const expand = (
    seen: string,
    real: string,
    entered: readonly string[],
  ): RepoFile[] | { closing: { link: string; target: string } } => {
    const out: RepoFile[] = [];
    const { files, links: inner } = tree.below(real);
    const at = (path: string) => seen + path.slice(real.length);
    for (const file of files) out.push(linkedFile(at(file.path), file.real ?? file.path, file.id));
    for (const link of inner) {
      if (!followedName(link.slice(link.lastIndexOf("/") + 1))) continue;
      const resolution = resolve(link);
      if (resolution.kind === "broken") out.push({ path: at(link), real: link, problem: resolution.problem });
      else if (resolution.kind === "file") out.push(linkedFile(at(link), resolution.real, resolution.id));
      else {
        const here = [...entered, parentOf(link)];
        if (here.some((dir) => within(dir, resolution.real)))
          return { closing: { link, target: targetOf(link) } };
        const below = expand(at(link), resolution.real, [...here, resolution.real]);
        if (!Array.isArray(below)) return below;
        for (const file of below) out.push(file);
      }
    }
    return out;
  };
  const out: RepoFile[] = [];
  for (const link of links) {
    if (!followedName(link.slice(link.lastIndexOf("/") + 1))) continue;
    const resolution = resolve(link);
    if (resolution.kind === "broken") out.push({ path: link, problem: resolution.problem });
    else if (resolution.kind === "file") out.push(linkedFile(link, resolution.real, resolution.id));
    else if (within(parentOf(link), resolution.real))
      out.push({ path: link, problem: containsItself(link, targetOf(link)) });
    else {
      const below = expand(link, resolution.real, [parentOf(link), resolution.real]);
      if (Array.isArray(below)) for (const file of below) out.push(file);
      else out.push({ path: link, problem: looping(link, targetOf(link), below.closing) });
    }
  }
  return out;
}

/** A file seen at `path` that is the file at `real`. */
function linkedFile(path: string, real: string, id: string | undefined): RepoFile {
  const file: RepoFile = { path, real };
  if (id !== undefined) file.id = id;
  return file;
}
