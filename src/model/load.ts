/**
 * One code path from bytes to a validated, rendered DesiredState: used by `steward validate`, the
 * syncer (on git trees) and the hub. Per-file work (decode, parse, schema validation) depends only on
 * the file's bytes and is cached by content id, so a sync re-reads only files whose blob changed.
 */
import { type Dirent, lstatSync, readdirSync, readlinkSync, type Stats } from "node:fs";
import { join } from "node:path";
import {
  analyzeDirectoryFiles,
  analyzeFile,
  type FileAnalysis,
  linkAnalysis,
  readBuffer,
  readWhole,
  unreadable,
} from "./analyze.js";
import { bundledOr } from "./bundled.js";
import { bytesHash } from "./canonical.js";
import type { Diagnostic } from "./diagnostics.js";
import { hasErrors, sortDiagnostics } from "./diagnostics.js";
import { type AnyDocument, FLEET_FILE, type FleetDocument, type SourcedDocument } from "./documents.js";
import { EnvironmentError } from "./errors.js";
import { secretValues } from "./facts.js";
import type { Finding } from "./findings.js";
import { fleetSettings } from "./fleet.js";
import type { Assignment } from "./generated.js";
import { followedName, type LinkedTree, type LinkProblem, linkedFiles, type RepoEntry } from "./links.js";
import { DeferredInstances, type DesiredState, Rendering, type SourceContent } from "./render.js";
import { quoteFix } from "./schema.js";
import { SecretChecks } from "./secret-checks.js";
import { FleetChecks } from "./semantic.js";
import { locate, yamlText } from "./yaml.js";

/** A file of the repository: its path relative to the root (`/`-separated) and a content id if known. */
export interface RepoFile {
  path: string;
  /** Equal ids mean equal bytes (a git blob id). Absent: the file is never served from the cache. */
  id?: string;
  /**
   * For a path seen through a symlink: the path of the file it is in the repository. Several
   * paths of one file are read as one: its documents count once.
   */
  real?: string;
  /** For a symlink that leaves the repository, dangles or loops: why it is not read. */
  problem?: LinkProblem;
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
  /**
   * The files that differ from those of `earlier` (a source an earlier load was given): by path,
   * the file now, or undefined where there is none any more. Undefined when this source cannot
   * tell; the loader then compares `files()` whole.
   */
  changesSince?(earlier: RepoSource): ReadonlyMap<string, RepoFile | undefined> | undefined;
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

export { FLEET_FILE } from "./documents.js";

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

/** A file the loader analysed (steward.yaml, and YAML files neither hidden nor ignored), as last loaded. */
interface FileEntry {
  path: string;
  id: string | undefined;
  analysis: FileAnalysis;
  /** `source:` paths named by its valid assignments: files read as content, not as documents. */
  sources: readonly string[];
  /** Whether its documents are fleet documents (it is not read by a `source:`). */
  member: boolean;
  /** Its documents, when a member. */
  documents: AnyDocument[];
  /** Its own diagnostics (parsing, schemas), when a member. */
  diagnostics: Diagnostic[];
}

/**
 * Repository files an analysis' valid assignments read as content: `source:` files and the secret
 * files of `{secret, key}` values (never documents, even when they are YAML).
 */
function sourcesOf(analysis: FileAnalysis): string[] {
  const out: string[] = [];
  for (const doc of analysis.documents)
    if (doc.kind === "Assignment" && doc.findings.length === 0)
      for (const resource of (doc.value as Assignment).spec.resources) {
        if ("source" in resource && resource.source) out.push(resource.source);
        for (const [, value] of secretValues(resource)) out.push(value.secret);
      }
  return out;
}

function byPath(a: RepoFile, b: RepoFile): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

/** The files sorted by path ("first" and "second" must not depend on listing order); the list itself when it is. */
function sortedFiles(files: readonly RepoFile[]): readonly RepoFile[] {
  for (let i = 1; i < files.length; i++)
    if (files[i - 1]!.path >= files[i]!.path) return [...files].sort(byPath);
  return files;
}

const notIgnored = () => false;

/**
 * What the last load of a repository found, so the next load works by difference: it takes what
 * changed from the source (`changesSince`: git trees compare by object id) or else compares the two
 * file lists, analyses the files that changed, and hands their documents' changes to FleetChecks
 * and Rendering. A first load is the same code with every file new.
 */
class LoadState {
  /** The files of the last load, by path. */
  private files = new Map<string, RepoFile>();
  /** The files of the last load seen through a symlink (with `real`), by path. */
  private linked = new Map<string, RepoFile>();
  /** Paths not analysed because another path of the same file is (see aliasesOf). */
  private aliases: ReadonlySet<string> = new Set();
  /** The source of the last load, for the next one's `changesSince`. */
  private source?: RepoSource;
  /** Counts loads, so a result knows whether the state still describes its revision. */
  private version = 0;
  /** The instances of the last load, if nobody asked for them yet. */
  private unrendered?: DeferredInstances;
  private readonly entries = new Map<string, FileEntry>();
  private ignore: string[] = [];
  private ignored: (path: string) => boolean = notIgnored;
  /** How many analysed files name each `source:` path. */
  private readonly sourceRefs = new Map<string, number>();
  /** Entries with diagnostics of their own. */
  private readonly flagged = new Set<FileEntry>();
  /** How many entries have each content id: the cache keeps the analyses of the repository's files only. */
  private readonly idRefs = new Map<string, number>();
  private readonly checks = new FleetChecks();
  private readonly rendering = new Rendering();
  private readonly secrets = new SecretChecks();
  private sources = new Map<string, SourceContent>();
  private fleetDocument?: FleetDocument;
  /** Located diagnostics of findings, for findings that survive a load unchanged. */
  private readonly located = new WeakMap<
    Finding,
    { document: SourcedDocument<unknown>; diagnostic: Diagnostic }
  >();
  busy = false;

