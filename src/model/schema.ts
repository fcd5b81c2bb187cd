/**
 * JSON Schema validation of fleet documents (and agent messages) with ajv, turning ajv's errors into
 * findings that name the field, what was expected, what was found, and the fix.
 */
import type { ErrorObject } from "ajv/dist/2020.js";
import { durationFindings } from "./durations.js";
import { type Finding, formatPath } from "./findings.js";
import { didYouMean } from "./suggest.js";
import { compiledValidators } from "./validators.generated.js";

export const API_VERSION = "steward.dev/v1";
export const DOCUMENT_KINDS = ["Fleet", "Node", "Assignment"] as const;
export type DocumentKind = (typeof DOCUMENT_KINDS)[number];

export const STEWARD_SCHEMA_ID = "https://steward.dev/schemas/v1/steward.schema.json";
export const AGENT_SCHEMA_ID = "https://steward.dev/schemas/v1/agent.schema.json";

/** A compiled validator: true when `data` is valid; otherwise `errors` lists every ajv error. */
export interface Validator {
  (data: unknown): boolean;
  errors?: ErrorObject[] | null;
}

const validators = compiledValidators as unknown as Record<string, Validator | undefined>;

/**
 * The validator for one definition, e.g. `validatorFor(STEWARD_SCHEMA_ID, "Node")`. Validators are
 * compiled ahead of time by `npm run gen:types` (ajv standalone code, options `allErrors` and
 * `verbose`), so no process pays for compiling schemas; an unknown definition is a programming error.
 */
export function validatorFor(schemaId: string, definition: string): Validator {
  const ref = `${schemaId}#/$defs/${definition}`;
  const validate = validators[ref];
  if (!validate) throw new Error(`no schema definition ${ref}`);
  return validate;
}

function pointerToPath(pointer: string): (string | number)[] {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((part) => (/^(0|[1-9][0-9]*)$/.test(part) ? Number(part) : part));
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return value.length === 0 ? "an empty list" : "a list";
  if (typeof value === "object") return "a mapping";
  if (typeof value === "string")
    return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  // `1e400` and `.inf` are read as Infinity.
  if (typeof value === "number" && !Number.isFinite(value))
    return Number.isNaN(value) ? "not a number (NaN)" : "a number too large to hold (read as Infinity)";
  return `${typeof value} ${String(value)}`;
}

function typeName(type: string): string {
  if (type === "object") return "a mapping";
  if (type === "array") return "a list";
  if (type === "integer") return "an integer";
  return `a ${type}`;
}

/** One alternative of a `oneOf`, in words: `an integer`, `a string matching ^...$`. */
function describeForm(schema: Record<string, unknown>): string {
  const type = typeof schema.type === "string" ? typeName(schema.type) : "a value";
  if (typeof schema.pattern === "string") return `${type} matching ${schema.pattern}`;
  const bounds: string[] = [];
  if (typeof schema.minimum === "number") bounds.push(`>= ${schema.minimum}`);
  if (typeof schema.maximum === "number") bounds.push(`<= ${schema.maximum}`);
  return bounds.length > 0 ? `${type} ${bounds.join(" and ")}` : type;
}

function schemaDescription(schema: unknown): string | undefined {
  if (schema && typeof schema === "object" && "description" in schema) {
    const text = (schema as { description?: unknown }).description;
    return typeof text === "string" ? text : undefined;
  }
  return undefined;
}

/**
 * The fix for a scalar YAML read as a number or boolean where a string is wanted: quote it. `raw` is
 * the scalar as written in the file, when known (`1.10`, read as the number 1.1; `0o644`).
 */
export function quoteFix(path: readonly (string | number)[], value: unknown, raw?: string): string {
  const written = raw ?? String(value);
  if (path[path.length - 1] === "mode" && typeof value === "number") {
    const octal = /^0o([0-7]{3})$/.exec(written)?.[1] ?? written.padStart(4, "0").slice(-3);
    return `quote it: mode: "0${octal}" (YAML reads ${written} as the number ${value})`;
  }
  return `quote it: "${written}" (YAML reads ${written} as the ${typeof value} ${String(value)})`;
}

