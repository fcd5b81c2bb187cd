/**
 * An instance's secrets on the host: the ciphertext its bundle carries (`spec.secrets`), decrypted
 * here and nowhere else, with the host's own identity (host-key.ts).
 *
 * - Drivers compare digests, never plaintext: a file's content is observed as the HMAC digest of
 *   its bytes (host-key.ts), a service's environment is fingerprinted with the digests of its
 *   secret values. The digest of each ciphertext's plaintext is remembered in the instance's
 *   record, so an apply whose ciphertext and file are unchanged decrypts nothing; a ciphertext
 *   seen for the first time (a re-encryption for new recipients among them) is decrypted once to
 *   learn it — and, its plaintext being the same, changes nothing on the host.
 * - A secret this host cannot open fails the resources that use it, permanently, naming the secret
 *   and the fix: retrying cannot help until the secret is encrypted for this host's identity.
 * - Whatever the agent reports or logs about the instance is masked: any occurrence of a secret's
 *   value (and of its base64) in a message, an evidence or a command's output becomes `[secret]`.
 */
import { createHash } from "node:crypto";
import jsyaml from "js-yaml";
import type { Env, InstanceSpec, Resource, SecretCiphertext } from "../model/generated.js";
import { dearmor, SecretFormatError, secretFormat } from "../model/secrets.js";
import { permanent, ResourceFailure } from "./failure.js";
import { type HostKey, hostKeyMissing, hostKeyOf } from "./host-key.js";

/** What the agent remembers of an instance's secrets (in its record): digests of their plaintext. */
export interface SecretDigestRecord {
  /** The recipient the digests are keyed for: under another identity they mean nothing. */
  recipient: string;
  /** `sha256:<hex of the ciphertext>` (a file) or that and `#KEY` (a value) → digest of the plaintext. */
  digests: Record<string, string>;
}

/** How an instance uses one secret file: as a file's content, and for which values. */
interface SecretUse {
  path: string;
  asFile: boolean;
  keys: Set<string>;
}

/** A secret's plaintext: the file's bytes, and its map of values when it is read as one. */
interface Plaintext {
  bytes?: Buffer;
  values?: Map<string, string>;
}

/** What is shown in place of a secret's value. */
export const MASK = "[secret]";
/** Values shorter than this are not masked: masking them would blank out ordinary output. */
const MIN_MASKED_LENGTH = 4;
/** Lines of a multi-line secret (a key file) at least this long are masked on their own too. */
const MIN_MASKED_LINE = 8;
/** Fields of results and reports that may quote what a process printed. */
const FREE_TEXT = new Set(["message", "evidence", "why", "diff", "note", "output", "stdout", "stderr"]);

/** The secret files a resource uses: its secret source, and the files of its `{secret, key}` values. */
export function secretPathsOf(resource: Resource): string[] {
  const paths: string[] = [];
  if ((resource.kind === "file" || resource.kind === "systemd-unit") && resource.secret && resource.source)
    paths.push(resource.source);
  if (resource.kind === "command" || resource.kind === "service" || resource.kind === "container")
    for (const value of Object.values(resource.env ?? {}))
      if (typeof value === "object" && !paths.includes(value.secret)) paths.push(value.secret);
  return paths;
}

/** Whether an environment takes any value from a secret. */
export function hasSecretValues(env: Env | undefined): boolean {
  return Object.values(env ?? {}).some((value) => typeof value === "object");
}

/**
 * An environment as a fingerprint sees it: each secret value replaced by the digest of its
 * plaintext (from `digests`, see InstanceSecrets.digests), so a new ciphertext of the same value
 * fingerprints the same and a changed value does not. Plain environments are returned as they are.
 */
export function fingerprintEnv(env: Env | undefined, digests: Readonly<Record<string, string>> = {}): Env {
  if (!env || !hasSecretValues(env)) return env ?? {};
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env))
    out[name] =
      typeof value === "string" ? value : `secret:${digests[`${value.secret}#${value.key}`] ?? "unknown"}`;
  return out;
}

function ciphertextBytes(secret: SecretCiphertext): Buffer {
  return Buffer.from(secret.content, secret.encoding === "base64" ? "base64" : "utf8");
}

