/**
 * What validate (and so the syncer and the Action) says about secrets, without decrypting anything:
 * each rule at the file:line:column of the field that uses the secret, with the fix.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Diagnostic } from "../../src/model/diagnostics.js";
import { directorySource, loadRepo } from "../../src/model/load.js";
import { formatManifest } from "../../src/model/secrets.js";
import { encryptFor, newIdentity } from "../helpers/secrets.js";
import { sopsFile } from "../helpers/sops.js";
import { assignmentYaml, nodeYaml } from "../hub/helpers/fleet.js";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let db1: { identity: string; recipient: string };
let db2: { identity: string; recipient: string };
let operator: { identity: string; recipient: string };
beforeAll(async () => {
  [db1, db2, operator] = await Promise.all([newIdentity(), newIdentity(), newIdentity()]);
});

type Files = Record<string, string | Buffer>;

async function load(files: Files) {
  const dir = mkdtempSync(join(tmpdir(), "steward-secret-checks-"));
  dirs.push(dir);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return loadRepo(directorySource(dir));
}

/** db-1 and db-2 with their identities (db-3 without one), and the `db` assignment placing a key. */
function fleet(nodes: string[], resourceFields: Record<string, unknown>, extra: Files = {}): Files {
  return {
    "nodes/db-1.yaml": nodeYaml("db-1", { identity: { age: db1.recipient } }),
    "nodes/db-2.yaml": nodeYaml("db-2", { identity: { age: db2.recipient } }),
    "nodes/db-3.yaml": nodeYaml("db-3"),
    "assignments/db.yaml": assignmentYaml("db", {
      nodes,
      resources: [{ kind: "file", name: "tls-key", path: "/srv/server.key", ...resourceFields } as never],
    }),
    ...extra,
  };
}

/** `PATH` with its manifest, encrypted with age for `recipients` (named as steward names them). */
async function ageSecret(
  path: string,
  plaintext: string,
  recipients: { recipient: string; role: "node" | "operator"; name: string }[],
): Promise<Files> {
  return {
    [path]: await encryptFor(
      plaintext,
      recipients.map((r) => r.recipient),
    ),
    [`${path}.recipients`]: formatManifest(path, recipients),
  };
}

/** The `db` assignment placing secrets/server.key.age on `nodes`, the key encrypted for `readers` (db-1, db-2). */
async function keyPlacedOn(nodes: string[], readers: ("db-1" | "db-2")[], secret = true): Promise<Files> {
  const identities = { "db-1": db1, "db-2": db2 };
  const recipients = readers.map((name) => ({
    recipient: identities[name].recipient,
    role: "node" as const,
    name,
  }));
  return fleet(
    nodes,
    { source: "secrets/server.key.age", ...(secret ? { secret: true } : {}) },
    await ageSecret("secrets/server.key.age", "KEY\n", recipients),
  );
}

function only(diagnostics: readonly Diagnostic[]) {
  return diagnostics.map(({ severity, code, file, line, column, message, fix }) => ({
    severity,
    code,
    file,
    line,
    column,
    message,
    fix,
  }));
}

