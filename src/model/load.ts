/**
 * One code path from bytes to a validated, rendered DesiredState: used by `steward validate`, the
 * syncer (on git trees) and the hub. Per-file work (decode, parse, schema validation) depends only on
 * the file's bytes and is cached by content id, so a sync re-reads only files whose blob changed.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import picomatch from "picomatch";
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
import type { Finding } from "./findings.js";
import { fleetSettings } from "./fleet.js";
import type { Assignment, Fleet } from "./generated.js";
import { type DesiredState, type MissingVariable, renderInstances, type SourceContent } from "./render.js";
import { type DocumentKind, validateDocument } from "./schema.js";
import { semanticFindings } from "./semantic.js";
import { locate, type ParsedFile, parseYamlFile } from "./yaml.js";

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
}

/** What one file's bytes say on their own, independent of its path and of other files. */
export interface FileAnalysis {
  parsed: ParsedFile;
  documents: { index: number; value: unknown; kind?: DocumentKind; name?: string; findings: Finding[] }[];
}

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

function inDotDirectory(path: string): boolean {
  const directory = path.slice(0, path.lastIndexOf("/") + 1);
  return directory.startsWith(".") || directory.includes("/.");
}

/** Analyses a file's bytes: parse, then validate each document against its kind's schema. */
export function analyzeFile(bytes: Uint8Array): FileAnalysis {
  const parsed = parseYamlFile(bytes);
  const documents = parsed.documents.map(({ index, value }) => {
    const { kind, findings } = validateDocument(value);
    const name = (value as { metadata?: { name?: unknown } })?.metadata?.name;
    return { index, value, kind, name: typeof name === "string" ? name : undefined, findings };
  });
  return { parsed, documents } as FileAnalysis;
}

