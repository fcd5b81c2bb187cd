/**
 * One code path from bytes to a validated, rendered DesiredState: used by `steward validate`, the
 * syncer (on git trees) and the hub. Per-file work (decode, parse, schema validation) depends only on
 * the file's bytes and is cached by content id, so a sync re-reads only files whose blob changed.
 */
import { type Dirent, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import {
  analyzeDirectoryFiles,
  analyzeFile,
  type FileAnalysis,
  readBuffer,
  readWhole,
  unreadable,
} from "./analyze.js";
import { bytesHash } from "./canonical.js";
import type { Diagnostic } from "./diagnostics.js";
import { hasErrors, sortDiagnostics } from "./diagnostics.js";
import type {
  AnyDocument,
  AssignmentDocument,
  FleetDocument,
  NodeDocument,
  SourcedDocument,
} from "./documents.js";
import { EnvironmentError } from "./errors.js";
import type { Finding } from "./findings.js";
import { fleetSettings } from "./fleet.js";
import type { Assignment, Fleet } from "./generated.js";
import { placeAll } from "./placement.js";
import { type DesiredState, type MissingVariable, renderInstances, type SourceContent } from "./render.js";
import { quoteFix } from "./schema.js";
import { semanticFindings } from "./semantic.js";
import { locate, yamlText } from "./yaml.js";

/** A file of the repository: its path relative to the root (`/`-separated) and a content id if known. */
export interface RepoFile {
  path: string;
  /** Equal ids mean equal bytes (a git blob id). Absent: the file is never served from the cache. */
  id?: string;
}

/** Where a repository's files come from: a directory, or a git tree at some commit. */
export interface RepoSource {
  files(): Promise<RepoFile[]> | RepoFile[];
  read(file: RepoFile): Promise<Uint8Array> | Uint8Array;
  /**
   * The directory the files are plain files of, when they are (not a git tree): the loader may then
   * read and analyse them on a second thread as well.
   */
  directory?: string;
}

export type { FileAnalysis } from "./analyze.js";
export { analyzeFile } from "./analyze.js";

/** Cache of file analyses by content id; keep one per tracked repository. */
export type AnalysisCache = Map<string, FileAnalysis>;

export interface LoadResult {
  /** True when there is no error (warnings allowed). */
  ok: boolean;
  diagnostics: Diagnostic[];
  /** Present when `ok`. */
  desired?: DesiredState;
  filesRead: number;
  /** Text of a line of a file, for printing diagnostics with their source line. */
  lineOf(file: string, line: number): string | undefined;
}

export const FLEET_FILE = "steward.yaml";

const TEMPLATE_VARIABLES = [
  "node.name",
  "node.vars.KEY",
  "node.labels.KEY",
  "assignment.name",
  "assignment.version",
]
  .map((v) => `$\{${v}}`)
  .join(", ");

function isYaml(path: string): boolean {
  return path.endsWith(".yaml") || path.endsWith(".yml");
}

/** Dot-directories (`.github/`) and dot-files are not fleet documents. */
function hidden(path: string): boolean {
  return path.startsWith(".") || path.includes("/.");
}

/** `spec.ignore` of steward.yaml's Fleet document when it is a list of strings, even if the rest is invalid. */
function ignorePatterns(analysis: FileAnalysis): string[] {
  for (const doc of analysis.documents) {
    if (doc.kind !== "Fleet") continue;
    const ignore = (doc.value as { spec?: { ignore?: unknown } }).spec?.ignore;
    if (Array.isArray(ignore) && ignore.every((p) => typeof p === "string" && p.length > 0))
      return ignore as string[];
  }
  return [];
}

/** Loads, validates and renders a fleet repository. Never throws for bad content. */
export async function loadRepo(
  source: RepoSource,
  options: { cache?: AnalysisCache } = {},
): Promise<LoadResult> {
  const cache = options.cache;
  // Sorted, so "first" and "second" (duplicate names, conflicts) do not depend on directory order.
  const files = [...(await source.files())].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const byPath = new Map(files.map((f) => [f.path, f]));
  const texts = new Map<string, string | undefined>();
  const diagnostics: Diagnostic[] = [];
  const used = new Set<string>();

  // A cache hit stays synchronous: a warm sync of a large fleet is mostly hits.
  const cached = (file: RepoFile): FileAnalysis | undefined => {
    used.add(file.id ?? "");
    return file.id ? cache?.get(file.id) : undefined;
  };
  const analyze = async (file: RepoFile): Promise<FileAnalysis> => {
    let bytes: Uint8Array;
    try {
      bytes = await source.read(file);
    } catch (error) {
      return unreadable(error);
    }
    const analysis = analyzeFile(bytes);
    if (file.id && cache) cache.set(file.id, analysis);
    return analysis;
  };

  // steward.yaml first: it says which files to ignore.
  const fleetFile = byPath.get(FLEET_FILE);
  let ignore: string[] = [];
  const analyses = new Map<string, FileAnalysis>();
  if (fleetFile) {
    const analysis = cached(fleetFile) ?? (await analyze(fleetFile));
    analyses.set(FLEET_FILE, analysis);
    ignore = ignorePatterns(analysis);
  }
  // picomatch is loaded only for a repository that ignores something.
  const ignored =
    ignore.length > 0
      ? (createRequire(import.meta.url)("picomatch") as typeof import("picomatch"))(ignore, { dot: true })
      : () => false;
  const candidates = files.filter(
    (f) => f.path !== FLEET_FILE && isYaml(f.path) && !hidden(f.path) && !ignored(f.path),
  );
  // Plain files of a directory (nothing to serve from a cache) may be analysed on two threads.
  const cacheable = cache !== undefined && candidates.some((f) => f.id !== undefined);
  if (source.directory !== undefined && !cacheable) {
    const paths = candidates.map((f) => f.path);
    const analysed = await analyzeDirectoryFiles(source.directory, paths);
    for (const [i, path] of paths.entries()) analyses.set(path, analysed[i]!);
  } else for (const file of candidates) analyses.set(file.path, cached(file) ?? (await analyze(file)));

  // Files referenced by `source:` are content, not documents, even when they are YAML.
  const sourcePaths = new Set<string>();
  for (const analysis of analyses.values())
    for (const doc of analysis.documents)
      if (doc.kind === "Assignment" && doc.findings.length === 0)
        for (const resource of (doc.value as Assignment).spec.resources)
          if ("source" in resource && resource.source) sourcePaths.add(resource.source);

  // The text of a file with a diagnostic, for its position and source line. A file analysed on the
  // other thread comes without its text, and is read again here.
  const textOf = (path: string): string | undefined => {
    if (texts.has(path)) return texts.get(path);
    let text = analyses.get(path)?.parsed.text;
    const file = byPath.get(path);
    if (text === undefined && file) {
      try {
        const bytes = source.read(file);
        if (bytes instanceof Promise) bytes.catch(() => {});
        else text = yamlText(bytes);
      } catch {
        // Unreadable now: the diagnostic keeps its file and loses its position.
      }
    }
    texts.set(path, text);
    return text;
  };
  const documents: AnyDocument[] = [];
  const push = (document: SourcedDocument<unknown>, finding: Finding) => {
    const text = textOf(document.file);
    const pos =
      text !== undefined ? locate(text, document.index, finding.path, finding.key) : { line: 1, column: 1 };
    const diagnostic: Diagnostic = {
      severity: finding.severity,
      code: finding.code,
      file: document.file,
      line: pos.line,
      column: pos.column,
      message: finding.message,
    };
    if (finding.fix) diagnostic.fix = finding.fix;
    if (finding.unquoted !== undefined && text !== undefined) {
      const raw = rawScalar(text, pos.line, pos.column);
      if (raw) diagnostic.fix = quoteFix(finding.path, finding.unquoted, raw);
    }
    diagnostics.push(diagnostic);
  };
  for (const [path, analysis] of analyses) {
    if (sourcePaths.has(path) && path !== FLEET_FILE) continue;
    for (const problem of analysis.parsed.problems) diagnostics.push({ ...problem, file: path });
    const fileDocuments = documentsOf(analysis, path, cache !== undefined);
    for (let i = 0; i < fileDocuments.length; i++) {
      const document = fileDocuments[i]!;
      documents.push(document);
      for (const finding of analysis.documents[i]!.findings) push(document, finding);
    }
  }

  const nodes = new Map<string, NodeDocument>();
  const assignments = new Map<string, AssignmentDocument>();
  const invalidNames = new Set<string>();
  let fleetDocument: FleetDocument | undefined;
  for (const doc of documents) {
    if (!doc.kind) continue;
    if (!doc.valid) {
      if (doc.name) invalidNames.add(`${doc.kind}/${doc.name}`);
      continue;
    }
    if (doc.kind === "Node" && !nodes.has(doc.name!)) nodes.set(doc.name!, doc as NodeDocument);
    else if (doc.kind === "Assignment" && !assignments.has(doc.name!))
      assignments.set(doc.name!, doc as AssignmentDocument);
    else if (doc.kind === "Fleet" && doc.file === FLEET_FILE && !fleetDocument)
      fleetDocument = doc as FleetDocument;
  }
  const sortedNodes = sortedByName(nodes);
  const sortedAssignments = sortedByName(assignments);
  const placements = placeAll(
    [...sortedAssignments.values()].map((doc) => doc.value),
    sortedNodes,
  );
  for (const { document, finding } of semanticFindings({
    documents,
    nodes: sortedNodes,
    assignments: sortedAssignments,
    invalidNames,
    exists: (path) => byPath.has(path),
    placements,
  }))
    push(document, finding);

  // Drop cache entries no longer in the tree, so the cache tracks the repo, not its history.
  if (cache) for (const id of cache.keys()) if (!used.has(id)) cache.delete(id);

  const sorted = sortDiagnostics(diagnostics);
  const lines = new Map<string, string[]>();
  const lineOf = (file: string, line: number) => {
    let list = lines.get(file);
    if (!list) {
      const text = textOf(file);
      if (text === undefined) return undefined;
      list = text.split(/\r?\n/);
      lines.set(file, list);
    }
    return list[line - 1];
  };
  const result: LoadResult = {
    ok: !hasErrors(sorted),
    diagnostics: sorted,
    filesRead: analyses.size,
    lineOf,
  };
  if (!result.ok) return result;

  const fleet = fleetSettings((fleetDocument?.value as Fleet | undefined)?.spec);
  const sources = new Map<string, SourceContent>();
  let unreadableSources = false;
  for (const path of sourcePaths) {
    const file = byPath.get(path);
    if (!file) continue;
    let bytes: Uint8Array;
    try {
      bytes = await source.read(file);
    } catch (error) {
      diagnostics.push({ ...unreadable(error).parsed.problems[0]!, file: path });
      unreadableSources = true;
      continue;
    }
    sources.set(path, { id: file.id ?? bytesHash(bytes), bytes });
  }
  if (unreadableSources) return { ...result, ok: false, diagnostics: sortDiagnostics(diagnostics) };
  const missing: MissingVariable[] = [];
  const instances = renderInstances(fleet, sortedNodes, sortedAssignments, sources, missing, placements);
  if (missing.length > 0) {
    const reported = new Set<string>();
    for (const { assignment, node, path, variable } of missing) {
      const id = `${assignment.file}|${path.join("/")}|${variable}`;
      if (reported.has(id)) continue;
      reported.add(id);
      push(assignment, templateFinding(assignment.value.metadata.name, node, path, variable));
    }
    return { ...result, ok: false, diagnostics: sortDiagnostics(diagnostics) };
  }
  result.desired = { fleet, nodes: sortedNodes, assignments: sortedAssignments, instances };
  return result;
}

/** The plain scalar written at line:column of `text` (`1.10`, `0o644`), if there is one. */
function rawScalar(text: string, line: number, column: number): string | undefined {
  let start = 0;
  for (let i = 1; i < line; i++) {
    start = text.indexOf("\n", start) + 1;
    if (start === 0) return undefined;
  }
  return /^[^\s,\]}#"']+/.exec(text.slice(start + column - 1, start + column + 99))?.[0];
}

