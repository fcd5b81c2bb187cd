/**
 * Schema error messages: each kind of ajv error becomes one finding that names the field, what was
 * expected, what was found, and the fix — not ajv's raw text, and not one per alternative tried.
 */
import { describe, expect, it } from "vitest";
import type { Finding } from "../../src/model/findings.js";
import {
  quoteFix,
  STEWARD_SCHEMA_ID,
  schemaFindings,
  validateDocument,
  validatorFor,
} from "../../src/model/schema.js";

const node = (spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: "web-1" }) => ({
  apiVersion: "steward.dev/v1",
  kind: "Node",
  metadata,
  spec,
});
const assignment = (spec: Record<string, unknown>) => ({
  apiVersion: "steward.dev/v1",
  kind: "Assignment",
  metadata: { name: "web" },
  spec,
});
const file = (fields: Record<string, unknown>) =>
  assignment({ nodes: ["web-1"], resources: [{ kind: "file", path: "/srv/a", ...fields }] });

function findings(value: unknown): Finding[] {
  return validateDocument(value).findings;
}

describe("schema - messages", () => {
  it.each<[string, unknown, Partial<Finding>]>([
    [
      "required",
      node({ transport: "local" }),
      {
        code: "schema/required",
        path: ["spec"],
        key: true,
        message: "spec is missing required field `roots`",
        fix: "add `roots`: Absolute directories that file, directory and symlink resources may touch. Anything outside is refused.",
      },
    ],
    [
      "additionalProperties",
      file({ ower: "root" }),
      {
        code: "schema/unknown-field",
        path: ["spec", "resources", 0, "ower"],
        key: true,
        message: 'spec.resources[0]: unknown field `ower` (did you mean "owner"?)',
        fix: "use one of: kind, name, dependsOn, atomic, path, content, source, secret, encoding, mode, owner, group, ensure",
      },
    ],
    [
      "enum",
      node({ transport: "shh", roots: ["/srv"] }),
      {
        code: "schema/enum",
        path: ["spec", "transport"],
        message: 'spec.transport must be one of "local", "nats", "ssh" (got "shh") (did you mean "ssh"?)',
      },
    ],
    [
      "type (a number where a string is wanted)",
      file({ mode: 644 }),
      {
        code: "schema/type",
        path: ["spec", "resources", 0, "mode"],
        message: "spec.resources[0].mode must be a string (got number 644)",
        fix: 'quote it: mode: "0644" (YAML reads 644 as the number 644)',
        unquoted: 644,
      },
    ],
    [
      "type (a list where a mapping is wanted)",
      assignment({ nodes: ["web-1"], resources: [{ kind: "file", path: "/srv/a" }], budget: [] }),
      {
        code: "schema/type",
        path: ["spec", "budget"],
        message: "spec.budget must be a mapping (got an empty list)",
        fix: "How long transient failures are retried (with backoff) before the instance is `Stuck`.",
      },
    ],
    [
      "pattern",
      node({ transport: "local", roots: ["srv"] }),
      {
        code: "schema/pattern",
        path: ["spec", "roots", 0],
        message: 'spec.roots[0] must match ^/[^\\u0000-\\u001f\\u007f]*$ (got "srv")',
        fix: "An absolute path, without control characters (NUL, line breaks, tabs), at most 4096 characters.",
      },
    ],
    [
      "not (exclusive fields)",
      file({ content: "x", source: "files/x" }),
      {
        code: "schema/exclusive",
        path: ["spec", "resources", 0],
        message: "spec.resources[0] sets `content` and `source`; they are exclusive",
        fix: "keep only one of `content`, `source`",
      },
    ],
    [
      "anyOf of required fields",
      assignment({ resources: [{ kind: "package", name: "curl" }] }),
      {
        code: "schema/required",
        path: ["spec"],
        key: true,
        message: "spec needs `nodes` or `selector`",
        fix: "add `nodes` or `selector`",
      },
    ],
    [
      "oneOf of required fields, both present",
      assignment({
        nodes: ["web-1"],
        resources: [{ kind: "package", name: "curl" }],
        rollout: { canary: { nodes: ["web-1"], count: 1 } },
      }),
      {
        code: "schema/exclusive",
        path: ["spec", "rollout", "canary"],
        message: "spec.rollout.canary sets `nodes` and `count`; only one of them is allowed",
        fix: "keep one of `nodes`, `count`",
      },
    ],
    [
      "oneOf of scalar forms",
      assignment({
        nodes: ["web-1"],
        resources: [{ kind: "package", name: "curl" }],
        rollout: { maxInFlight: "0%" },
      }),
      {
        code: "schema/invalid",
        path: ["spec", "rollout", "maxInFlight"],
        message:
          'spec.rollout.maxInFlight must be an integer >= 1 and <= 100000 or a string matching ^(100|[1-9][0-9]?)%$ (got "0%")',
      },
    ],
    [
      "other keywords (maximum)",
      node({ transport: "ssh", roots: ["/srv"], ssh: { host: "h", port: 70000 } }),
      {
        code: "schema/maximum",
        path: ["spec", "ssh", "port"],
        message: "spec.ssh.port must be at most 65535 (got number 70000)",
      },
    ],
    [
      "other keywords (minItems)",
      node({ transport: "local", roots: [] }),
      {
        code: "schema/minItems",
        path: ["spec", "roots"],
        message: "spec.roots must have at least 1 item (got an empty list)",
      },
    ],
  ])("schema - %s gives one precise finding", (_, value, expected) => {
    const list = findings(value);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ severity: "error", ...expected });
  });

  it("schema - a null resource is one type error, not a cascade from every resource kind", () => {
    const list = findings(assignment({ nodes: ["web-1"], resources: [null] }));
    expect(list).toMatchObject([
      {
        code: "schema/type",
        path: ["spec", "resources", 0],
        message: "spec.resources[0] must be a mapping (got null)",
      },
    ]);
  });

  it("schema - every error of a document is reported, not just the first", () => {
    const list = findings(
      node({ transport: "carrier-pigeon", roots: ["relative"], extra: 1 }, { name: "Web" }),
    );
    expect(list.map((f) => f.code).sort()).toEqual([
      "schema/enum",
      "schema/pattern",
      "schema/pattern",
      "schema/unknown-field",
    ]);
  });

  it.each<[string, unknown, Partial<Finding>]>([
    ["a list", ["a"], { code: "document/not-a-mapping", message: "document is a list, not a mapping" }],
    ["a string", "hello", { code: "document/not-a-mapping", message: 'document is "hello", not a mapping' }],
    [
      "without apiVersion",
      { kind: "Node" },
      {
        code: "document/api-version",
        path: [],
        message: "document has no `apiVersion`: it is not a steward document",
      },
    ],
    [
      "with another apiVersion",
      { apiVersion: "steward.dev/v2", kind: "Node" },
      { code: "document/api-version", path: ["apiVersion"], message: 'unknown apiVersion "steward.dev/v2"' },
    ],
    [
      "of an unknown kind",
      { apiVersion: "steward.dev/v1", kind: "Nodes" },
      { code: "document/kind", path: ["kind"], message: 'unknown kind "Nodes" (did you mean "Node"?)' },
    ],
    [
      "without kind",
      { apiVersion: "steward.dev/v1" },
      { code: "document/kind", path: [], message: "document has no `kind`" },
    ],
  ])("schema - a document that is %s is not a steward document", (_, value, expected) => {
    expect(validateDocument(value)).toEqual({
      findings: [expect.objectContaining({ severity: "error", ...expected })],
    });
  });

  it("schema - const errors name the one allowed value", () => {
    const list = schemaFindings(validatorFor(STEWARD_SCHEMA_ID, "FileResource"), {
      kind: "dir",
      path: "/srv",
    });
    expect(list).toMatchObject([
      { code: "schema/enum", path: ["kind"], message: 'kind must be "file" (got "dir")' },
    ]);
  });

  it("schema - the quote fix uses the text as written", () => {
    expect(quoteFix(["spec", "version"], 1.1, "1.10")).toBe(
      'quote it: "1.10" (YAML reads 1.10 as the number 1.1)',
    );
    expect(quoteFix(["spec", "resources", 0, "mode"], 420, "0o644")).toBe(
      'quote it: mode: "0644" (YAML reads 0o644 as the number 420)',
    );
    expect(quoteFix(["metadata", "labels", "canary"], true, "yes")).toBe(
      'quote it: "yes" (YAML reads yes as the boolean true)',
    );
  });

  it("schema - an unknown definition is a programming error", () => {
    expect(() => validatorFor(STEWARD_SCHEMA_ID, "Nope")).toThrow(/no schema definition/);
  });
});
