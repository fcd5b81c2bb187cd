/**
 * SOPS files for tests, written from SOPS's published file format (Debian ships no `sops`). The
 * format, as getsops/sops writes it (v3; `sops.go` Tree.Encrypt, `aes/cipher.go`,
 * `stores/yaml`, `stores/json`, `age/keysource.go`):
 *
 * - a random 32-byte data key, encrypted for each age recipient as an armored age file:
 *   `sops.age[] = {recipient, enc}`;
 * - each value becomes `ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<str|int|float|bool>]`:
 *   AES-256-GCM under the data key with a random 32-byte IV, the ciphertext without its 16-byte tag
 *   in `data`, the tag in `tag`, and as additional data the keys from the root to the value joined
 *   with `:` plus a final `:` (`db:password:`; list items add nothing); keys ending in
 *   `unencrypted_suffix` (default `_unencrypted`) stay in the clear;
 * - the MAC: SHA-512 over each value's plaintext bytes in document order (booleans as
 *   `True`/`False`), upper-case hex, itself encrypted as a `str` value with `lastmodified` (RFC
 *   3339, whole seconds) as additional data: `sops.mac`;
 * - YAML and JSON files keep their keys in the clear; a binary file is the JSON document
 *   `{"data": ENC[...], "sops": {...}}`.
 */
import { createCipheriv, createHash, randomBytes } from "node:crypto";
import { stringify } from "yaml";
import { encryptFor } from "./secrets.js";

type Plain = string | number | boolean | Plain[] | { [key: string]: Plain };

function encryptValue(value: string | number | boolean, key: Buffer, additionalData: string): string {
  const type =
    typeof value === "string"
      ? "str"
      : typeof value === "boolean"
        ? "bool"
        : Number.isInteger(value)
          ? "int"
          : "float";
  const text = typeof value === "boolean" ? (value ? "True" : "False") : String(value);
  const iv = randomBytes(32);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(additionalData, "utf8"));
  const data = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
  return `ENC[AES256_GCM,data:${data.toString("base64")},iv:${iv.toString("base64")},tag:${cipher.getAuthTag().toString("base64")},type:${type}]`;
}

function macBytes(value: string | number | boolean): string {
  return typeof value === "boolean" ? (value ? "True" : "False") : String(value);
}

/** What sopsFile returns: the file's text, and its data key (to forge values in tamper tests). */
export interface SopsFixture {
  text: string;
  dataKey: Buffer;
}

/**
 * A SOPS file of `tree` (in its insertion order) for the age `recipients`: YAML, JSON, or SOPS's
 * binary format (`binary`: the plaintext of a whole file, as `data`).
 */
export async function sopsFile(
  tree: Record<string, Plain> | { binary: string },
  recipients: readonly string[],
  format: "yaml" | "json" = "yaml",
): Promise<SopsFixture> {
  const dataKey = randomBytes(32);
  const hash = createHash("sha512");
  const suffix = "_unencrypted";
  const walk = (value: Plain, path: string[]): Plain => {
    if (Array.isArray(value)) return value.map((item) => walk(item, path));
    if (value !== null && typeof value === "object") {
      const out: Record<string, Plain> = {};
      for (const [name, item] of Object.entries(value)) out[name] = walk(item, [...path, name]);
      return out;
    }
    hash.update(macBytes(value));
    if (path.some((name) => name.endsWith(suffix))) return value;
    return encryptValue(value, dataKey, `${path.join(":")}:`);
  };
  const plain =
    "binary" in tree && typeof tree.binary === "string"
      ? { data: tree.binary }
      : (tree as Record<string, Plain>);
  const data: Record<string, Plain> = {};
  for (const [name, value] of Object.entries(plain)) data[name] = walk(value, [name]);
  const lastmodified = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace(".000Z", "Z");
  const mac = encryptValue(hash.digest("hex").toUpperCase(), dataKey, lastmodified);
  const age = [];
  for (const recipient of recipients)
    age.push({ recipient, enc: (await encryptFor(dataKey, [recipient])).toString("utf8") });
  const sops = { age, lastmodified, mac, unencrypted_suffix: suffix, version: "3.8.1" };
  const document = { ...data, sops };
  const text = format === "yaml" ? stringify(document) : `${JSON.stringify(document, null, 4)}\n`;
  return { text, dataKey };
}

/**
 * A value encrypted as SOPS does with a known data key and additional data (`password:` for a
 * value, `lastmodified` for the MAC): a forged value for a tampered file.
 */
export function sopsValue(value: string, dataKey: Buffer, additionalData: string): string {
  return encryptValue(value, dataKey, additionalData);
}