/** Why a `${...}` reference has no value, and what to do about it. */
function templateFinding(
  assignment: string,
  node: string,
  path: (string | number)[],
  variable: string,
): Finding {
  const finding = { severity: "error", code: "template/undefined", path } as const;
  const key = /^node\.(vars|labels)\.(.+)$/.exec(variable);
  if (key)
    return {
      ...finding,
      message: `\${${variable}} has no value on node "${node}"`,
      fix: `add ${key[2]} under ${key[1] === "vars" ? "spec.vars" : "metadata.labels"} of node "${node}", or write $\${...} for a literal \${`,
    };
  if (variable === "assignment.version")
    return {
      ...finding,
      message: `\${assignment.version} has no value: assignment "${assignment}" sets no spec.version`,
      fix: "set spec.version, or write $${...} for a literal ${",
    };
  return {
    ...finding,
    message: `\${${variable}} is not a template variable`,
    fix: `use one of ${TEMPLATE_VARIABLES}, or write $\${...} for a literal \${`,
  };
}

function sortedByName<T>(map: Map<string, T>): Map<string, T> {
  let previous: string | undefined;
  let sorted = true;
  for (const key of map.keys()) {
    if (previous !== undefined && previous > key) {
      sorted = false;
      break;
    }
    previous = key;
  }
  // Files are listed in path order, so names usually arrive sorted already.
  if (sorted) return map;
  return new Map([...map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * The documents of a file at a path; with a cache (a long-lived loader) they are kept with the
 * analysis, so their identity survives a sync.
 */
const fileDocuments = new WeakMap<FileAnalysis, { path: string; documents: AnyDocument[] }>();

function documentsOf(analysis: FileAnalysis, path: string, remember: boolean): AnyDocument[] {
  const known = remember ? fileDocuments.get(analysis) : undefined;
  if (known?.path === path) return known.documents;
  // Every document gets the same shape (kind and name present, maybe undefined): the checks read
  // these fields on thousands of documents, and one shape keeps those reads fast.
  const documents = analysis.documents.map(
    (doc): AnyDocument => ({
      file: path,
      index: doc.index,
      value: doc.value,
      valid: doc.findings.length === 0,
      kind: doc.kind || undefined,
      name: doc.name || undefined,
    }),
  );
  if (remember) fileDocuments.set(analysis, { path, documents });
  return documents;
}

/** A RepoSource over a directory: every file below it, skipping dot-directories like .git. */
export function directorySource(root: string): RepoSource {
  const scratch = readBuffer();
  return {
    directory: root,
    files() {
      const out: RepoFile[] = [];
      const walk = (dir: string, prefix: string) => {
        let entries: Dirent[];
        try {
          entries = readdirSync(dir, { withFileTypes: true });
        } catch (error) {
          const reason = (error as NodeJS.ErrnoException).code ?? String(error);
          throw new EnvironmentError(
            `cannot read directory ${dir} (${reason}): make it readable, or list it under ignore:`,
            {
              cause: error,
            },
          );
        }
        for (const entry of entries) {
          const rel = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
          if (entry.isDirectory()) {
            if (!entry.name.startsWith(".") && entry.name !== "node_modules")
              walk(join(dir, entry.name), rel);
          } else if (entry.isFile()) out.push({ path: rel });
        }
      };
      walk(root, "");
      return out;
    },
    read(file) {
      return readWhole(join(root, file.path), scratch);
    },
  };
}