describe("secret checks - validate reads recipients without decrypting", () => {
  it("secret checks - a secret encrypted for every node it is placed on is valid; the ciphertext travels in the spec, never a plaintext", async () => {
    const files = fleet(
      ["db-1", "db-2"],
      { source: "secrets/server.key.age", secret: true },
      await ageSecret("secrets/server.key.age", "KEY MATERIAL\n", [
        { recipient: db1.recipient, role: "node", name: "db-1" },
        { recipient: db2.recipient, role: "node", name: "db-2" },
        { recipient: operator.recipient, role: "operator", name: "alice" },
      ]),
    );
    const loaded = await load(files);
    expect(loaded.diagnostics).toEqual([]);
    const instance = loaded.desired!.instances.get("db@db-1")!;
    expect(instance.spec.resources[0]).toMatchObject({ source: "secrets/server.key.age", secret: true });
    expect(instance.spec.resources[0]).not.toHaveProperty("content");
    expect(instance.spec.secrets!["secrets/server.key.age"]!.content).toMatch(
      /^-----BEGIN AGE ENCRYPTED FILE-----/,
    );
    expect(JSON.stringify(instance.spec)).not.toContain("KEY MATERIAL");
  });

  interface Case {
    name: string;
    files: () => Promise<Files>;
    expected: Omit<Diagnostic, "file" | "line" | "column">[];
    /** The line of assignments/db.yaml the finding points at, by its text. */
    at: string;
  }
  const cases: Case[] = [
    {
      name: "a secret placed on a node it is not encrypted for",
      files: () => keyPlacedOn(["db-1", "db-2"], ["db-1"]),
      at: "source: secrets/server.key.age",
      expected: [
        {
          severity: "error",
          code: "secret/not-for-node",
          message: "secrets/server.key.age is placed on db-2 but not encrypted for it",
          fix: "run steward secret update secrets/server.key.age",
        },
      ],
    },
    {
      name: "a secret placed on a node without an identity",
      files: () => keyPlacedOn(["db-1", "db-3"], ["db-1"]),
      at: "source: secrets/server.key.age",
      expected: [
        {
          severity: "error",
          code: "secret/no-identity",
          message:
            "secrets/server.key.age is placed on db-3, which has no spec.identity.age to encrypt it for",
          fix: "run steward agent identity on the host, add its age recipient to spec.identity of nodes/db-3.yaml, then run steward secret update secrets/server.key.age",
        },
      ],
    },
    {
      name: "a secret: true source that is not encrypted",
      files: async () =>
        fleet(
          ["db-1"],
          { source: "secrets/server.key", secret: true },
          { "secrets/server.key": "-----BEGIN PRIVATE KEY-----\n" },
        ),
      at: "source: secrets/server.key",
      expected: [
        {
          severity: "error",
          code: "secret/not-encrypted",
          message:
            "secrets/server.key is used as a secret but is not encrypted: its content is in Git in the clear",
          fix: "encrypt it for the nodes it is placed on (steward secret encrypt --assignment db secrets/server.key --out secrets/server.key.age, then use secrets/server.key.age and remove secrets/server.key from Git); a secret that was ever committed in the clear must be rotated",
        },
      ],
    },
    {
      name: "an encrypted file used without secret: true",
      files: () => keyPlacedOn(["db-1"], ["db-1"], false),
      at: "source: secrets/server.key.age",
      expected: [
        {
          severity: "error",
          code: "secret/not-marked",
          message:
            "secrets/server.key.age is encrypted (age) but is used without secret: true: the host would get the ciphertext as the file's content",
          fix: "add secret: true to this resource, so the agent on the host decrypts it",
        },
      ],
    },
    {
      name: "secret: true on content written in the clear",
      files: async () => fleet(["db-1"], { content: "KEY\n", secret: true }),
      at: "secret: true",
      expected: [
        {
          severity: "error",
          code: "secret/content",
          message:
            'secret: true takes the content from an encrypted `source` file, but resource "tls-key" has its content in the clear, in Git',
          fix: "encrypt the content (steward secret encrypt --assignment db FILE --out FILE.age) and give it as source: FILE.age",
        },
      ],
    },
    {
      name: "an age file without its recipient manifest",
      files: async () =>
        fleet(
          ["db-1"],
          { source: "secrets/server.key.age", secret: true },
          {
            "secrets/server.key.age": await encryptFor("KEY\n", [db1.recipient]),
          },
        ),
      at: "source: secrets/server.key.age",
      expected: [
        {
          severity: "error",
          code: "secret/no-manifest",
          message:
            "secrets/server.key.age has no recipient manifest (secrets/server.key.age.recipients): which hosts can read it cannot be told without decrypting it",
          fix: "run steward secret update secrets/server.key.age (it re-encrypts the file for the nodes it is placed on and writes the manifest); for a file encrypted with age -R FILE, copy FILE to secrets/server.key.age.recipients",
        },
      ],
    },
    {
      name: "an age file encrypted again for more recipients than its manifest lists",
      files: async () =>
        fleet(
          ["db-1"],
          { source: "secrets/server.key.age", secret: true },
          {
            "secrets/server.key.age": await encryptFor("KEY\n", [db1.recipient, operator.recipient]),
            "secrets/server.key.age.recipients": formatManifest("secrets/server.key.age", [
              { recipient: db1.recipient, role: "node", name: "db-1" },
            ]),
          },
        ),
      at: "source: secrets/server.key.age",
      expected: [
        {
          severity: "error",
          code: "secret/manifest-mismatch",
          message:
            "secrets/server.key.age is encrypted for 2 recipients but secrets/server.key.age.recipients lists 1: the file was encrypted again without its manifest",
          fix: "run steward secret update secrets/server.key.age",
        },
      ],
    },
    {
      name: "a manifest that still names a node the secret is no longer placed on (a warning)",
      files: () => keyPlacedOn(["db-1"], ["db-1", "db-2"]),
      at: "source: secrets/server.key.age",
      expected: [
        {
          severity: "warning",
          code: "secret/extra-recipient",
          message: "secrets/server.key.age is still encrypted for node db-2, which it is not placed on",
          fix: "run steward secret update secrets/server.key.age (and rotate the secret if db-2 must not read it: an old commit still can)",
        },
      ],
    },
    {
      name: "a SOPS file whose age recipients leave out a node it is placed on",
      files: async () =>
        fleet(
          ["db-1", "db-2"],
          { source: "secrets/key.sops.json", secret: true },
          {
            "secrets/key.sops.json": (await sopsFile({ binary: "KEY\n" }, [db1.recipient], "json")).text,
          },
        ),
      at: "source: secrets/key.sops.json",
      expected: [
        {
          severity: "error",
          code: "secret/not-for-node",
          message: "secrets/key.sops.json is placed on db-2 but not encrypted for it",
          fix: "add the node's age recipient to secrets/key.sops.json's recipients with sops (for instance in .sops.yaml, then sops updatekeys secrets/key.sops.json)",
        },
      ],
    },
    {
      name: "a SOPS map used as a file's content",
      files: async () =>
        fleet(
          ["db-1"],
          { source: "secrets/db.sops.yaml", secret: true },
          {
            "secrets/db.sops.yaml": (await sopsFile({ password: "p" }, [db1.recipient])).text,
          },
        ),
      at: "source: secrets/db.sops.yaml",
      expected: [
        {
          severity: "error",
          code: "secret/sops-not-a-file",
          message:
            "secrets/db.sops.yaml is a SOPS map of keys, not a file: a file's secret source must be in SOPS's binary format (one `data` entry)",
          fix: "encrypt the file itself: sops encrypt --input-type binary --output-type json FILE > secrets/db.sops.yaml; or take single values from this map with env: {NAME: {secret: secrets/db.sops.yaml, key: KEY}}",
        },
      ],
    },
  ];

  for (const { name, files, expected, at } of cases)
    it(`secret checks - ${name}`, async () => {
      const repo = await files();
      const loaded = await load(repo);
      const text = repo["assignments/db.yaml"]!.toString();
      const lines = text.split("\n");
      const line = lines.findIndex((l) => l.includes(at)) + 1;
      const column = lines[line - 1]!.indexOf(at.split(": ")[1]!) + 1;
      expect(only(loaded.diagnostics)).toEqual(
        expected.map((finding) => ({ ...finding, file: "assignments/db.yaml", line, column })),
      );
      expect(loaded.ok).toBe(expected.every((finding) => finding.severity === "warning"));
    });

  it("secret checks - a SOPS YAML map is content, never a fleet document; its keys are checked against the values that name them", async () => {
    const sops = (await sopsFile({ password: "p", user: "app" }, [db1.recipient])).text;
    const files: Files = {
      "nodes/db-1.yaml": nodeYaml("db-1", { identity: { age: db1.recipient } }),
      "assignments/db.yaml": assignmentYaml("db", {
        nodes: ["db-1"],
        resources: [
          {
            kind: "command",
            name: "migrate",
            run: ["true"],
            env: {
              DB_PASSWORD: { secret: "secrets/db.yaml", key: "password" },
              DB_NAME: { secret: "secrets/db.yaml", key: "name" },
            },
          },
        ],
      }),
      "secrets/db.yaml": sops,
    };
    const loaded = await load(files);
    const text = files["assignments/db.yaml"]!.toString();
    const line = text.split("\n").findIndex((l) => l.includes("DB_NAME")) + 1;
    expect(only(loaded.diagnostics)).toEqual([
      {
        severity: "error",
        code: "secret/unknown-key",
        file: "assignments/db.yaml",
        line: line + 1,
        column: expect.any(Number),
        message: 'secrets/db.yaml has no key "name" (it has "password", "user")',
        fix: "add name with sops edit secrets/db.yaml, or name one of its keys",
      },
    ]);
  });

  it("secret checks - a secret value's file that does not exist is source/missing at its field", async () => {
    const files: Files = {
      "nodes/db-1.yaml": nodeYaml("db-1", { identity: { age: db1.recipient } }),
      "assignments/db.yaml": assignmentYaml("db", {
        nodes: ["db-1"],
        resources: [
          { kind: "service", name: "db", exec: ["db"], env: { P: { secret: "secrets/none.age", key: "p" } } },
        ],
      }),
    };
    const loaded = await load(files);
    expect(only(loaded.diagnostics)).toEqual([
      expect.objectContaining({
        code: "source/missing",
        message: 'secret file "secrets/none.age" does not exist in the repository',
      }),
    ]);
  });
});
