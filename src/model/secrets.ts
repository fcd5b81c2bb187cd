/**
 * Secret files as steward reads them without decrypting anything: which format a file is in (age,
 * armored or binary, or SOPS), the recipient stanzas of an age header, the recipients a SOPS file
 * names, and the recipient manifest steward writes beside every age file it encrypts.
 *
 * age's X25519 stanzas do not say whom they are for, so the manifest is what tells `steward
 * validate` (and the Action) which hosts can read a secret: `<path>.recipients`, an age recipients
 * file (`age -R` reads it) whose comments name the node or operator of each recipient. Validate
 * checks that the file has one X25519 stanza per recipient the manifest lists; a file encrypted
 * again by hand for other keys shows as a count that differs. The hub and the Action never hold an
 * identity: nothing here can decrypt.
 */
import jsyaml from "js-yaml";

/** How a secret file is encrypted. */
export type SecretFormat = "age-armored" | "age-binary" | "sops";

/** The suffix of a secret's recipient manifest: `files/db.key.age` → `files/db.key.age.recipients`. */
export const MANIFEST_SUFFIX = ".recipients";

const ARMOR_BEGIN = "-----BEGIN AGE ENCRYPTED FILE-----";
const ARMOR_END = "-----END AGE ENCRYPTED FILE-----";
const AGE_INTRO = "age-encryption.org/v1\n";

/** The manifest of the secret at `path`. */
export function manifestPath(path: string): string {
  return `${path}${MANIFEST_SUFFIX}`;
}

function startsWith(bytes: Uint8Array, prefix: string): boolean {
  if (bytes.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[i] !== prefix.charCodeAt(i)) return false;
  return true;
}

/** The bytes after leading ASCII white space (an armored file may start with some). */
function trimStart(bytes: Uint8Array): Uint8Array {
  let i = 0;
  while (
    i < bytes.length &&
    (bytes[i] === 0x20 || bytes[i] === 0x0a || bytes[i] === 0x0d || bytes[i] === 0x09)
  )
    i++;
  return i === 0 ? bytes : bytes.subarray(i);
}

/**
 * How `bytes` are encrypted, or undefined when they are not an age or SOPS file (plaintext, as far
 * as steward can tell). Only the start of an age file is looked at; a SOPS file is a YAML or JSON
 * document whose top-level `sops` mapping carries a `mac`.
 */
export function secretFormat(bytes: Uint8Array): SecretFormat | undefined {
  if (startsWith(bytes, AGE_INTRO)) return "age-binary";
  if (startsWith(trimStart(bytes), ARMOR_BEGIN)) return "age-armored";
  return sopsMetadataOf(bytes) ? "sops" : undefined;
}

/** A file's bytes as text, when they are UTF-8 (a SOPS file is). */
function utf8(bytes: Uint8Array): string | undefined {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = buffer.toString("utf8");
  return Buffer.byteLength(text) === bytes.byteLength ? text : undefined;
}

/** A file steward cannot read as the format it claims to be. */
export class SecretFormatError extends Error {
  override readonly name = "SecretFormatError";
}

/** The binary age file inside an armored one (age's armor: strict PEM, 64 columns of base64). */
export function dearmor(bytes: Uint8Array): Uint8Array {
  const text = utf8(bytes);
  if (text === undefined) throw new SecretFormatError("the armored age file is not text");
  const lines = text.trim().split(/\r?\n/);
  if (lines[0] !== ARMOR_BEGIN || lines[lines.length - 1] !== ARMOR_END)
    throw new SecretFormatError(`an armored age file starts with ${ARMOR_BEGIN} and ends with ${ARMOR_END}`);
  const body = lines.slice(1, -1).join("");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body) || body.length % 4 !== 0)
    throw new SecretFormatError("the armored age file's body is not base64");
  return Buffer.from(body, "base64");
}

/** One recipient stanza of an age header: its type (`X25519`, `scrypt`, ...) and arguments. */
export interface AgeStanza {
  type: string;
  args: string[];
}

/**
 * The recipient stanzas of an age file (binary, or armored): what its header says without any
 * key. Throws SecretFormatError for a header that is not age v1's.
 */
export function ageStanzas(bytes: Uint8Array, format: "age-armored" | "age-binary"): AgeStanza[] {
  const binary = format === "age-armored" ? dearmor(bytes) : bytes;
  if (!startsWith(binary, AGE_INTRO)) throw new SecretFormatError("not an age v1 file");
  const stanzas: AgeStanza[] = [];
  let at = AGE_INTRO.length;
  const line = (): string => {
    const end = binary.indexOf(0x0a, at);
    if (end < 0) throw new SecretFormatError("the age header ends before its MAC line");
    const text = Buffer.from(binary.subarray(at, end)).toString("latin1");
    at = end + 1;
    return text;
  };
  for (;;) {
    const next = line();
    if (next.startsWith("--- ")) return stanzas;
    if (!next.startsWith("-> "))
      throw new SecretFormatError(`unexpected line in the age header: ${next.slice(0, 40)}`);
    const [type = "", ...args] = next.slice(3).split(" ");
    stanzas.push({ type, args });
    // The body: lines of 64 base64 columns, ended by a shorter one (possibly empty).
    for (;;) {
      const body = line();
      if (body.length < 64) break;
    }
    if (stanzas.length > 10_000) throw new SecretFormatError("the age header has more than 10,000 stanzas");
  }
}

/** One recipient of a manifest, and whose it is (from the comment line before it). */
export interface ManifestRecipient {
  recipient: string;
  /** `node` or `operator` as steward wrote it; undefined for a recipient added by hand. */
  role?: "node" | "operator";
  name?: string;
}