  async load(source: RepoSource, cache: AnalysisCache | undefined, checkSecrets = true): Promise<LoadResult> {
    this.unrendered?.render();
    // What changed: files gone, and files new or with other content (no id: always read again);
    // `paths` are the files added or removed.
    const gone: string[] = [];
    const changed: RepoFile[] = [];
    const paths: string[] = [];
    const delta = this.source !== undefined ? source.changesSince?.(this.source) : undefined;
    let files: Map<string, RepoFile>;
    let linked: Map<string, RepoFile>;
    if (delta) {
      // Told by the source: the file map is changed where it changed, in place (a load that fails
      // from here on drops the whole state, see loadRepo).
      files = this.files;
      linked = this.linked;
      for (const [path, file] of delta) {
        const was = files.get(path);
        if (file?.real !== undefined) linked.set(path, file);
        else linked.delete(path);
        if (file === undefined) {
          if (!was) continue;
          files.delete(path);
          gone.push(path);
          paths.push(path);
          continue;
        }
        if (!was) paths.push(path);
        if (!was || was.id === undefined || was.id !== file.id) changed.push(file);
        files.set(path, file);
      }
      changed.sort(byPath);
    } else {
      const before = this.files;
      files = new Map();
      linked = new Map();
      for (const file of sortedFiles(await source.files())) {
        files.set(file.path, file);
        if (file.real !== undefined) linked.set(file.path, file);
      }
      for (const file of files.values()) {
        const was = before.get(file.path);
        if (!was) paths.push(file.path);
        if (!was || (was !== file && (was.id === undefined || was.id !== file.id))) changed.push(file);
      }
      if (before.size > 0)
        for (const path of before.keys())
          if (!files.has(path)) {
            gone.push(path);
            paths.push(path);
          }
    }

    const analyze = async (file: RepoFile): Promise<FileAnalysis> => {
      if (file.problem) return linkAnalysis(file.problem);
      const hit = file.id ? cache?.get(file.id) : undefined;
      if (hit) return hit;
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
    // Per path: its new analysis, or undefined when it is analysed no more.
    const analyses = new Map<string, Analysed | undefined>();
    for (const path of gone) if (this.entries.has(path)) analyses.set(path, undefined);
    const fleetFile = changed.find((file) => file.path === FLEET_FILE);
    let ignore = this.ignore;
    let ignored = this.ignored;
    if (fleetFile) {
      const analysis = await analyze(fleetFile);
      analyses.set(FLEET_FILE, { file: fleetFile, analysis });
      ignore = ignorePatterns(analysis);
    } else if (gone.includes(FLEET_FILE)) ignore = [];
    const toAnalyze: RepoFile[] = [];
    const ignoreChanged = ignore.join("\0") !== this.ignore.join("\0");
    // picomatch is loaded only for a repository that ignores something (with the free `require`
    // of bundles, so they inline it: see yaml() in yaml.ts).
    if (ignoreChanged)
      ignored =
        ignore.length > 0
          ? (bundledOr("picomatch", () => require("picomatch")) as typeof import("picomatch"))(ignore, {
              dot: true,
            })
          : notIgnored;
    // A symlink that is not followed is reported whatever its name; YAML files are read.
    const readable = (file: RepoFile) =>
      (file.problem !== undefined || isYaml(file.path)) && !hidden(file.path) && !ignored(file.path);
    const aliases = aliasesOf(files, linked, readable);
    const analysable = (file: RepoFile) => readable(file) && !aliases.has(file.path);
    if (ignoreChanged) {
      // Other ignore patterns: any file may come in or go out.
      const again = new Set(changed);
      for (const file of sortedFiles([...files.values()])) {
        if (file.path === FLEET_FILE) continue;
        if (analysable(file)) {
          if (again.has(file) || !this.entries.has(file.path)) toAnalyze.push(file);
        } else if (this.entries.has(file.path)) analyses.set(file.path, undefined);
      }
    } else {
      for (const file of changed) {
        if (file.path === FLEET_FILE) continue;
        if (analysable(file)) toAnalyze.push(file);
        else if (this.entries.has(file.path)) analyses.set(file.path, undefined);
      }
      // Paths that became, or stopped being, another path of a file read elsewhere.
      const flipped = [...aliases].filter((path) => !this.aliases.has(path));
      for (const path of this.aliases) if (!aliases.has(path)) flipped.push(path);
      if (flipped.length > 0) {
        const again = new Set(changed.map((file) => file.path));
        for (const path of flipped.sort()) {
          const file = files.get(path);
          if (!file || again.has(path) || path === FLEET_FILE) continue;
          if (analysable(file)) {
            if (!this.entries.has(path)) toAnalyze.push(file);
          } else if (this.entries.has(path)) analyses.set(path, undefined);
        }
        toAnalyze.sort(byPath);
      }
    }

    // Plain files of a directory (nothing to serve from a cache) may be analysed on two threads.
    const cacheable = cache !== undefined && toAnalyze.some((f) => f.id !== undefined);
    if (source.directory !== undefined && !cacheable && toAnalyze.length > 0) {
      // Read where each file is: a path seen through a link is read at the file it leads to.
      const list = toAnalyze.filter((f) => !f.problem).map((f) => f.real ?? f.path);
      const analysed = await analyzeDirectoryFiles(source.directory, list);
      let next = 0;
      for (const file of toAnalyze)
        analyses.set(file.path, {
          file,
          analysis: file.problem ? linkAnalysis(file.problem) : analysed[next++]!,
        });
    } else for (const file of toAnalyze) analyses.set(file.path, { file, analysis: await analyze(file) });

    // From here on the state is updated, without waiting for anything.
    this.files = files;
    this.linked = linked;
    this.aliases = aliases;
    this.source = source;
    const version = ++this.version;
    this.ignore = ignore;
    this.ignored = ignored;
    const documents = this.updateFiles(analyses, source, files, cache);
    const { all, assignments } = this.checks.update({
      ...documents,
      paths,
      exists: (path) => files.has(path),
      pendingSecrets: !checkSecrets,
    });
    this.rendering.invalidate(all, assignments);

    const texts = new Map<string, string | undefined>();
    const textOf = (path: string) => {
      if (!texts.has(path))
        texts.set(path, this.entries.get(path)?.analysis.parsed.text ?? readText(source, files, path));
      return texts.get(path);
    };
    const diagnostics: Diagnostic[] = [];
    for (const entry of this.flagged)
      for (const diagnostic of entry.diagnostics) diagnostics.push(diagnostic);
    for (const { document, finding } of this.checks.findings())
      diagnostics.push(this.locate(document, finding, textOf));
    const result = (ok: boolean): LoadResult => {
      const sorted = sortDiagnostics(diagnostics);
      // Texts of the files with a diagnostic now: a later load may change what this one read.
      for (const diagnostic of sorted) textOf(diagnostic.file);
      const lines = new Map<string, string[]>();
      // Files without a diagnostic are read from the files of this load while it is the last.
      const current = () => this.version === version;
      return {
        ok: ok && !hasErrors(sorted),
        diagnostics: sorted,
        filesRead: this.entries.size,
        lineOf(file, line) {
          let list = lines.get(file);
          if (!list) {
            const text = texts.has(file)
              ? texts.get(file)
              : current()
                ? readText(source, files, file)
                : undefined;
            if (text === undefined) return undefined;
            list = text.split(/\r?\n/);
            lines.set(file, list);
          }
          return list[line - 1];
        },
      };
    };
    if (hasErrors(diagnostics)) return result(false);

    const fleetDocument = this.checks.fleet;
    if (fleetDocument !== this.fleetDocument) {
      this.fleetDocument = fleetDocument;
      this.rendering.invalidate(true);
    }
    const fleet = fleetSettings(fleetDocument?.value.spec);
    if (!(await this.readSources(source, files, diagnostics))) return result(false);
    const secretFindings = !checkSecrets
      ? []
      : await this.secrets.check({
          assignments: this.checks.assignments,
          placements: this.checks.placements,
          nodes: this.checks.nodes,
          sources: this.sources,
          readFile: (path) => {
            const file = files.get(path);
            if (!file || file.problem) return undefined;
            // A file without an id (a working directory) is read each time: manifests are small.
            return { id: file.id ?? `${path}\0${version}`, bytes: () => source.read(file) };
          },
        });
    for (const { document, finding } of secretFindings)
      diagnostics.push(this.locate(document, finding, textOf));
    if (hasErrors(diagnostics)) return result(false);
    const declared = this.checks.assignments;
    const missing = this.rendering.check(declared, this.checks.placements);
    if (missing.length > 0) {
      const reported = new Set<string>();
      for (const { assignment, node, path, variable } of missing) {
        const id = `${assignment.file}|${path.join("/")}|${variable}`;
        if (reported.has(id)) continue;
        reported.add(id);
        const finding = templateFinding(assignment.value.metadata.name, node, path, variable);
        diagnostics.push(this.locate(assignment, finding, textOf));
      }
      return result(false);
    }
    const loaded = result(true);
    // Instances are rendered when first asked for (`steward validate` only counts them), and at
    // the latest when the next load starts, while the state still is this load's.
    const sources = this.sources;
    const instances = new DeferredInstances(this.rendering.size, () => {
      if (this.unrendered === instances) this.unrendered = undefined;
      return this.rendering.render(fleet, declared, this.checks.placements, sources);
    });
    this.unrendered = instances;
    loaded.desired = { fleet, nodes: this.checks.nodes, assignments: declared, instances };
    return loaded;
  }

  /**
   * Applies new analyses (undefined: no longer analysed) to the entries; returns the documents
   * that left and came, including those of files that a `source:` now reads, or reads no more.
   */
  private updateFiles(
    analyses: ReadonlyMap<string, Analysed | undefined>,
    source: RepoSource,
    files: ReadonlyMap<string, RepoFile>,
    cache: AnalysisCache | undefined,
  ): { removed: AnyDocument[]; added: AnyDocument[] } {
    const removed: AnyDocument[] = [];
    const added: AnyDocument[] = [];
    const flipped = new Set<string>();
    const refer = (path: string, delta: number) => {
      const count = (this.sourceRefs.get(path) ?? 0) + delta;
      if (count === 0) this.sourceRefs.delete(path);
      else this.sourceRefs.set(path, count);
      if (count === 0 || count === delta) flipped.add(path);
    };
    const fresh: FileEntry[] = [];
    // Ids no entry has any more, dropped from the cache once every entry is in (a moved file keeps its id).
    const unused: string[] = [];
    for (const [path, next] of analyses) {
      const old = this.entries.get(path);
      if (old) {
        this.leave(old, removed);
        for (const used of old.sources) refer(used, -1);
        this.entries.delete(path);
        if (old.id !== undefined) {
          const count = this.idRefs.get(old.id)! - 1;
          if (count > 0) this.idRefs.set(old.id, count);
          else {
            this.idRefs.delete(old.id);
            unused.push(old.id);
          }
        }
      }
      if (!next) continue;
      const entry: FileEntry = {
        path,
        id: next.file.id,
        analysis: next.analysis,
        sources: sourcesOf(next.analysis),
        member: false,
        documents: [],
        diagnostics: [],
      };
      for (const used of entry.sources) refer(used, 1);
      this.entries.set(path, entry);
      if (entry.id !== undefined) this.idRefs.set(entry.id, (this.idRefs.get(entry.id) ?? 0) + 1);
      fresh.push(entry);
    }
    for (const id of unused) if (!this.idRefs.has(id)) cache?.delete(id);
    const texts = new Map<string, string | undefined>();
    const textOf = (path: string) => {
      if (!texts.has(path))
        texts.set(path, this.entries.get(path)?.analysis.parsed.text ?? readText(source, files, path));
      return texts.get(path);
    };
    const consider = new Set(fresh);
    for (const path of flipped) {
      const entry = this.entries.get(path);
      if (entry) consider.add(entry);
    }
    for (const entry of consider) {
      // Files referenced by `source:` are content, not documents, even when they are YAML.
      const member = entry.path === FLEET_FILE || !this.sourceRefs.has(entry.path);
      if (member === entry.member) continue;
      if (!member) {
        this.leave(entry, removed);
        continue;
      }
      entry.member = true;
      entry.documents = entry.analysis.documents.map(
        // Every document gets the same shape (kind and name present, maybe undefined): the checks
        // read these fields on thousands of documents, and one shape keeps those reads fast.
        (doc): AnyDocument => ({
          file: entry.path,
          index: doc.index,
          value: doc.value,
          valid: doc.findings.length === 0,
          kind: doc.kind || undefined,
          name: doc.name || undefined,
        }),
      );
      for (const document of entry.documents) added.push(document);
      for (const problem of entry.analysis.parsed.problems)
        entry.diagnostics.push({ ...problem, file: entry.path });
      for (const [i, document] of entry.documents.entries())
        for (const finding of entry.analysis.documents[i]!.findings)
          entry.diagnostics.push(this.locate(document, finding, textOf));
      if (entry.diagnostics.length > 0) this.flagged.add(entry);
    }
    return { removed, added };
  }

  /** Takes an entry's documents out of the repository's documents. */
  private leave(entry: FileEntry, removed: AnyDocument[]): void {
    if (!entry.member) return;
    for (const document of entry.documents) removed.push(document);
    entry.member = false;
    entry.documents = [];
    entry.diagnostics = [];
    this.flagged.delete(entry);
  }

  /** A finding at its file, line and column (the same finding of the same document is located once). */
  private locate(
    document: SourcedDocument<unknown>,
    finding: Finding,
    textOf: (path: string) => string | undefined,
  ): Diagnostic {
    const known = this.located.get(finding);
    if (known?.document === document) return known.diagnostic;
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
    this.located.set(finding, { document, diagnostic });
    return diagnostic;
  }

  /**
   * Reads the files named by `source:` (again only when their id changed) and marks the assignments
   * reading a changed one for rendering. False, with a diagnostic, when one cannot be read.
   */
  private async readSources(
    source: RepoSource,
    files: ReadonlyMap<string, RepoFile>,
    diagnostics: Diagnostic[],
  ): Promise<boolean> {
    const sources = new Map<string, SourceContent>();
    const changed: string[] = [];
    let readable = true;
    for (const path of this.sourceRefs.keys()) {
      const file = files.get(path);
      if (!file) continue;
      const known = this.sources.get(path);
      if (known && file.id !== undefined && known.id === file.id) {
        sources.set(path, known);
        continue;
      }
      let bytes: Uint8Array;
      try {
        bytes = await source.read(file);
      } catch (error) {
        const analysis = file.problem ? linkAnalysis(file.problem) : unreadable(error);
        diagnostics.push({ ...analysis.parsed.problems[0]!, file: path });
        readable = false;
        continue;
      }
      const content = { id: file.id ?? bytesHash(bytes), bytes };
      sources.set(path, content);
      if (known?.id !== content.id) changed.push(path);
    }
    for (const path of this.sources.keys()) if (!sources.has(path)) changed.push(path);
    this.sources = sources;
    for (const path of changed) this.rendering.invalidate(false, this.checks.readersOf(path));
    return readable;
  }
}

/** An analysis and the file it is of. */
interface Analysed {
  file: RepoFile;
  analysis: FileAnalysis;
}

/** The text of a file read again (one analysed on the other thread comes without it); undefined if it cannot be. */
function readText(
  source: RepoSource,
  files: ReadonlyMap<string, RepoFile>,
  path: string,
): string | undefined {
  const file = files.get(path);
  if (!file) return undefined;
  try {
    const bytes = source.read(file);
    if (bytes instanceof Promise) {
      bytes.catch(() => {});
      return undefined;
    }
    return yamlText(bytes);
  } catch {
    // Unreadable now: the diagnostic keeps its file and loses its position.
    return undefined;
  }
}

/**
 * The paths not analysed because another path of the same file is (see RepoFile.real): of the
 * readable paths of one file, steward.yaml is read (where a Fleet document must be), else the
 * file's own path, else the first.
 */
function aliasesOf(
  files: ReadonlyMap<string, RepoFile>,
  linked: ReadonlyMap<string, RepoFile>,
  readable: (file: RepoFile) => boolean,
): ReadonlySet<string> {
  const aliases = new Set<string>();
  if (linked.size === 0) return aliases;
  const seenAt = new Map<string, string[]>();
  for (const file of linked.values()) {
    const paths = seenAt.get(file.real!);
    if (paths) paths.push(file.path);
    else seenAt.set(file.real!, [file.path]);
  }
  for (const [real, paths] of seenAt) {
    const readablePaths = paths.filter((path) => readable(files.get(path)!)).sort();
    const own = files.get(real);
    const ownReadable = own !== undefined && own.real === undefined && readable(own);
    if (ownReadable) readablePaths.push(real);
    const read = readablePaths.includes(FLEET_FILE) ? FLEET_FILE : ownReadable ? real : readablePaths[0];
    for (const path of readablePaths) if (path !== read) aliases.add(path);
  }
  return aliases;
}

/** What the last load with each cache found (see LoadState). */
const states = new WeakMap<AnalysisCache, LoadState>();

/**
 * Loads, validates and renders a fleet repository. Never throws for bad content. With a cache, the
 * next load of the same repository works by difference with this one: its work grows with what
 * changed, not with the size of the repository.
 */
export async function loadRepo(
  source: RepoSource,
  options: {
    cache?: AnalysisCache;
    /**
     * False: leave out the checks of secrets (see secret-checks.ts), and take a secret file that is
     * not there yet as one about to be written: for the commands that make and fix secrets
     * (`steward secret update` must load a repository whose secrets are not for its nodes).
     */
    checkSecrets?: boolean;
  } = {},
): Promise<LoadResult> {
  let cache = options.cache;
  let state = cache ? states.get(cache) : undefined;
  if (cache && !state) {
    state = new LoadState();
    states.set(cache, state);
  }
  if (!state || state.busy) {
    // A load already running with this cache (not done by the syncer, which waits): start afresh.
    if (state) cache = undefined;
    state = new LoadState();
  }
  state.busy = true;
  try {
    return await state.load(source, cache, options.checkSecrets ?? true);
  } catch (error) {
    // Never leave a half-updated state behind: the next load starts afresh.
    if (cache) {
      states.delete(cache);
      cache.clear();
    }
    throw error;
  } finally {
    state.busy = false;
  }
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

/**
 * A RepoSource over a directory: every file below it, skipping dot-directories like .git and
 * node_modules. Symlinks follow the rules of links.ts: a path seen through a link that stays
 * inside is read at the file it leads to, and a link that leaves the directory, dangles or loops
 * is listed with its problem (it is never read).
 */
export function directorySource(root: string): RepoSource {
  const scratch = readBuffer();
  /** The regular files and the links below `dir` (`prefix` is its relative path), at their real paths. */
  const walk = (dir: string, prefix: string, files: RepoFile[], links: string[]) => {
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
        if (followedName(entry.name)) walk(join(dir, entry.name), rel, files, links);
      } else if (entry.isFile()) files.push({ path: rel });
      else if (entry.isSymbolicLink()) links.push(rel);
    }
  };
  const tree: LinkedTree = {
    lookup(path) {
      return directoryEntry(join(root, path));
    },
    below(dir) {
      const files: RepoFile[] = [];
      const links: string[] = [];
      walk(join(root, dir), dir, files, links);
      return { files, links };
    },
  };
  return {
    directory: root,
    files() {
      const files: RepoFile[] = [];
      const links: string[] = [];
      walk(root, "", files, links);
      if (links.length > 0) for (const file of linkedFiles(links, tree)) files.push(file);
      return files;
    },
    read(file) {
      if (file.problem) throw new Error(file.problem.message);
      return readWhole(join(root, file.real ?? file.path), scratch);
    },
  };
}

/** What is at `path` of a directory, not following a link there. */
function directoryEntry(path: string): RepoEntry {
  let stats: Stats | undefined;
  try {
    stats = lstatSync(path, { throwIfNoEntry: false });
    if (stats?.isSymbolicLink()) return { kind: "link", target: readlinkSync(path) };
  } catch {
    // Not a directory on the way (ENOTDIR), or unreadable: nothing the repository can use there.
    return { kind: "missing" };
  }
  if (!stats) return { kind: "missing" };
  if (stats.isFile()) return { kind: "file" };
  return stats.isDirectory() ? { kind: "directory" } : { kind: "other" };
}