function ciphertextHash(bytes: Uint8Array): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** The values of a decrypted age file that holds a YAML map of strings. */
function parseValueMap(path: string, bytes: Buffer): Map<string, string> {
  let value: unknown;
  try {
    value = jsyaml.load(bytes.toString("utf8"), { schema: jsyaml.CORE_SCHEMA });
  } catch (error) {
    throw permanent(
      "SecretNotAMap",
      `secret ${path} is not a YAML map of strings once decrypted (${(error as Error).message.split("\n")[0]}): encrypt a map like "password: ..." for {secret, key} values`,
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw permanent(
      "SecretNotAMap",
      `secret ${path} is not a YAML map of strings once decrypted: encrypt a map like "password: ..." for {secret, key} values`,
    );
  const values = new Map<string, string>();
  for (const [key, item] of Object.entries(value as Record<string, unknown>))
    if (typeof item === "string" || typeof item === "number" || typeof item === "boolean")
      values.set(key, String(item));
  return values;
}

/** The top-level scalar values of a decrypted SOPS tree, as strings. */
function sopsValues(tree: Map<string, unknown>): Map<string, string> {
  const values = new Map<string, string>();
  for (const [key, item] of tree)
    if (typeof item === "string" || typeof item === "number" || typeof item === "boolean")
      values.set(key, String(item));
    else if (item instanceof Uint8Array) values.set(key, Buffer.from(item).toString("utf8"));
  return values;
}

/** How the host and its instance are named in the fixes a failure gives. */
export interface SecretsOptions {
  spec: InstanceSpec;
  /** The agent's state directory: its identity is there. */
  stateDir: string;
  node: string;
  /** What the instance's record remembers of earlier applies' secrets. */
  remembered?: SecretDigestRecord;
  /** The secrets of the bundle the agent held before this one (what it last wrote), read when needed. */
  held?: () => InstanceSpec["secrets"];
}

/** One instance's secrets for one attempt or observation (see the top of this file). */
export class InstanceSecrets {
  /** The digest of each secret's plaintext: `PATH` for a file, `PATH#KEY` for a value; set by `prepare`. */
  readonly digests: Record<string, string> = {};
  private readonly uses = new Map<string, SecretUse>();
  private readonly failures = new Map<string, ResourceFailure>();
  private readonly plaintexts = new Map<string, Promise<Plaintext>>();
  private readonly learned: Record<string, string> = {};
  private key: HostKey | undefined;
  private prepared: Promise<void> | undefined;
  private masks: MaskIndex | undefined;

  constructor(private readonly options: SecretsOptions) {
    for (const resource of options.spec.resources) {
      if (
        (resource.kind === "file" || resource.kind === "systemd-unit") &&
        resource.secret &&
        resource.source
      )
        this.use(resource.source).asFile = true;
      if (resource.kind === "command" || resource.kind === "service" || resource.kind === "container")
        for (const value of Object.values(resource.env ?? {}))
          if (typeof value === "object") this.use(value.secret).keys.add(value.key);
    }
  }

  private use(path: string): SecretUse {
    let use = this.uses.get(path);
    if (!use) {
      use = { path, asFile: false, keys: new Set() };
      this.uses.set(path, use);
    }
    return use;
  }

  /** Whether the instance uses any secret. */
  get any(): boolean {
    return this.uses.size > 0;
  }

  /**
   * Works out the digest of every secret's plaintext: from what the record remembers of this very
   * ciphertext, else by decrypting it. A secret that cannot be opened is remembered as a failure
   * of the resources that use it (see `check`). Runs once.
   */
  prepare(): Promise<void> {
    this.prepared ??= this.prepareOnce();
    return this.prepared;
  }

  private async prepareOnce(): Promise<void> {
    if (!this.any) return;
    try {
      this.key = await hostKeyOf(this.options.stateDir);
    } catch (error) {
      const failure = permanent(
        "HostIdentityUnreadable",
        `this host's age identity cannot be read (${(error as Error).message}): make it again with steward agent identity, and re-encrypt the secrets for its new recipient`,
      );
      for (const path of this.uses.keys()) this.failures.set(path, failure);
      return;
    }
    if (!this.key) {
      for (const path of this.uses.keys()) this.failures.set(path, hostKeyMissing(this.options.stateDir));
      return;
    }
    const remembered =
      this.options.remembered?.recipient === this.key.recipient ? this.options.remembered.digests : {};
    await Promise.all(
      [...this.uses.values()].map(async (use) => {
        const secret = this.options.spec.secrets?.[use.path];
        if (!secret) {
          this.failures.set(
            use.path,
            permanent(
              "SecretMissing",
              `the bundle does not carry secret ${use.path}: the hub sent an incomplete bundle`,
            ),
          );
          return;
        }
        const hash = ciphertextHash(ciphertextBytes(secret));
        const wanted = [...(use.asFile ? [hash] : []), ...[...use.keys].map((key) => `${hash}#${key}`)];
        if (wanted.every((id) => remembered[id] !== undefined)) {
          this.record(use, hash, (id) => remembered[id]!);
          return;
        }
        try {
          const plaintext = await this.plaintext(use.path);
          const digests: Record<string, string> = {};
          if (use.asFile) digests[hash] = this.key!.digest(plaintext.bytes!);
          for (const key of use.keys) {
            const value = plaintext.values?.get(key);
            if (value === undefined)
              throw permanent(
                "SecretKeyMissing",
                `secret ${use.path} has no key ${JSON.stringify(key)} once decrypted (it has ${[...(plaintext.values?.keys() ?? [])].map((k) => JSON.stringify(k)).join(", ") || "none"}): add it with steward secret edit ${use.path}, or fix the key`,
              );
            digests[`${hash}#${key}`] = this.key!.digest(value);
          }
          this.record(use, hash, (id) => digests[id]!);
        } catch (error) {
          this.failures.set(
            use.path,
            error instanceof ResourceFailure ? error : this.failure(use.path, error),
          );
        }
      }),
    );
  }

  /** Notes a secret's digests, as `digests` shows them and as the record keeps them. */
  private record(use: SecretUse, hash: string, digestOf: (id: string) => string): void {
    if (use.asFile) {
      this.digests[use.path] = digestOf(hash);
      this.learned[hash] = this.digests[use.path]!;
    }
    for (const key of use.keys) {
      const id = `${hash}#${key}`;
      this.digests[`${use.path}#${key}`] = digestOf(id);
      this.learned[id] = this.digests[`${use.path}#${key}`]!;
    }
  }

  /** Throws the failure of the first secret `resource` uses that this host cannot open. */
  check(resource: Resource): void {
    for (const path of secretPathsOf(resource)) {
      const failure = this.failures.get(path);
      if (failure) throw failure;
    }
  }

  /** The digest of bytes read from the host (a file's content), comparable with `digests`. */
  digestOf(bytes: Uint8Array | string): string {
    if (!this.key) throw hostKeyMissing(this.options.stateDir);
    return this.key.digest(bytes);
  }

  /** The plaintext of a secret file, for a file's content. */
  async fileBytes(path: string): Promise<Buffer> {
    const plaintext = await this.plaintext(path);
    if (!plaintext.bytes)
      throw permanent("SecretMalformed", `secret ${path} is a SOPS map of keys, not a file's content`);
    return plaintext.bytes;
  }

  /** The environment a process gets: every `{secret, key}` value decrypted. */
  async environment(env: Env | undefined): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(env ?? {})) {
      if (typeof value === "string") {
        out[name] = value;
        continue;
      }
      const found = (await this.plaintext(value.secret)).values?.get(value.key);
      if (found === undefined)
        throw permanent("SecretKeyMissing", `secret ${value.secret} has no key ${JSON.stringify(value.key)}`);
      out[name] = found;
    }
    return out;
  }

  /** An armored age file of `bytes` that only this host can open (kept copies of replaced secrets). */
  sealForHost(bytes: Uint8Array): Promise<string> {
    if (!this.key) throw hostKeyMissing(this.options.stateDir);
    return this.key.sealForHost(bytes);
  }

  /**
   * What the instance's record keeps: the digests learned now, and those remembered for the
   * ciphertexts of the bundle held before (so a file it wrote is still known as its own).
   */
  remember(): SecretDigestRecord | undefined {
    if (!this.key) return this.options.remembered;
    const digests: Record<string, string> = {};
    const remembered =
      this.options.remembered?.recipient === this.key.recipient ? this.options.remembered.digests : {};
    const older = Object.keys(remembered).filter((id) => this.learned[id] === undefined);
    // Only a changed ciphertext leaves older digests: the held bundle is read for those alone.
    if (older.length > 0) {
      const held = new Set(
        Object.values(this.options.held?.() ?? {}).map((secret) => ciphertextHash(ciphertextBytes(secret))),
      );
      for (const id of older) if (held.has(id.split("#")[0]!)) digests[id] = remembered[id]!;
    }
    Object.assign(digests, this.learned);
    return Object.keys(digests).length === 0 ? undefined : { recipient: this.key.recipient, digests };
  }

  /** The digest of the plaintext of secret file `path` as the bundle held before carried it, if known. */
  heldDigest(path: string): string | undefined {
    const secret = this.options.held?.()?.[path];
    if (!secret || !this.key) return undefined;
    const hash = ciphertextHash(ciphertextBytes(secret));
    if (this.learned[hash]) return this.learned[hash];
    return this.options.remembered?.recipient === this.key.recipient
      ? this.options.remembered.digests[hash]
      : undefined;
  }

  /** Decrypts a secret (once per attempt). */
  private plaintext(path: string): Promise<Plaintext> {
    let found = this.plaintexts.get(path);
    if (!found) {
      found = this.decrypt(path);
      found.catch(() => {});
      this.plaintexts.set(path, found);
    }
    return found;
  }

  private async decrypt(path: string): Promise<Plaintext> {
    const failure = this.failures.get(path);
    if (failure) throw failure;
    const key = this.key ?? (await hostKeyOf(this.options.stateDir));
    if (!key) throw hostKeyMissing(this.options.stateDir);
    this.key = key;
    const secret = this.options.spec.secrets?.[path];
    if (!secret) throw permanent("SecretMissing", `the bundle does not carry secret ${path}`);
    const bytes = ciphertextBytes(secret);
    const format = secretFormat(bytes);
    const use = this.uses.get(path);
    try {
      if (format === "age-armored" || format === "age-binary") {
        const plain = Buffer.from(await key.decrypt(format === "age-armored" ? dearmor(bytes) : bytes));
        return use && use.keys.size > 0
          ? { bytes: plain, values: parseValueMap(path, plain) }
          : { bytes: plain };
      }
      if (format === "sops") {
        const { decryptSops } = await import("./sops.js");
        const tree = await decryptSops(bytes, async (armored) => {
          try {
            return await key.decrypt(dearmor(Buffer.from(armored, "utf8")));
          } catch (error) {
            if (/no identity matched/.test((error as Error).message)) return undefined;
            throw error;
          }
        });
        const data = tree.get("data");
        const asBytes =
          typeof data === "string"
            ? Buffer.from(data, "utf8")
            : data instanceof Uint8Array
              ? Buffer.from(data)
              : undefined;
        return { ...(asBytes && tree.size === 1 ? { bytes: asBytes } : {}), values: sopsValues(tree) };
      }
    } catch (error) {
      throw error instanceof ResourceFailure ? error : this.failure(path, error);
    }
    throw permanent(
      "SecretMalformed",
      `secret ${path} is neither an age file nor a SOPS file: encrypt it with steward secret encrypt`,
    );
  }

  /** A decryption error as the failure of the resources using the secret, with the fix. */
  private failure(path: string, error: unknown): ResourceFailure {
    const message = (error as Error).message ?? String(error);
    const kind = (error as { kind?: string }).kind;
    const update = `put this host's age recipient (steward agent identity prints it) in spec.identity.age of node ${this.options.node}'s document and run steward secret update ${path}`;
    if (kind === "not-for-host" || /no identity matched/.test(message))
      return permanent(
        "SecretNotForThisHost",
        `secret ${path} is not encrypted for this host's identity (${this.key?.recipient ?? "unknown"}): it was encrypted for other recipients, or this host's identity changed (a re-installed host has a new one); ${update}`,
      );
    if (kind === "tampered" || /HMAC|invalid|tag|decrypt/i.test(message))
      return permanent(
        "SecretTampered",
        `secret ${path} cannot be opened: ${message}; encrypt it again (steward secret encrypt, or sops)`,
      );
    const what =
      error instanceof SecretFormatError || kind === "malformed"
        ? "is not a valid encrypted file"
        : "cannot be decrypted";
    return permanent("SecretMalformed", `secret ${path} ${what}: ${message}`);
  }

  /** What stands for the instance's secret values in text: each value, its lines and its base64. */
  private async loadMasks(): Promise<MaskIndex> {
    if (this.masks) return this.masks;
    const found = new Set<string>();
    const add = (value: string) => {
      if (value.length < MIN_MASKED_LENGTH) return;
      found.add(value);
      found.add(Buffer.from(value, "utf8").toString("base64"));
      if (value.includes("\n"))
        for (const line of value.split(/\r?\n/))
          if (line.trim().length >= MIN_MASKED_LINE) found.add(line.trim());
    };
    for (const path of this.uses.keys()) {
      let plaintext: Plaintext;
      try {
        plaintext = await this.plaintext(path);
      } catch {
        // Not opened here: nothing of it can be in what the host printed.
        continue;
      }
      if (plaintext.bytes) add(plaintext.bytes.toString("utf8"));
      for (const value of plaintext.values?.values() ?? []) add(value);
    }
    this.masks = new MaskIndex(found);
    return this.masks;
  }

  /** `text` with every occurrence of a secret value (or its base64) replaced by `[secret]`. */
  async maskText(text: string): Promise<string> {
    if (!this.any || text === "") return text;
    return (await this.loadMasks()).apply(text);
  }

  /**
   * A result, outcome or report with its free text masked (see FREE_TEXT): decrypts only when there
   * is such text to look at, so a report of resources as desired costs no decryption.
   */
  async mask<T>(value: T): Promise<T> {
    if (!this.any || !hasFreeText(value)) return value;
    await this.loadMasks();
    return (await maskFreeText(value, (text) => this.maskText(text))) as T;
  }
}

