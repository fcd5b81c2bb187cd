/**
 * The host's age identity at work: decrypting what the hub sent encrypted for this host, encrypting
 * to the host's own recipient (kept copies of replaced secret content), and the digest of a secret's
 * plaintext that reports may carry — an HMAC keyed by the identity, so nobody without the host's key
 * can test a guess against it. The identity is read from the agent's state directory
 * (`identity/age.key`, made by `steward agent identity`) and imported once as a CryptoKey: every
 * decryption of the process shares it.
 */
import {
  createDecipheriv,
  createHash,
  createHmac,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  KeyObject,
} from "node:crypto";
import { type Stats, statSync } from "node:fs";
import type { Decrypter } from "age-encryption";
import { permanent, type ResourceFailure } from "./failure.js";
import { identityFiles, readAgeIdentity } from "./identity.js";

let decrypted = 0;

/** How many age files this process has decrypted so far (benchmarks and tests count them). */
export function decryptionsSoFar(): number {
  return decrypted;
}

const BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const GENERATOR = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

function polymod(values: readonly number[]): number {
  let check = 1;
  for (const value of values) {
    const top = check >>> 25;
    check = (((check & 0x1ffffff) << 5) ^ value) >>> 0;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) check = (check ^ GENERATOR[i]!) >>> 0;
  }
  return check;
}

/** The bytes of a bech32 string (age's keys), checksum verified; undefined when it is not one. */
export function bech32Bytes(text: string): { prefix: string; bytes: Uint8Array } | undefined {
  const lower = text.toLowerCase();
  if (lower !== text && text.toUpperCase() !== text) return undefined;
  const separator = lower.lastIndexOf("1");
  if (separator < 1 || lower.length - separator < 7) return undefined;
  const prefix = lower.slice(0, separator);
  const data: number[] = [];
  for (const char of lower.slice(separator + 1)) {
    const value = BECH32.indexOf(char);
    if (value < 0) return undefined;
    data.push(value);
  }
  const expanded = [...prefix].map((c) => c.charCodeAt(0) >> 5);
  expanded.push(0, ...[...prefix].map((c) => c.charCodeAt(0) & 31));
  if (polymod([...expanded, ...data]) !== 1) return undefined;
  const bytes: number[] = [];
  let accumulator = 0;
  let bits = 0;
  for (const value of data.slice(0, -6)) {
    accumulator = (accumulator << 5) | value;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      bytes.push((accumulator >> bits) & 0xff);
    }
  }
  return { prefix, bytes: Uint8Array.from(bytes) };
}

// PKCS #8 for a raw X25519 private key: WebCrypto imports no other form of one.
const PKCS8_X25519 = [
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20,
];

const X25519_LABEL = "age-encryption.org/v1/X25519";
const ZERO_NONCE = Buffer.alloc(12);

/**
 * The host's X25519 identity as age's Decrypter uses one (age-encryption's Identity interface): it
 * unwraps the file key from the stanza made for this host, as the age spec says (C2SP age: X25519
 * recipient type), with Node's native X25519, HKDF and ChaCha20-Poly1305 on the key imported once.
 * age tries a file's stanzas in turn until one opens; a secret encrypted for ten hosts is tried
 * five times on average, a thousand times per apply of a thousand secrets, and the native calls
 * make each try cheap (WebCrypto costs a CryptoKey per peer key). Everything else of the format —
 * header, MAC, payload — stays age-encryption's.
 */
class X25519Stanzas {
  constructor(
    private readonly key: KeyObject,
    private readonly recipient: Uint8Array,
  ) {}

  unwrapFileKey(stanzas: readonly { args: string[]; body: Uint8Array }[]): Uint8Array | null {
    for (const stanza of stanzas) {
      if (stanza.args[0] !== "X25519") continue;
      const share = stanza.args.length === 2 ? Buffer.from(stanza.args[1]!, "base64") : Buffer.alloc(0);
      if (share.length !== 32 || stanza.body.length !== 32) throw new Error("invalid X25519 stanza");
      let secret: Buffer;
      try {
        const peer = createPublicKey({
          key: { kty: "OKP", crv: "X25519", x: share.toString("base64url") },
          format: "jwk",
        });
        secret = diffieHellman({ privateKey: this.key, publicKey: peer });
      } catch {
        // A low-order point (an all-zero shared secret): no file key can come of it.
        throw new Error("invalid X25519 stanza");
      }
      const wrapKey = Buffer.from(
        hkdfSync("sha256", secret, Buffer.concat([share, this.recipient]), X25519_LABEL, 32),
      );
      try {
        const decipher = createDecipheriv("chacha20-poly1305", wrapKey, ZERO_NONCE, { authTagLength: 16 });
        decipher.setAuthTag(stanza.body.subarray(16));
        return new Uint8Array(
          Buffer.concat([decipher.update(stanza.body.subarray(0, 16)), decipher.final()]),
        );
      } catch {
        // Another recipient's stanza: try the next one.
      }
    }
    return null;
  }
}