/** ajv's message for the remaining keywords, in the words of this file format. */
function plainMessage(error: ErrorObject): string {
  const limit = (error.params as { limit?: number }).limit;
  switch (error.keyword) {
    case "minItems":
      return `must have at least ${plural(limit ?? 0, "item")}`;
    case "maxItems":
      return `must have at most ${plural(limit ?? 0, "item")}`;
    case "minLength":
      return limit === 1 ? "must not be empty" : `must have at least ${plural(limit ?? 0, "character")}`;
    case "maxLength":
      return `must have at most ${plural(limit ?? 0, "character")}`;
    case "maximum":
      return `must be at most ${limit}`;
    case "minimum":
      return `must be at least ${limit}`;
    case "uniqueItems": {
      const { i, j } = error.params as { i: number; j: number };
      return `lists the same value twice (items ${j} and ${i})`;
    }
    default:
      return error.message ?? "is not valid";
  }
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/u;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/gu;

/**
 * Why `data` fails `pattern`, in words where one character is the reason (a NUL or line break, a
 * trailing `/`: the value matches without it), else the pattern itself.
 */
function patternMismatch(pattern: string, data: unknown): string {
  if (typeof data === "string") {
    const matches = (text: string) => new RegExp(pattern, "u").test(text);
    if (CONTROL_CHARACTER.test(data) && matches(data.replace(CONTROL_CHARACTERS, "")))
      return "must not contain control characters (NUL, line breaks, tabs)";
    if (data.length > 1 && data.endsWith("/") && matches(data.slice(0, -1))) return 'must not end with "/"';
  }
  return `must match ${pattern}`;
}

/** Turns one ajv error into a finding, or undefined for errors that only repeat a more precise one. */
function toFinding(error: ErrorObject, all: ErrorObject[]): Finding | undefined {
  const path = pointerToPath(error.instancePath);
  const where = formatPath(path);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "if":
    case "allOf":
      return undefined;
    case "anyOf":
    case "oneOf": {
      // Alternatives that are only `required` lists: say which fields are wanted.
      const alternatives = (error.schema as { required?: string[] }[] | undefined) ?? [];
      const names = alternatives.flatMap((alt) => alt.required ?? []);
      if (names.length === alternatives.length && names.length > 0) {
        const present = names.filter((n) => (error.data as Record<string, unknown>)?.[n] !== undefined);
        if (error.keyword === "oneOf" && present.length > 1) {
          return {
            severity: "error",
            code: "schema/exclusive",
            path,
            message: `${where} sets ${present.map((n) => `\`${n}\``).join(" and ")}; only one of them is allowed`,
            fix: `keep one of ${names.map((n) => `\`${n}\``).join(", ")}`,
          };
        }
        return {
          severity: "error",
          code: "schema/required",
          path,
          key: path.length > 0,
          message: `${where} needs ${names.map((n) => `\`${n}\``).join(" or ")}`,
          fix: `add ${names.map((n) => `\`${n}\``).join(" or ")}`,
        };
      }
      // Alternatives of different types (e.g. a count or a percentage): one message for the field,
      // unless a nested error already says more.
      const nested = all.some(
        (other) => other !== error && other.instancePath.startsWith(`${error.instancePath}/`),
      );
      if (nested) return undefined;
      const forms = (error.schema as Record<string, unknown>[] | undefined)?.map(describeForm) ?? [];
      return {
        severity: "error",
        code: "schema/invalid",
        path,
        message: `${where} must be ${forms.length > 0 ? forms.join(" or ") : "valid"} (got ${describe(error.data)})`,
        fix: schemaDescription(error.parentSchema),
      };
    }
    case "not": {
      const forbidden = (error.schema as { required?: string[] } | undefined)?.required ?? [];
      return {
        severity: "error",
        code: "schema/exclusive",
        path,
        message: `${where} sets ${forbidden.map((n) => `\`${n}\``).join(" and ")}; they are exclusive`,
        fix: `keep only one of ${forbidden.map((n) => `\`${n}\``).join(", ")}`,
      };
    }
    case "required": {
      // A precise anyOf/oneOf message covers `required` errors raised inside its alternatives.
      if (error.schemaPath.includes("/anyOf/") || error.schemaPath.includes("/oneOf/")) return undefined;
      const missing = String(params.missingProperty);
      const properties = (error.parentSchema as { properties?: Record<string, unknown> } | undefined)
        ?.properties;
      const hint = schemaDescription(properties?.[missing]);
      return {
        severity: "error",
        code: "schema/required",
        path,
        // Point at the key of the mapping that lacks the field (`spec:`), not at its first member.
        key: path.length > 0,
        message: `${where} is missing required field \`${missing}\``,
        fix: hint ? `add \`${missing}\`: ${hint}` : `add \`${missing}\``,
      };
    }
    case "additionalProperties": {
      const extra = String(params.additionalProperty);
      const allowed = Object.keys(
        (error.parentSchema as { properties?: object } | undefined)?.properties ?? {},
      );
      return {
        severity: "error",
        code: "schema/unknown-field",
        path: [...path, extra],
        key: true,
        message: `${where === "document" ? "" : `${where}: `}unknown field \`${extra}\`${didYouMean(extra, allowed)}`,
        fix: allowed.length > 0 ? `use one of: ${allowed.join(", ")}` : "remove it",
      };
    }
    case "enum":
    case "const": {
      const allowed = error.keyword === "enum" ? (params.allowedValues as unknown[]) : [params.allowedValue];
      const got = error.data;
      const suggestion = typeof got === "string" ? didYouMean(got, allowed.map(String)) : "";
      return {
        severity: "error",
        code: "schema/enum",
        path,
        message: `${where} must be ${allowed.length === 1 ? "" : "one of "}${allowed.map((v) => JSON.stringify(v)).join(", ")} (got ${describe(got)})${suggestion}`,
        fix: schemaDescription(error.parentSchema),
      };
    }
    case "type": {
      // Several types come joined with commas (`string,object`).
      const expected = String(params.type).split(",");
      const got = error.data;
      const unquoted = expected.includes("string") && (typeof got === "number" || typeof got === "boolean");
      const finding: Finding = {
        severity: "error",
        code: "schema/type",
        path,
        message: `${where} must be ${expected.map(typeName).join(" or ")} (got ${describe(got)})`,
        fix: unquoted ? quoteFix(path, got) : schemaDescription(error.parentSchema),
      };
      if (unquoted) finding.unquoted = got;
      return finding;
    }
    case "pattern":
      return {
        severity: "error",
        code: "schema/pattern",
        path,
        message: `${where} ${patternMismatch(String(params.pattern), error.data)} (got ${describe(error.data)})`,
        fix: schemaDescription(error.parentSchema),
      };
    default:
      return {
        severity: "error",
        code: `schema/${error.keyword}`,
        path,
        message: `${where} ${plainMessage(error)} (got ${describe(error.data)})`,
        fix: schemaDescription(error.parentSchema),
      };
  }
}

