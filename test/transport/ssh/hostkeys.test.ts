import { createHmac } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  blobKeyType,
  checkHostKey,
  hostFieldMatches,
  hostKeyAlgorithms,
  KnownHostsFile,
  knownHostsName,
  parsePublicKey,
} from "../../../src/transport/ssh/hostkeys.js";

// Real key material shapes: an ed25519 blob is string "ssh-ed25519" + 32-byte key.
function ed25519Blob(fill: number): string {
  const type = Buffer.from("ssh-ed25519");
  const key = Buffer.alloc(32, fill);
  const blob = Buffer.alloc(4 + type.length + 4 + key.length);
  blob.writeUInt32BE(type.length, 0);
  type.copy(blob, 4);
  blob.writeUInt32BE(key.length, 4 + type.length);
  key.copy(blob, 8 + type.length);
  return blob.toString("base64");
}
const KEY_A = { type: "ssh-ed25519", base64: ed25519Blob(1) };
const KEY_B = { type: "ssh-ed25519", base64: ed25519Blob(2) };

function hashed(name: string): string {
  const salt = Buffer.alloc(20, 7);
  return `|1|${salt.toString("base64")}|${createHmac("sha1", salt).update(name).digest("base64")}`;
}

describe("ssh host keys - known_hosts", () => {
  it("ssh host keys - names non-default ports as [host]:port, like OpenSSH", () => {
    expect(knownHostsName("db-1.example.net", 22)).toBe("db-1.example.net");
    expect(knownHostsName("127.0.0.1", 2222)).toBe("[127.0.0.1]:2222");
  });

  it("ssh host keys - matches plain, wildcard, negated and hashed host fields", () => {
    const cases: [string, string, boolean][] = [
      ["web-1,web-2", "web-2", true],
      ["web-*", "web-7", true],
      ["web-?", "web-10", false],
      ["*.example.net,!db-*.example.net", "web-1.example.net", true],
      ["*.example.net,!db-*.example.net", "db-1.example.net", false],
      ["[127.0.0.1]:2222", "[127.0.0.1]:2222", true],
      ["127.0.0.1", "[127.0.0.1]:2222", false],
      [hashed("[10.0.0.5]:2200"), "[10.0.0.5]:2200", true],
      [hashed("[10.0.0.5]:2200"), "[10.0.0.5]:2201", false],
    ];
    for (const [field, name, expected] of cases)
      expect([field, name, hostFieldMatches(field, name)]).toEqual([field, name, expected]);
  });

  it("ssh host keys - reads trusted and revoked keys for a host, skipping comments and CA lines", () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-kh-"));
    const file = join(dir, "known_hosts");
    writeFileSync(
      file,
      [
        "# a comment",
        `[127.0.0.1]:2222 ${KEY_A.type} ${KEY_A.base64} host-a`,
        `@revoked [127.0.0.1]:2222 ${KEY_B.type} ${KEY_B.base64}`,
        `@cert-authority * ${KEY_B.type} ${KEY_B.base64}`,
        "garbage line",
        `other ${KEY_B.type} ${KEY_B.base64}`,
      ].join("\n"),
    );
    const known = new KnownHostsFile(file).keysFor("127.0.0.1", 2222);
    expect(known.trusted).toEqual([KEY_A]);
    expect(known.revoked).toEqual([KEY_B]);
    expect(checkHostKey(KEY_A, known)).toEqual({ kind: "trusted" });
    expect(checkHostKey(KEY_B, known)).toEqual({ kind: "revoked" });
  });

  it("ssh host keys - tells an unknown host from a changed key", () => {
    const none = { trusted: [], revoked: [], source: "x" };
    const pinned = { trusted: [KEY_A], revoked: [], source: "x" };
    expect(checkHostKey(KEY_A, none)).toEqual({ kind: "unknown" });
    expect(checkHostKey(KEY_B, pinned)).toEqual({ kind: "changed", expected: [KEY_A] });
  });

  it("ssh host keys - records a first-use key in one line and sees it on the next lookup", () => {
    const dir = mkdtempSync(join(tmpdir(), "steward-kh-"));
    const file = join(dir, "sub", "known_hosts");
    const known = new KnownHostsFile(file);
    expect(known.keysFor("10.1.2.3", 22).trusted).toEqual([]);
    known.record("10.1.2.3", 22, KEY_A, "steward-tofu node=n1");
    expect(known.keysFor("10.1.2.3", 22).trusted).toEqual([KEY_A]);
    expect(readFileSync(file, "utf8")).toBe(`10.1.2.3 ${KEY_A.type} ${KEY_A.base64} steward-tofu node=n1\n`);
  });

  it("ssh host keys - parses key lines and offers the algorithms of pinned key types", () => {
    expect(parsePublicKey(`${KEY_A.type} ${KEY_A.base64} comment here`)).toEqual(KEY_A);
    expect(parsePublicKey("ssh-ed25519")).toBeUndefined();
    expect(blobKeyType(Buffer.from(KEY_A.base64, "base64"))).toBe("ssh-ed25519");
    expect(hostKeyAlgorithms([{ type: "ssh-rsa", base64: "AA" }, KEY_A])).toEqual([
      "rsa-sha2-512",
      "rsa-sha2-256",
      "ssh-rsa",
      "ssh-ed25519",
    ]);
  });
});