/**
 * Texts to mask, indexed by their first characters: masking a message costs a lookup per character
 * of it, not a search per secret (an instance may hold a thousand secrets, and masks each outcome).
 */
class MaskIndex {
  private readonly byPrefix = new Map<string, string[]>();

  constructor(masks: Iterable<string>) {
    for (const mask of masks) {
      const prefix = mask.slice(0, MIN_MASKED_LENGTH);
      const list = this.byPrefix.get(prefix);
      if (list) list.push(mask);
      else this.byPrefix.set(prefix, [mask]);
    }
    // The longest first: a value is masked whole, not by a shorter secret inside it.
    for (const list of this.byPrefix.values()) list.sort((a, b) => b.length - a.length);
  }

  apply(text: string): string {
    if (this.byPrefix.size === 0) return text;
    let out = "";
    let kept = 0;
    let at = 0;
    while (at <= text.length - MIN_MASKED_LENGTH) {
      const hit = this.byPrefix
        .get(text.slice(at, at + MIN_MASKED_LENGTH))
        ?.find((mask) => text.startsWith(mask, at));
      if (!hit) {
        at++;
        continue;
      }
      out += `${text.slice(kept, at)}${MASK}`;
      at += hit.length;
      kept = at;
    }
    return kept === 0 ? text : out + text.slice(kept);
  }
}

function hasFreeText(value: unknown, inText = false): boolean {
  if (typeof value === "string") return inText && value.length >= MIN_MASKED_LENGTH;
  if (Array.isArray(value)) return value.some((item) => hasFreeText(item, inText));
  if (value && typeof value === "object")
    return Object.entries(value).some(([key, item]) => hasFreeText(item, inText || FREE_TEXT.has(key)));
  return false;
}

async function maskFreeText(
  value: unknown,
  mask: (text: string) => Promise<string>,
  inText = false,
): Promise<unknown> {
  if (typeof value === "string") return inText ? mask(value) : value;
  if (Array.isArray(value)) return Promise.all(value.map((item) => maskFreeText(item, mask, inText)));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value))
      out[key] = await maskFreeText(item, mask, inText || FREE_TEXT.has(key));
    return out;
  }
  return value;
}