/** Findings for every ajv error of `validate` on `value`, most precise first, without repeats. */
export function schemaFindings(validate: Validator, value: unknown): Finding[] {
  if (validate(value)) return [];
  const reported = validate.errors ?? [];
  // A oneOf/anyOf over scalar forms is reported once, as a whole: drop its alternatives' own errors.
  const summarised = reported.filter(
    (e) =>
      (e.keyword === "oneOf" || e.keyword === "anyOf") &&
      !reported.some((other) => other.instancePath.startsWith(`${e.instancePath}/`)),
  );
  const errors = reported.filter(
    (e) =>
      !summarised.some(
        (group) =>
          group !== e &&
          e.instancePath === group.instancePath &&
          e.schemaPath.startsWith(`${group.schemaPath}/`) &&
          !(e.keyword === "required"),
      ),
  );
  const findings: Finding[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const finding = toFinding(error, errors);
    if (!finding) continue;
    const id = `${finding.path.join("/")}|${finding.message}`;
    if (seen.has(id)) continue;
    seen.add(id);
    findings.push(finding);
  }
  return findings;
}

/**
 * Validates one fleet document: first that it is a steward document at all (a mapping with a known
 * `apiVersion` and `kind`), then against its kind's schema and the bounds of its durations,
 * reporting every error.
 */
export function validateDocument(value: unknown): { kind?: DocumentKind; findings: Finding[] } {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return {
      findings: [
        {
          severity: "error",
          code: "document/not-a-mapping",
          path: [],
          message: `document is ${describe(value)}, not a mapping`,
          fix: "a steward document is a mapping with apiVersion, kind, metadata and spec",
        },
      ],
    };
  }
  const record = value as Record<string, unknown>;
  if (record.apiVersion === undefined) {
    return {
      findings: [
        {
          severity: "error",
          code: "document/api-version",
          path: [],
          message: "document has no `apiVersion`: it is not a steward document",
          fix: `add \`apiVersion: ${API_VERSION}\`, or list the file under \`ignore:\` in steward.yaml if it is not for steward`,
        },
      ],
    };
  }
  if (record.apiVersion !== API_VERSION) {
    return {
      findings: [
        {
          severity: "error",
          code: "document/api-version",
          path: ["apiVersion"],
          message: `unknown apiVersion ${describe(record.apiVersion)}`,
          fix: `use \`apiVersion: ${API_VERSION}\``,
        },
      ],
    };
  }
  const kind = record.kind;
  if (typeof kind !== "string" || !(DOCUMENT_KINDS as readonly string[]).includes(kind)) {
    return {
      findings: [
        {
          severity: "error",
          code: "document/kind",
          path: kind === undefined ? [] : ["kind"],
          message:
            kind === undefined
              ? "document has no `kind`"
              : `unknown kind ${describe(kind)}${typeof kind === "string" ? didYouMean(kind, DOCUMENT_KINDS) : ""}`,
          fix: `set kind to one of ${DOCUMENT_KINDS.join(", ")}`,
        },
      ],
    };
  }
  const findings = schemaFindings(validatorFor(STEWARD_SCHEMA_ID, kind), value);
  for (const finding of durationFindings(kind as DocumentKind, value)) findings.push(finding);
  return { kind: kind as DocumentKind, findings };
}