const RECIPIENT = /^age1[02-9ac-hj-np-z]{58}$/;
const WHOSE = /^#\s*(node|operator)\s+(\S.*)$/;

/** A manifest's recipients, in order, and the lines it could not read (1-based). */
export function parseManifest(text: string): {
  recipients: ManifestRecipient[];
  problems: { line: number; message: string }[];
} {
  const recipients: ManifestRecipient[] = [];
  const problems: { line: number; message: string }[] = [];
  let whose: { role: "node" | "operator"; name: string } | undefined;
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === "") continue;
    if (line.startsWith("#")) {
      const match = WHOSE.exec(line);
      whose = match ? { role: match[1] as "node" | "operator", name: match[2]!.trim() } : whose;
      continue;
    }
    if (!RECIPIENT.test(line)) {
      problems.push({
        line: i + 1,
        message: `${JSON.stringify(line.slice(0, 80))} is not an age X25519 recipient (age1...)`,
      });
      whose = undefined;
      continue;
    }
    recipients.push(whose ? { recipient: line, ...whose } : { recipient: line });
    whose = undefined;
  }
  return { recipients, problems };
}

/**
 * A manifest's text: an age recipients file, each recipient after a comment naming whose it is,
 * so `age -R` reads it as it is and a reviewer sees who can read the secret.
 */
export function formatManifest(secretPath: string, recipients: readonly ManifestRecipient[]): string {
  const lines = [
    `# Who can read ${secretPath}: written by steward secret encrypt|edit|update; an age recipients file (age -R reads it).`,
    "# steward validate checks the file has one recipient stanza per line below, and one for every node it is placed on.",
  ];
  for (const entry of recipients) {
    if (entry.role && entry.name) lines.push(`# ${entry.role} ${entry.name}`);
    lines.push(entry.recipient);
  }
  return `${lines.join("\n")}\n`;
}

/** What a SOPS file's `sops` mapping says about it, read without any key. */
export interface SopsMetadata {
  /** The age recipients its data key is encrypted for (`sops.age[].recipient`). */
  recipients: string[];
  /** How many key groups split the data key (Shamir); steward reads files with one. */
  keyGroups: number;
  /** Master keys other than age (pgp, kms, ...): a host can use none of them. */
  otherKeys: number;
  mac?: string;
  lastModified?: string;
}

/** Mappings as Maps (the shape the agent's ordered parse of a SOPS file has too). */
function asMaps(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(asMaps);
  if (value !== null && typeof value === "object")
    return new Map(
      Object.entries(value as Record<string, unknown>).map(([key, item]) => [key, asMaps(item)]),
    );
  return value;
}

/**
 * A SOPS file's tree (mappings as Maps), or undefined when the bytes are not a YAML or JSON
 * document with a `sops` mapping. js-yaml reads it (it is bundled wherever validate runs): enough
 * for its metadata and keys, which is all validate reads; the agent parses the file again in
 * document order, which its MAC covers (agent/sops.ts).
 */
export function parseSopsDocument(bytes: Uint8Array): Map<unknown, unknown> | undefined {
  const text = utf8(bytes);
  // Cheap refusals first: most files are not SOPS files.
  if (text === undefined || !text.includes("sops") || !text.includes("ENC[AES256_GCM")) return undefined;
  let value: unknown;
  try {
    value = jsyaml.load(text, { schema: jsyaml.CORE_SCHEMA });
  } catch {
    return undefined;
  }
  return sopsShaped(asMaps(value));
}

/** The document, when it is a mapping with a `sops` mapping (a SOPS file's shape). */
export function sopsShaped(value: unknown): Map<unknown, unknown> | undefined {
  return value instanceof Map && value.get("sops") instanceof Map ? value : undefined;
}

const NOT_AGE = ["kms", "gcp_kms", "azure_kv", "hc_vault", "pgp"];

/** The metadata of a SOPS document (see parseSopsDocument). */
export function sopsMetadata(document: Map<unknown, unknown>): SopsMetadata {
  const sops = document.get("sops") as Map<unknown, unknown>;
  const recipients: string[] = [];
  const age = sops.get("age");
  if (Array.isArray(age))
    for (const entry of age)
      if (entry instanceof Map && typeof entry.get("recipient") === "string")
        recipients.push((entry.get("recipient") as string).trim());
  const groups = sops.get("key_groups");
  let otherKeys = 0;
  for (const key of NOT_AGE) {
    const list = sops.get(key);
    if (Array.isArray(list)) otherKeys += list.length;
  }
  const mac = sops.get("mac");
  const lastModified = sops.get("lastmodified");
  return {
    recipients,
    keyGroups: Array.isArray(groups) ? groups.length : 1,
    otherKeys,
    ...(typeof mac === "string" ? { mac } : {}),
    ...(typeof lastModified === "string" ? { lastModified } : {}),
  };
}

/** The SOPS metadata of `bytes`, or undefined when they are not a SOPS file. */
export function sopsMetadataOf(bytes: Uint8Array): SopsMetadata | undefined {
  const document = parseSopsDocument(bytes);
  if (!document) return undefined;
  const metadata = sopsMetadata(document);
  return metadata.mac !== undefined ? metadata : undefined;
}

/** The top-level keys of a SOPS document's data (its `sops` mapping aside): readable without a key. */
export function sopsKeys(document: Map<unknown, unknown>): string[] {
  return [...document.keys()].filter((key): key is string => typeof key === "string" && key !== "sops");
}
