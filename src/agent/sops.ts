/**
 * SOPS files, decrypted on the host the way `sops decrypt` does it (getsops/sops: `sops.go`'s
 * Tree.Decrypt and `aes/cipher.go`), for files whose data key is encrypted for the host's age
 * recipient:
 *
 * - the data key (32 bytes) is the plaintext of one of `sops.age[].enc`, an armored age file;
 * - each value to decrypt is `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`: AES-256-GCM with the
 *   value's IV (32 bytes) and, as additional data, the path of keys to it joined with `:` plus a
 *   final `:` (list items add nothing to the path);
 * - which values are encrypted follows the metadata (`unencrypted_suffix`, default `_unencrypted`,
 *   `encrypted_suffix`, `unencrypted_regex`, `encrypted_regex`);
 * - the MAC is SHA-512 over every value's plaintext in document order (only encrypted ones with
 *   `mac_only_encrypted`, after a fixed prefix), as upper-case hex, stored encrypted like a value
 *   with `lastmodified` (RFC 3339) as additional data. A file whose MAC does not match is refused:
 *   it was changed after it was encrypted.
 *
 * Comments, key groups (Shamir) and master keys other than age are not read.
 */
import { createDecipheriv, createHash } from "node:crypto";
import { parse } from "yaml";
import { sopsShaped } from "../model/secrets.js";

/** Why a SOPS file could not be decrypted; `kind` says which failure it is. */
export class SopsError extends Error {
  override readonly name = "SopsError";
  constructor(
    readonly kind: "malformed" | "not-for-host" | "tampered",
    message: string,
  ) {
    super(message);
  }
}

// sha256("sops"): SOPS starts the MAC with it when only encrypted values are covered.
const MAC_ONLY_ENCRYPTED_PREFIX = Buffer.from(
  "8a3fd2ad54ce66527b1034f3d147be0b0b975b3bf44f72c6fdadec8176f27d69",
  "hex",
);
const ENCRYPTED = /^ENC\[AES256_GCM,data:(.*),iv:(.+),tag:(.+),type:(.+)\]$/s;

/** A decrypted value as SOPS types it. */
export type SopsValue = string | number | boolean | Uint8Array | null;

/** One value's plaintext, decrypted with the data key and its path as additional data. */
function decryptValue(text: string, key: Uint8Array, additionalData: string): SopsValue {
  if (text === "") return "";
  const match = ENCRYPTED.exec(text);
  if (!match)
    throw new SopsError(
      "malformed",
      `a value at ${additionalData} is not in SOPS's ENC[AES256_GCM,...] format`,
    );
  const [, data, iv, tag, type] = match as unknown as [string, string, string, string, string];
  let plaintext: Buffer;
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64"));
    decipher.setAAD(Buffer.from(additionalData, "utf8"));
    decipher.setAuthTag(Buffer.from(tag, "base64"));
    plaintext = Buffer.concat([decipher.update(Buffer.from(data, "base64")), decipher.final()]);
  } catch {
    throw new SopsError(
      "tampered",
      `the value at ${additionalData.slice(0, -1) || "(top)"} does not decrypt with the file's data key: it was changed after it was encrypted`,
    );
  }
  const value = plaintext.toString("utf8");
  switch (type) {
    case "str":
      return value;
    case "int":
    case "int64":
    case "float":
      return Number(value);
    case "bool":
      return /^(1|t|true)$/i.test(value);
    case "bytes":
      return new Uint8Array(plaintext);
    default:
      throw new SopsError("malformed", `a value at ${additionalData} has the unknown SOPS type ${type}`);
  }
}

/** SOPS's bytes of a value for the MAC (Go's `ToBytes`): True/False for booleans, decimal numbers. */
function macBytes(value: SopsValue): Uint8Array {
  if (value instanceof Uint8Array) return value;
  if (typeof value === "boolean") return Buffer.from(value ? "True" : "False");
  if (typeof value === "number")
    return Buffer.from(Number.isInteger(value) ? BigInt(value).toString() : String(value));
  return Buffer.from(String(value), "utf8");
}

/** Which values the metadata says are encrypted (SOPS's shouldBeEncrypted, comments aside). */
function encryptedBy(sops: Map<unknown, unknown>): (path: readonly string[]) => boolean {
  const text = (key: string) => (typeof sops.get(key) === "string" ? (sops.get(key) as string) : "");
  const unencryptedSuffix = text("unencrypted_suffix");
  const encryptedSuffix = text("encrypted_suffix");
  const unencryptedRegex = text("unencrypted_regex");
  const encryptedRegex = text("encrypted_regex");
  // SOPS writes the default suffix when none of the four is set.
  const suffix =
    unencryptedSuffix || (encryptedSuffix || unencryptedRegex || encryptedRegex ? "" : "_unencrypted");
  return (path) => {
    let encrypted = true;
    if (suffix && path.some((key) => key.endsWith(suffix))) encrypted = false;
    if (encryptedSuffix) encrypted = path.some((key) => key.endsWith(encryptedSuffix));
    if (unencryptedRegex && path.some((key) => new RegExp(unencryptedRegex).test(key))) encrypted = false;
    if (encryptedRegex) encrypted = path.some((key) => new RegExp(encryptedRegex).test(key));
    return encrypted;
  };
}

