/**
 * Whether a local directory is a fleet repository, for the commands that would otherwise take any
 * git repository as one (`steward hub` in the directory it starts in). A fleet repository is the
 * top of a git working tree (or a bare repository) with `steward.yaml` at its root, or with
 * `nodes/` or `assignments/` holding a YAML file that is a steward document. Documents elsewhere
 * are read by the syncer too, but only these places say that the repository is meant as a fleet:
 * steward's own source tree has steward documents under `examples/`, and is no fleet.
 */
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { FLEET_FILE } from "../model/documents.js";

/** The directories whose steward documents make a repository a fleet repository. */
export const FLEET_DIRECTORIES = ["nodes", "assignments"] as const;

/** Files looked at, at most, before deciding that a directory holds no steward document. */
const MAX_FILES = 200;
/** Bytes read of each: `apiVersion` is the first lines of a document. */
const HEAD_BYTES = 16 * 1024;
const STEWARD_DOCUMENT = /^apiVersion:\s*["']?steward\.dev\/v1["']?\s*(#.*)?$/m;

/** What `checkFleetRepository` found. */
export type FleetRepositoryCheck =
  | { ok: true; dir: string; evidence: string }
  | {
      ok: false;
      dir: string;
      reason: "missing" | "not-a-directory" | "not-git" | "not-top" | "no-documents";
      /** The top of the git working tree `dir` is in, when it is below one. */
      top?: string;
    };

/** True for a git working tree's top (`.git` there) or a bare repository. */
function isGitTop(dir: string): boolean {
  return existsSync(join(dir, ".git")) || (existsSync(join(dir, "HEAD")) && existsSync(join(dir, "objects")));
}

function isBare(dir: string): boolean {
  return !existsSync(join(dir, ".git"));
}

/** The first bytes of `file`, as text; empty when it cannot be read. */
function head(file: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, "r");
    const buffer = Buffer.alloc(HEAD_BYTES);
    return buffer.toString("utf8", 0, readSync(fd, buffer, 0, HEAD_BYTES, 0));
  } catch {
    return "";
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The first YAML file below `dir` (dot-entries skipped) that is a steward document, if any. */
function stewardDocumentIn(dir: string, budget: { files: number }): string | undefined {
  let entries: import("node:fs").Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return undefined;
  }
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (entry.name.startsWith(".") || budget.files <= 0) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const found = stewardDocumentIn(path, budget);
      if (found) return found;
    } else if (/\.ya?ml$/.test(entry.name)) {
      budget.files--;
      if (STEWARD_DOCUMENT.test(head(path))) return path;
    }
  }
  return undefined;
}

/**
 * Decides whether `dir` (absolute) is a fleet repository (see the module comment). A bare
 * repository has no working tree to look into and counts as one: the syncer checks its commits.
 */
export function checkFleetRepository(dir: string): FleetRepositoryCheck {
  if (!existsSync(dir)) return { ok: false, dir, reason: "missing" };
  if (!statSync(dir).isDirectory()) return { ok: false, dir, reason: "not-a-directory" };
  if (!isGitTop(dir)) {
    for (let above = dirname(dir); above !== dirname(above); above = dirname(above))
      if (existsSync(join(above, ".git"))) return { ok: false, dir, reason: "not-top", top: above };
    return { ok: false, dir, reason: "not-git" };
  }
  if (isBare(dir)) return { ok: true, dir, evidence: "a bare git repository" };
  if (existsSync(join(dir, FLEET_FILE))) return { ok: true, dir, evidence: FLEET_FILE };
  const budget = { files: MAX_FILES };
  for (const name of FLEET_DIRECTORIES) {
    const found = stewardDocumentIn(join(dir, name), budget);
    if (found) return { ok: true, dir, evidence: found.slice(dir.length + 1) };
  }
  return { ok: false, dir, reason: "no-documents" };
}
