/**
 * Secrets in tests: real age identities and encryption (age-encryption, and Debian's `age` CLI for
 * interoperability), bundles that carry ciphertext as the hub sends it, and the search of every
 * place a secret must never reach, byte for byte, for its plaintext and its base64.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { armor, Encrypter, generateX25519Identity, identityToRecipient } from "age-encryption";

/** A fresh age X25519 identity and its recipient. */
export async function newIdentity(): Promise<{ identity: string; recipient: string }> {
  const identity = await generateX25519Identity();
  return { identity, recipient: await identityToRecipient(identity) };
}

/** `plaintext` encrypted for `recipients` with age-encryption: armored text, or binary. */
export async function encryptFor(
  plaintext: string | Uint8Array,
  recipients: readonly string[],
  options: { armor?: boolean } = {},
): Promise<Buffer> {
  const encrypter = new Encrypter();
  for (const recipient of recipients) encrypter.addRecipient(recipient);
  const binary = await encrypter.encrypt(plaintext);
  return options.armor === false ? Buffer.from(binary) : Buffer.from(armor.encode(binary), "utf8");
}

/** Runs Debian's `age` (1.1.1 here) with `input` on stdin; fails naming the package when it is missing. */
export function ageCli(args: string[], input?: string | Uint8Array): Buffer {
  if (!existsSync("/usr/bin/age")) throw new Error("the age CLI is missing: apt-get install -y age");
  return execFileSync("/usr/bin/age", args, { input, stdio: ["pipe", "pipe", "pipe"] });
}

/** What a secret must never show as: its plaintext, its base64, and each long line of it on its own. */
export function traces(plaintext: string): string[] {
  const found = new Set([plaintext, Buffer.from(plaintext).toString("base64")]);
  for (const line of plaintext.split("\n")) if (line.trim().length >= 16) found.add(line.trim());
  return [...found];
}

/** Every file below `dir` (or `dir` itself), as name and bytes. */
export function filesBelow(dir: string): { name: string; bytes: Buffer }[] {
  if (!existsSync(dir)) return [];
  if (statSync(dir).isFile()) return [{ name: dir, bytes: readFileSync(dir) }];
  const out: { name: string; bytes: Buffer }[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) {
      const path = join(entry.parentPath, entry.name);
      out.push({ name: path, bytes: readFileSync(path) });
    }
  return out;
}

/**
 * Where any of `needles` occurs in `places` (byte for byte): `name: needle…` for each hit, so a
 * test that expects none prints exactly what leaked where.
 */
export function leaks(
  needles: readonly string[],
  places: readonly { name: string; bytes: Uint8Array | string }[],
): string[] {
  const hits: string[] = [];
  for (const place of places) {
    const bytes = typeof place.bytes === "string" ? Buffer.from(place.bytes) : Buffer.from(place.bytes);
    for (const needle of needles)
      if (bytes.includes(Buffer.from(needle))) hits.push(`${place.name}: ${needle.slice(0, 24)}…`);
  }
  return hits;
}