/** Loads, validates and renders a fleet repository. Never throws for bad content. */
export async function loadRepo(
  source: RepoSource,
  options: { cache?: AnalysisCache } = {},
): Promise<LoadResult> {
  const cache = options.cache;
  const files = await source.files();
  // Built on first use: a fleet without `source:` files never needs it.
  let byPathIndex: Map<string, RepoFile> | undefined;
  const byPath = () => {
    if (!byPathIndex) {
      byPathIndex = new Map();
      for (const file of files) byPathIndex.set(file.path, file);
    }
    return byPathIndex;
  };
  const texts = new Map<string, string>();
  const diagnostics: Diagnostic[] = [];
  const used = new Set<string>();

  const analyze = async (file: RepoFile): Promise<FileAnalysis> => {
    const analysis = analyzeFile(await source.read(file));
    if (file.id && cache) cache.set(file.id, analysis);
    return analysis;
  };
  // A cache hit stays synchronous: a warm sync of a large fleet is mostly hits.
  const cached = (file: RepoFile): FileAnalysis | undefined => {
    used.add(file.id ?? "");
    return file.id ? cache?.get(file.id) : undefined;
  };

  // steward.yaml first: it says which files to ignore.
  const fleetFile = files.find((f) => f.path === FLEET_FILE);
  let ignore: string[] = [];
  // A list (not a map) in file order: a lookup by path is needed only for a file with a diagnostic.
  const analyses: { path: string; analysis: FileAnalysis }[] = [];
  if (fleetFile) {
    const analysis = cached(fleetFile) ?? (await analyze(fleetFile));
    analyses.push({ path: FLEET_FILE, analysis });
    const fleetDoc = analysis.documents.find((d) => d.kind === "Fleet" && d.findings.length === 0);
    ignore = (fleetDoc?.value as Fleet | undefined)?.spec?.ignore ?? [];
  }
  const ignored = ignore.length > 0 ? picomatch(ignore, { dot: true }) : () => false;
  const candidates = files.filter(
    (f) =>
      f.path !== FLEET_FILE &&
      isYaml(f.path) &&
      !inDotDirectory(f.path) &&
      !f.path.startsWith(".") &&
      !ignored(f.path),
  );
  for (const file of candidates)
    analyses.push({ path: file.path, analysis: cached(file) ?? (await analyze(file)) });

  // Files referenced by `source:` are content, not documents, even when they are YAML.
  const sourcePaths = new Set<string>();
  for (const { analysis } of analyses)
    for (const doc of analysis.documents)
      if (doc.kind === "Assignment" && doc.findings.length === 0)
        for (const resource of (doc.value as Assignment).spec.resources)
          if ("source" in resource && resource.source) sourcePaths.add(resource.source);

  const documents: AnyDocument[] = [];
  let analysisByPath: Map<string, FileAnalysis> | undefined;
  const push = (document: SourcedDocument<unknown>, finding: Finding) => {
    analysisByPath ??= new Map(analyses.map((a) => [a.path, a.analysis]));
    const text = analysisByPath.get(document.file)?.parsed.text;
    const pos =
      text !== undefined ? locate(text, document.index, finding.path, finding.key) : { line: 0, column: 0 };
    if (text !== undefined) texts.set(document.file, text);
    const diagnostic: Diagnostic = {
      severity: finding.severity,
      code: finding.code,
      file: document.file,
      line: pos.line,
      column: pos.column,
      message: finding.message,
    };
    if (finding.fix) diagnostic.fix = finding.fix;
    diagnostics.push(diagnostic);
  };
  for (const { path, analysis } of analyses) {
    if (sourcePaths.has(path) && path !== FLEET_FILE) continue;
    for (const problem of analysis.parsed.problems) {
      diagnostics.push({ ...problem, file: path });
      if (analysis.parsed.text !== undefined) texts.set(path, analysis.parsed.text);
    }
    const fileDocuments = documentsOf(analysis, path);
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
  for (const { document, finding } of semanticFindings({
    documents,
    nodes: sortedNodes,
    assignments: sortedAssignments,
    invalidNames,
    exists: (path) => byPath().has(path),
  }))
    push(document, finding);

  // Drop cache entries no longer in the tree, so the cache tracks the repo, not its history.
  if (cache) for (const id of cache.keys()) if (!used.has(id)) cache.delete(id);

  const sorted = sortDiagnostics(diagnostics);
  const lineOf = (file: string, line: number) => texts.get(file)?.split("\n")[line - 1];
  const result: LoadResult = {
    ok: !hasErrors(sorted),
    diagnostics: sorted,
    filesRead: analyses.length,
    lineOf,
  };
  if (!result.ok) return result;

  const fleet = fleetSettings((fleetDocument?.value as Fleet | undefined)?.spec);
  const sources = new Map<string, SourceContent>();
  for (const path of sourcePaths) {
    const file = byPath().get(path);
    if (!file) continue;
    const bytes = await source.read(file);
    sources.set(path, { id: file.id ?? bytesHash(bytes), bytes });
  }
  const missing: MissingVariable[] = [];
  const instances = renderInstances(fleet, sortedNodes, sortedAssignments, sources, missing);
  if (missing.length > 0) {
    const reported = new Set<string>();
    for (const { assignment, node, path, variable } of missing) {
      const id = `${assignment.file}|${path.join("/")}|${variable}`;
      if (reported.has(id)) continue;
      reported.add(id);
      push(assignment, {
        severity: "error",
        code: "template/undefined",
        path,
        message: `\${${variable}} has no value on node "${node}"`,
        fix: variable.startsWith("node.vars.")
          ? `add ${variable.slice("node.vars.".length)} under spec.vars of node "${node}", or write $\${...} for a literal`
          : `use one of ${TEMPLATE_VARIABLES}`,
      });
    }
    return { ...result, ok: false, diagnostics: sortDiagnostics(diagnostics) };
  }
  result.desired = { fleet, nodes: sortedNodes, assignments: sortedAssignments, instances };
  return result;
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

/** The documents of a file at a path; kept with the analysis so their identity survives a sync. */
const fileDocuments = new WeakMap<FileAnalysis, { path: string; documents: AnyDocument[] }>();

function documentsOf(analysis: FileAnalysis, path: string): AnyDocument[] {
  const known = fileDocuments.get(analysis);
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
  fileDocuments.set(analysis, { path, documents });
  return documents;
}

/** A RepoSource over a directory: every file below it, skipping dot-directories like .git. */
export function directorySource(root: string): RepoSource {
  return {
    files() {
      const out: RepoFile[] = [];
      const walk = (dir: string, prefix: string) => {
        for (const entry of readdirSync(dir, { withFileTypes: true })) {
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
      return readFileSync(join(root, file.path));
    },
  };
}
