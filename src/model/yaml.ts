/**
 * YAML files to plain values, with source positions on demand.
 *
 * Parsing is the hot path of `validate` and of every sync, so it goes through js-yaml (several times
 * faster than a parser that keeps a concrete syntax tree); only a file that needs a position (it has
 * a diagnostic) or that uses anchors and aliases (which need the alias-expansion limit) is parsed
 * again with `yaml`, which keeps every node's range. Both read YAML 1.2 with the core schema, so
 * both give the same values.
 */
import { isUtf8 } from "node:buffer";
import jsyaml from "js-yaml";
import type { LineCounter, Node as YamlNode } from "yaml";
import { bundledOr } from "./bundled.js";

type YamlLibrary = typeof import("yaml");
let yamlLibrary: YamlLibrary | undefined;
/**
 * The `yaml` library, loaded on first use: most runs never need a position, and loading it is not
 * free (about 40 ms). Written with the free `require` that bundles define (the Action, the
 * single-file agent), so the bundler inlines the package — a checkout of the Action has no
 * node_modules; plain Node's ES modules have no `require`, and a bundle that leaves packages
 * external has one that throws: both take it from node_modules.
 */
function yaml(): YamlLibrary {
  yamlLibrary ??= bundledOr("yaml", () => require("yaml")) as YamlLibrary;
  return yamlLibrary;
}

/** Files larger than this are refused: a fleet document is small; large content belongs in `source`. */
export const MAX_YAML_BYTES = 1024 * 1024;
/** Alias expansions allowed in one document (the `yaml` library's guard against "billion laughs"). */
const MAX_ALIAS_COUNT = 100;

export interface Position {
  line: number;
  column: number;
}

/** A finding about a file, before it is attached to the file's path. */
export interface Problem extends Position {
  severity: "error" | "warning";
  code: string;
  message: string;
  fix?: string;
}

export interface ParsedFile {
  /** The decoded text, when the bytes were UTF-8. */
  text?: string;
  /** Non-empty documents, in file order, with the index they have among all of the file's documents. */
  documents: { index: number; value: unknown }[];
  problems: Problem[];
}

const anchorsOrAliases = /(^|[\s,[{:-])[&*][^\s,\]}]/m;

/**
 * Offset of the first byte that is not valid UTF-8, or -1: no overlong forms, no surrogates, nothing
 * above U+10FFFF (the rules of `isUtf8`, which only says whether there is such a byte).
 */
function invalidUtf8Offset(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    const need = b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (need < 0) return i;
    // The allowed range of the second byte depends on the first (RFC 3629, section 4).
    const low = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
    const high = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    for (let k = 1; k <= need; k++) {
      const c = bytes[i + k];
      if (c === undefined || c < (k === 1 ? low : 0x80) || c > (k === 1 ? high : 0xbf)) return i;
    }
    i += need + 1;
  }
  return -1;
}

function positionOfOffset(bytes: Uint8Array, offset: number): Position {
  let line = 1;
  let start = 0;
  for (let i = 0; i < offset; i++) {
    if (bytes[i] === 0x0a) {
      line++;
      start = i + 1;
    }
  }
  return { line, column: offset - start + 1 };
}

