/** YAML with positions: locate() finds the line and column of a path, and parsing never throws. */
import { describe, expect, it } from "vitest";
import { locate, parseYamlFile } from "../../src/model/yaml.js";

const text = `# a comment
apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: web
spec:
  nodes: [web-1, web-2]
  resources:
    - kind: file
      path: /srv/a
    - {kind: directory, path: /srv/b}
---
apiVersion: steward.dev/v1
kind: Node
metadata: {name: web-1}
spec:
  roots:
    - /srv
`;

describe("yaml - locate", () => {
  it.each([
    [0, [], false, 2, 1],
    [0, ["kind"], false, 3, 7],
    [0, ["kind"], true, 3, 1],
    [0, ["metadata", "name"], false, 5, 9],
    [0, ["metadata", "name"], true, 5, 3],
    [0, ["spec", "nodes", 1], false, 7, 18],
    [0, ["spec", "resources", 0], false, 9, 7],
    [0, ["spec", "resources", 0, "path"], false, 10, 13],
    [0, ["spec", "resources", 1, "path"], false, 11, 31],
    [0, ["spec", "resources", 1, "path"], true, 11, 25],
    [1, ["metadata", "name"], false, 15, 18],
    [1, ["spec", "roots", 0], false, 18, 7],
  ] as const)("yaml - document %i path %j (key: %s) is at %i:%i", (index, path, key, line, column) => {
    expect(locate(text, index, path, key)).toEqual({ line, column });
  });

  it("yaml - a path that does not exist falls back to the deepest node found", () => {
    expect(locate(text, 0, ["spec", "resources", 0, "mode"])).toEqual({ line: 9, column: 7 });
    expect(locate(text, 0, ["spec", "probes", 3])).toEqual({ line: 7, column: 3 });
    expect(locate(text, 5, ["spec"])).toEqual({ line: 1, column: 1 });
  });

  it("yaml - CRLF line ends and a byte order mark do not shift columns", () => {
    const crlf = "apiVersion: steward.dev/v1\r\nkind: Node\r\nmetadata:\r\n  name: n\r\n";
    expect(locate(crlf, 0, ["metadata", "name"])).toEqual({ line: 4, column: 9 });
    const parsed = parseYamlFile(Buffer.from(`\ufeff${crlf}`));
    expect(parsed.problems).toEqual([]);
    expect(parsed.documents).toEqual([
      { index: 0, value: { apiVersion: "steward.dev/v1", kind: "Node", metadata: { name: "n" } } },
    ]);
  });
});

describe("yaml - parse", () => {
  it("yaml - documents keep their index among all documents; empty ones are skipped", () => {
    const parsed = parseYamlFile(Buffer.from("---\n# nothing\n---\na: 1\n---\n---\nb: [x]\n"));
    expect(parsed.problems).toEqual([]);
    expect(parsed.documents).toEqual([
      { index: 1, value: { a: 1 } },
      { index: 3, value: { b: ["x"] } },
    ]);
  });

  it("yaml - the fast parser and the positional parser read the same values (anchors take the positional one)", () => {
    const plain = "a: 0644\nb: 0o17\nc: yes\nd: ~\ne: 2024-01-01\nf: [1, '2']\n";
    const withAnchor = `${plain}g: &x {h: 1}\ni: *x\n`;
    const fast = parseYamlFile(Buffer.from(plain)).documents[0]!.value as Record<string, unknown>;
    const positional = parseYamlFile(Buffer.from(withAnchor)).documents[0]!.value as Record<string, unknown>;
    expect(fast).toEqual({ a: 644, b: 15, c: "yes", d: null, e: "2024-01-01", f: [1, "2"] });
    expect(positional).toEqual({ ...fast, g: { h: 1 }, i: { h: 1 } });
  });

  it.each([
    ["syntax error", "a: [1, 2\nb: 3\n", "yaml/syntax", 2, 1],
    ["duplicate key", "a: 1\nb: 2\na: 3\n", "yaml/duplicate-key", 3, 1],
    ["tab indentation", "a:\n\tb: 1\n", "yaml/syntax", 2, 1],
    ["empty file", "", "file/empty", 1, 1],
    ["only comments", "# nothing here\n", "file/empty", 1, 1],
    ["NUL byte", "a: 1\nb: \u0000\n", "file/binary", 2, 4],
  ])("yaml - %s is a problem with a position, not an exception", (_, source, code, line, column) => {
    const parsed = parseYamlFile(Buffer.from(source));
    expect(parsed.problems[0]).toMatchObject({ severity: "error", code, line, column });
    expect(parsed.problems[0]!.fix).toBeTruthy();
  });

  it("yaml - an alias bomb is stopped at the expansion limit", () => {
    let bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n';
    for (const [name, prev] of [
      ["b", "a"],
      ["c", "b"],
      ["d", "c"],
      ["e", "d"],
      ["f", "e"],
      ["g", "f"],
      ["h", "g"],
    ])
      bomb += `${name}: &${name} [${Array(9).fill(`*${prev}`).join(",")}]\n`;
    const parsed = parseYamlFile(Buffer.from(bomb));
    expect(parsed.documents).toEqual([]);
    expect(parsed.problems).toMatchObject([{ code: "yaml/aliases", line: 1, column: 1 }]);
  });

  it("yaml - invalid UTF-8 is located at the offending byte", () => {
    const parsed = parseYamlFile(new Uint8Array([...Buffer.from("a: 1\nb: caf"), 0xe9, 0x0a]));
    expect(parsed.problems).toMatchObject([
      { code: "file/encoding", line: 2, column: 7, message: "byte 0xe9 at offset 11 is not valid UTF-8" },
    ]);
  });
});

describe("yaml - encodings", () => {
  it.each([
    ["an overlong encoding", [0xc0, 0xaf], 4],
    ["a UTF-16 surrogate", [0xed, 0xa0, 0x80], 4],
    ["a code point above U+10FFFF", [0xf4, 0x90, 0x80, 0x80], 4],
    ["a truncated sequence", [0xe2, 0x82], 4],
  ])("yaml - %s is not UTF-8 and is located", (_, bad, column) => {
    const parsed = parseYamlFile(new Uint8Array([...Buffer.from("a: "), ...bad, 0x0a]));
    expect(parsed.problems).toMatchObject([{ code: "file/encoding", line: 1, column }]);
  });

  it("yaml - multi-byte UTF-8 is fine", () => {
    expect(parseYamlFile(Buffer.from("a: café €𝄞\n")).documents).toEqual([
      { index: 0, value: { a: "café €𝄞" } },
    ]);
  });
});