/** RFC 3339 as Go's time.Format(time.RFC3339) writes it: whole seconds, `Z` for UTC. */
function goRfc3339(text: string): string {
  const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(text.trim());
  if (!match) return text;
  return `${match[1]}${match[2] === "+00:00" || match[2] === "-00:00" ? "Z" : match[2]}`;
}

/** The file in document order (mappings as Maps): the order its MAC covers the values in. */
function orderedDocument(bytes: Uint8Array): Map<unknown, unknown> | undefined {
  try {
    return sopsShaped(
      parse(Buffer.from(bytes).toString("utf8"), {
        mapAsMap: true,
        schema: "core",
        uniqueKeys: true,
        maxAliasCount: 0,
      }),
    );
  } catch {
    return undefined;
  }
}

/** A decrypted SOPS document: its data, keys in document order (the `sops` mapping left out). */
export type SopsTree = Map<string, unknown>;

/**
 * Decrypts a SOPS file whose data key `unwrap` can open (it is given each `sops.age[].enc` in turn
 * and returns undefined for one that is not for this host), and verifies its MAC. Throws SopsError.
 */
export async function decryptSops(
  bytes: Uint8Array,
  unwrap: (armored: string) => Promise<Uint8Array | undefined>,
): Promise<SopsTree> {
  const document = orderedDocument(bytes);
  if (!document) throw new SopsError("malformed", "not a SOPS YAML or JSON file");
  const sops = document.get("sops") as Map<unknown, unknown>;
  const entries = sops.get("age");
  let key: Uint8Array | undefined;
  for (const entry of Array.isArray(entries) ? entries : []) {
    const enc = entry instanceof Map ? entry.get("enc") : undefined;
    if (typeof enc !== "string") continue;
    key = await unwrap(enc);
    if (key) break;
  }
  if (!key)
    throw new SopsError(
      "not-for-host",
      "its data key is encrypted for none of this host's identities (sops.age)",
    );
  if (key.length !== 32) throw new SopsError("malformed", "its data key is not 32 bytes");
  const encrypted = encryptedBy(sops);
  const macOnlyEncrypted = sops.get("mac_only_encrypted") === true;
  const hash = createHash("sha512");
  if (macOnlyEncrypted) hash.update(MAC_ONLY_ENCRYPTED_PREFIX);

  const walk = (value: unknown, path: string[]): unknown => {
    if (value instanceof Map) {
      const out = new Map<string, unknown>();
      for (const [name, item] of value) {
        if (typeof name !== "string") throw new SopsError("malformed", "SOPS reads string keys only");
        out.set(name, walk(item, [...path, name]));
      }
      return out;
    }
    if (Array.isArray(value)) return value.map((item) => walk(item, path));
    // Nothing to decrypt or to cover: SOPS skips null values.
    if (value === null || value === undefined) return value;
    const isEncrypted = encrypted(path);
    let plain: SopsValue;
    if (isEncrypted) {
      if (typeof value !== "string")
        throw new SopsError("tampered", `the value at ${path.join(":")} should be encrypted but is not`);
      plain = decryptValue(value, key, `${path.join(":")}:`);
    } else plain = value as SopsValue;
    if (!macOnlyEncrypted || isEncrypted) hash.update(macBytes(plain));
    return plain;
  };
  const tree: SopsTree = new Map();
  for (const [name, value] of document) {
    if (name === "sops") continue;
    if (typeof name !== "string") throw new SopsError("malformed", "SOPS reads string keys only");
    tree.set(name, walk(value, [name]));
  }
  const mac = sops.get("mac");
  const lastModified = sops.get("lastmodified");
  if (typeof mac !== "string" || typeof lastModified !== "string")
    throw new SopsError("malformed", "its sops metadata has no mac or lastmodified");
  let stored: SopsValue;
  try {
    stored = decryptValue(mac, key, goRfc3339(lastModified));
  } catch {
    throw new SopsError(
      "tampered",
      "its MAC does not decrypt with the file's data key: it was changed after it was encrypted",
    );
  }
  if (typeof stored !== "string" || stored.toUpperCase() !== hash.digest("hex").toUpperCase())
    throw new SopsError(
      "tampered",
      "its MAC does not match its content: it was changed after it was encrypted",
    );
  return tree;
}