/** The text of UTF-8 bytes, without a byte order mark: what parsing and positions work on. */
function decodeText(bytes: Uint8Array): string {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** The text `parseYamlFile` parses for these bytes, or undefined when it refuses them as text. */
export function yamlText(bytes: Uint8Array): string | undefined {
  const refused = bytes.length > MAX_YAML_BYTES || bytes.indexOf(0) >= 0 || !isUtf8(bytes);
  return refused ? undefined : decodeText(bytes);
}

/**
 * Decodes and parses one YAML file. Never throws for bad input: every problem (not UTF-8, binary,
 * too large, empty, syntax, duplicate keys, alias bombs) is returned as a Problem with a position.
 */
export function parseYamlFile(bytes: Uint8Array): ParsedFile {
  if (bytes.length > MAX_YAML_BYTES) {
    return {
      documents: [],
      problems: [
        {
          severity: "error",
          code: "file/too-large",
          line: 1,
          column: 1,
          message: `file is ${bytes.length} bytes; fleet documents are limited to ${MAX_YAML_BYTES} bytes`,
          fix: "split it into several files, or move large content into a file referenced with `source:`",
        },
      ],
    };
  }
  const utf16 =
    bytes.length >= 2 &&
    ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff));
  if (utf16) {
    return {
      documents: [],
      problems: [
        {
          severity: "error",
          code: "file/encoding",
          line: 1,
          column: 1,
          message: "file is UTF-16 (it starts with a UTF-16 byte order mark); fleet documents are UTF-8",
          fix: "save the file as UTF-8 (e.g. `iconv -f utf-16 -t utf-8`)",
        },
      ],
    };
  }
  const nul = bytes.indexOf(0);
  if (nul >= 0) {
    return {
      documents: [],
      problems: [
        {
          severity: "error",
          code: "file/binary",
          ...positionOfOffset(bytes, nul),
          message: "file contains a NUL byte: it is binary, not YAML",
          fix: "move binary files out of the fleet repo's YAML, or give them another extension and reference them with `source:`",
        },
      ],
    };
  }
  // isUtf8 is native; the offset of the first bad byte is looked for only when there is one.
  const bad = isUtf8(bytes) ? -1 : invalidUtf8Offset(bytes);
  if (bad >= 0) {
    return {
      documents: [],
      problems: [
        {
          severity: "error",
          code: "file/encoding",
          ...positionOfOffset(bytes, bad),
          message: `byte 0x${bytes[bad]!.toString(16).padStart(2, "0")} at offset ${bad} is not valid UTF-8`,
          fix: "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
        },
      ],
    };
  }
  const text = decodeText(bytes);
  const parsed = anchorsOrAliases.test(text) ? parseWithPositions(text) : parseFast(text);
  if (parsed.problems.length === 0 && parsed.documents.length === 0) {
    parsed.problems.push({
      severity: "error",
      code: "file/empty",
      line: 1,
      column: 1,
      message: "file has no YAML documents",
      fix: "add a steward document (apiVersion: steward.dev/v1) or delete the file; list non-steward YAML under `ignore:` in steward.yaml",
    });
  }
  return { text, ...parsed };
}

/** Nesting so deep that parsing it exhausts the stack: no fleet document comes close. */
function tooDeep(): Omit<ParsedFile, "text"> {
  return {
    documents: [],
    problems: [
      {
        severity: "error",
        code: "yaml/too-deep",
        line: 1,
        column: 1,
        message: "file nests lists or mappings too deeply to be parsed",
        fix: "flatten the structure; steward documents are a few levels deep",
      },
    ],
  };
}

function isStackOverflow(error: unknown): boolean {
  return error instanceof RangeError && /call stack/i.test(error.message);
}

function parseFast(text: string): Omit<ParsedFile, "text"> {
  let values: unknown[];
  try {
    values = jsyaml.loadAll(text, undefined, { schema: jsyaml.CORE_SCHEMA });
  } catch (error) {
    if (isStackOverflow(error)) return tooDeep();
    // js-yaml found a problem; the `yaml` parser describes it with an exact range.
    return parseWithPositions(text);
  }
  return {
    documents: values.flatMap((value, index) =>
      value === null || value === undefined ? [] : [{ index, value }],
    ),
    problems: [],
  };
}

function parseWithPositions(text: string): Omit<ParsedFile, "text"> {
  try {
    return parseWithPositionsUnguarded(text);
  } catch (error) {
    if (isStackOverflow(error)) return tooDeep();
    // The parser itself failed on this input: still a diagnostic, never a crash.
    return {
      documents: [],
      problems: [
        {
          severity: "error",
          code: "yaml/syntax",
          line: 1,
          column: 1,
          message: `file cannot be parsed as YAML (${firstLine(error instanceof Error ? error.message : String(error))})`,
          fix: "check the file with a YAML linter; simplify the construct the parser stops at",
        },
      ],
    };
  }
}