/** What stops the host from decrypting a secret, as a permanent failure naming the fix. */
export function hostKeyMissing(stateDir: string): ResourceFailure {
  return permanent(
    "NoHostIdentity",
    `this host has no age identity (${identityFiles(stateDir).age}), so it cannot decrypt the secrets placed on it: run steward agent identity on this host, put the age recipient it prints in spec.identity.age of the node's document, and re-encrypt the secrets with steward secret update`,
  );
}

/** The host's age key, ready to decrypt, encrypt to itself and digest. */
export class HostKey {
  private constructor(
    /** The host's recipient (`age1...`): public. */
    readonly recipient: string,
    private readonly decrypter: Decrypter,
    private readonly digestKey: Buffer,
    private readonly age: typeof import("age-encryption"),
  ) {}

  /** Imports an identity (`AGE-SECRET-KEY-1...`); throws when it is not an X25519 identity. */
  static async fromIdentity(identity: string): Promise<HostKey> {
    const decoded = bech32Bytes(identity);
    if (decoded?.prefix !== "age-secret-key-" || decoded.bytes.length !== 32)
      throw new Error("the host's age identity is not an X25519 identity (AGE-SECRET-KEY-1...)");
    const age = await import("age-encryption");
    const key = await crypto.subtle.importKey(
      "pkcs8",
      Uint8Array.from([...PKCS8_X25519, ...decoded.bytes]),
      { name: "X25519" },
      false,
      ["deriveBits"],
    );
    const recipient = await age.identityToRecipient(identity);
    const decrypter = new age.Decrypter();
    decrypter.addIdentity(new X25519Stanzas(KeyObject.from(key), bech32Bytes(recipient)!.bytes));
    // Derived from the identity, never the identity itself: a digest leaks nothing of the key.
    const digestKey = createHash("sha256")
      .update("steward secret digest v1\0")
      .update(decoded.bytes)
      .digest();
    return new HostKey(recipient, decrypter, digestKey, age);
  }

  /** The plaintext of a binary age file; throws the decrypter's error for one it cannot open. */
  decrypt(ciphertext: Uint8Array): Promise<Uint8Array> {
    decrypted++;
    return this.decrypter.decrypt(ciphertext);
  }

  /** `hmac-sha256:<hex>` of a plaintext, keyed by this host's identity. */
  digest(plaintext: Uint8Array | string): string {
    return `hmac-sha256:${createHmac("sha256", this.digestKey).update(plaintext).digest("hex")}`;
  }

  /** An armored age file of `plaintext` that only this host can open. */
  async sealForHost(plaintext: Uint8Array): Promise<string> {
    const encrypter = new this.age.Encrypter();
    encrypter.addRecipient(this.recipient);
    return this.age.armor.encode(await encrypter.encrypt(plaintext));
  }
}

const loaded = new Map<string, { stats: Stats; key: Promise<HostKey | undefined> }>();

/**
 * The host key of an agent's state directory, or undefined when no identity was made there. Kept
 * per process while the identity file is the same one (a replaced identity is read again).
 */
export function hostKeyOf(stateDir: string): Promise<HostKey | undefined> {
  const file = identityFiles(stateDir).age;
  let stats: Stats | undefined;
  try {
    stats = statSync(file, { throwIfNoEntry: false });
  } catch {
    stats = undefined;
  }
  if (!stats) {
    loaded.delete(stateDir);
    return Promise.resolve(undefined);
  }
  const known = loaded.get(stateDir);
  if (
    known &&
    known.stats.ino === stats.ino &&
    known.stats.mtimeMs === stats.mtimeMs &&
    known.stats.size === stats.size
  )
    return known.key;
  const identity = readAgeIdentity(stateDir);
  const key = identity === undefined ? Promise.resolve(undefined) : HostKey.fromIdentity(identity);
  loaded.set(stateDir, { stats, key });
  return key;
}