function parseWithPositionsUnguarded(text: string): Omit<ParsedFile, "text"> {
  const { LineCounter, parseAllDocuments } = yaml();
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, {
    lineCounter,
    prettyErrors: true,
    uniqueKeys: true,
    logLevel: "error",
  });
  const problems: Problem[] = [];
  const documents: ParsedFile["documents"] = [];
  const list = Array.isArray(docs) ? docs : [];
  for (const [index, doc] of list.entries()) {
    for (const error of doc.errors) {
      if (/call stack/i.test(error.message)) return tooDeep();
      const pos = lineCounter.linePos(error.pos[0]);
      const duplicate = error.code === "DUPLICATE_KEY";
      problems.push({
        severity: "error",
        code: duplicate ? "yaml/duplicate-key" : "yaml/syntax",
        line: pos.line,
        column: pos.col,
        message: duplicate ? duplicateKeyMessage(text, error.pos[0]) : firstLine(error.message),
        fix: duplicate
          ? "remove one of the two keys; YAML keeps only one and the other would be lost"
          : "fix the YAML syntax at this position (indentation, quotes, a missing `:` or `-`)",
      });
    }
    for (const warning of doc.warnings) {
      const pos = lineCounter.linePos(warning.pos[0]);
      problems.push({
        severity: "warning",
        code: "yaml/warning",
        line: pos.line,
        column: pos.col,
        message: firstLine(warning.message),
        fix: "remove the tag or construct: steward documents use plain YAML",
      });
    }
    if (doc.errors.length > 0) continue;
    try {
      const value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
      if (value !== null && value !== undefined) documents.push({ index, value });
    } catch (error) {
      const pos = doc.contents ? lineCounter.linePos(doc.contents.range?.[0] ?? 0) : { line: 1, col: 1 };
      problems.push({
        severity: "error",
        code: "yaml/aliases",
        line: pos.line,
        column: pos.col,
        message: `document expands too many aliases (${firstLine((error as Error).message)})`,
        fix: `use at most ${MAX_ALIAS_COUNT} alias expansions per document; write the values out instead`,
      });
    }
  }
  return { documents, problems };
}

/** `duplicate key "path"`, the key read from the text at the error's offset. */
function duplicateKeyMessage(text: string, offset: number): string {
  const key = /^[^:\n]*/
    .exec(text.slice(offset, offset + 200))?.[0]
    .trim()
    .replace(/^["']|["']$/g, "");
  return key ? `duplicate key ${JSON.stringify(key)} in this mapping` : "duplicate key in this mapping";
}

function firstLine(message: string): string {
  const line = message.split("\n")[0] ?? message;
  return line.replace(/ at line \d+, column \d+:?$/, "");
}

/** A parsed file kept for locating paths; the last few are cached since diagnostics cluster. */
const located = new Map<
  string,
  { docs: ReturnType<YamlLibrary["parseAllDocuments"]>; lineCounter: LineCounter }
>();

/**
 * The position of a value (or, with `key`, of its key) inside document `index` of `text`, given
 * its path (`["spec", "resources", 2, "mode"]`). Falls back to the deepest node found, then to the
 * document's start.
 */
export function locate(
  text: string,
  index: number,
  path: readonly (string | number)[],
  key = false,
): Position {
  try {
    return locateUnguarded(text, index, path, key);
  } catch {
    // Only a file the parser cannot walk gets here; its diagnostics then point at its start.
    return { line: 1, column: 1 };
  }
}

function locateUnguarded(
  text: string,
  index: number,
  path: readonly (string | number)[],
  key: boolean,
): Position {
  const { isMap, isScalar, isSeq, LineCounter, parseAllDocuments } = yaml();
  let entry = located.get(text);
  if (!entry) {
    const lineCounter = new LineCounter();
    entry = {
      docs: parseAllDocuments(text, { lineCounter, uniqueKeys: false, logLevel: "silent" }),
      lineCounter,
    };
    located.set(text, entry);
    if (located.size > 16) located.delete(located.keys().next().value!);
  }
  const docs = Array.isArray(entry.docs) ? entry.docs : [];
  const doc = docs[index];
  if (!doc) return { line: 1, column: 1 };
  let node: YamlNode | null | undefined = doc.contents as YamlNode | null;
  let offset = node?.range?.[0] ?? doc.range?.[0] ?? 0;
  for (const [i, segment] of path.entries()) {
    const last = i === path.length - 1;
    if (isMap(node)) {
      const pair = node.items.find(
        (item) => isScalar(item.key) && String(item.key.value) === String(segment),
      );
      if (!pair) break;
      const keyNode = pair.key as YamlNode;
      if (last && key) {
        offset = keyNode.range?.[0] ?? offset;
        break;
      }
      node = pair.value as YamlNode | null;
      offset = node?.range?.[0] ?? keyNode.range?.[0] ?? offset;
    } else if (isSeq(node) && typeof segment === "number") {
      node = node.items[segment] as YamlNode | null;
      if (!node) break;
      offset = node.range?.[0] ?? offset;
    } else break;
  }
  const pos = entry.lineCounter.linePos(offset);
  return { line: pos.line, column: pos.col };
}
