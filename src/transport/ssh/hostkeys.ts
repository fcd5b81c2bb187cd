/**
 * Pinned SSH host keys. A host is trusted only when the key it presents is one we already hold: the
 * Node's `spec.ssh.hostKey`, or a line of a known_hosts file (OpenSSH format: plain or hashed host
 * names, `[host]:port` for other ports, wildcards and negation, `@revoked`). An unknown or changed key
 * is refused. Trust on first use is a separate, explicit choice that records the key it accepted.
 */
import { createHash, createHmac } from "node:crypto";
import { appendFileSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";

/** A public key as it travels: the algorithm name and the key blob. */
export interface PublicKey {
  /** `ssh-ed25519`, `ssh-rsa`, `ecdsa-sha2-nistp256`... (the name inside the blob). */
  type: string;
  /** The SSH wire-format key blob, base64 (the second field of a known_hosts line). */
  base64: string;
}

/** What we hold for one host: keys that are trusted and keys that are revoked. */
export interface KnownKeys {
  trusted: PublicKey[];
  revoked: PublicKey[];
  /** Where the keys came from, for messages (`spec.ssh.hostKey`, `/root/.ssh/known_hosts`). */
  source: string;
}

/** The outcome of comparing a presented key with what we hold. */
export type HostKeyVerdict =
  | { kind: "trusted" }
  | { kind: "unknown" }
  | { kind: "changed"; expected: PublicKey[] }
  | { kind: "revoked" };

/** Parses `type base64 [comment]`; undefined when it is not a public key line. */
export function parsePublicKey(text: string): PublicKey | undefined {
  const [type, base64] = text.trim().split(/\s+/);
  if (!type || !base64 || !/^[A-Za-z0-9+/]+=*$/.test(base64)) return undefined;
  return { type, base64 };
}

/** The algorithm name written at the start of an SSH key blob. */
export function blobKeyType(blob: Buffer): string {
  if (blob.length < 4) return "unknown";
  const length = blob.readUInt32BE(0);
  return blob.subarray(4, 4 + length).toString("latin1");
}

/** A key blob as a PublicKey. */
export function publicKeyFromBlob(blob: Buffer): PublicKey {
  return { type: blobKeyType(blob), base64: blob.toString("base64") };
}

/** The SHA256 fingerprint OpenSSH prints (`SHA256:...`), for messages. */
export function fingerprint(key: PublicKey): string {
  const digest = createHash("sha256").update(Buffer.from(key.base64, "base64")).digest("base64");
  return `SHA256:${digest.replace(/=+$/, "")}`;
}

/** The name a host is listed under in known_hosts: `host` on port 22, `[host]:port` otherwise. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** Host key algorithms to offer so the server presents a key of a type we hold. */
export function hostKeyAlgorithms(keys: readonly PublicKey[]): string[] {
  const algorithms = new Set<string>();
  for (const key of keys) {
    if (key.type === "ssh-rsa")
      for (const a of ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]) algorithms.add(a);
    else algorithms.add(key.type);
  }
  return [...algorithms];
}

/** Compares a presented key with the keys held for the host. */
export function checkHostKey(presented: PublicKey, known: KnownKeys): HostKeyVerdict {
  const same = (key: PublicKey) => key.type === presented.type && key.base64 === presented.base64;
  if (known.revoked.some(same)) return { kind: "revoked" };
  if (known.trusted.some(same)) return { kind: "trusted" };
  if (known.trusted.length === 0) return { kind: "unknown" };
  return { kind: "changed", expected: known.trusted };
}

interface KnownHostsLine {
  marker?: "@revoked" | "@cert-authority";
  patterns: string;
  key: PublicKey;
}

function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`, "i");
}

/** Whether a known_hosts host field (comma-separated patterns or one hashed name) names `name`. */
export function hostFieldMatches(field: string, name: string): boolean {
  if (field.startsWith("|1|")) {
    const [, , salt, hash] = field.split("|");
    if (!salt || !hash) return false;
    const computed = createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest("base64");
    return computed === hash;
  }
  let matched = false;
  for (const pattern of field.split(",")) {
    if (pattern.startsWith("!")) {
      if (globToRegExp(pattern.slice(1)).test(name)) return false;
    } else if (globToRegExp(pattern).test(name)) matched = true;
  }
  return matched;
}

/** A known_hosts file, parsed once and re-read when it changes on disk. */
export class KnownHostsFile {
  private lines: KnownHostsLine[] = [];
  private loadedStamp = "";

  constructor(readonly path: string) {}

  /** Keys listed for `host:port`. Certificate authorities are not supported and are ignored. */
  keysFor(host: string, port: number): KnownKeys {
    this.refresh();
    const name = knownHostsName(host, port);
    const known: KnownKeys = { trusted: [], revoked: [], source: this.path };
    for (const line of this.lines) {
      if (line.marker === "@cert-authority" || !hostFieldMatches(line.patterns, name)) continue;
      (line.marker === "@revoked" ? known.revoked : known.trusted).push(line.key);
    }
    return known;
  }

  /**
   * Appends a key accepted on first use, with a comment saying so. The line is written in one append
   * so a concurrent reader never sees half of it.
   */
  record(host: string, port: number, key: PublicKey, comment: string): void {
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    let prefix = "";
    try {
      const text = readFileSync(this.path, "utf8");
      if (text.length > 0 && !text.endsWith("\n")) prefix = "\n";
    } catch {
      // A missing file is created by the append.
    }
    appendFileSync(
      this.path,
      `${prefix}${knownHostsName(host, port)} ${key.type} ${key.base64} ${comment}\n`,
      {
        mode: 0o600,
      },
    );
    this.loadedStamp = "";
  }

  private refresh(): void {
    let stamp: string;
    try {
      const stat = statSync(this.path);
      stamp = `${stat.mtimeMs}:${stat.size}:${stat.ino}`;
    } catch {
      this.lines = [];
      this.loadedStamp = "missing";
      return;
    }
    if (stamp === this.loadedStamp) return;
    this.lines = parseKnownHosts(readFileSync(this.path, "utf8"));
    this.loadedStamp = stamp;
  }
}

/** Parses known_hosts text; comments, blank and unparseable lines are skipped, as OpenSSH does. */
export function parseKnownHosts(text: string): KnownHostsLine[] {
  const lines: KnownHostsLine[] = [];
  for (const raw of text.split("\n")) {
    const trimmed = raw.trim();
    if (!trimmed || trimmed.startsWith("#")) continue;
    const fields = trimmed.split(/\s+/);
    let marker: KnownHostsLine["marker"];
    if (fields[0] === "@revoked" || fields[0] === "@cert-authority") marker = fields.shift() as typeof marker;
    const patterns = fields.shift();
    const key = parsePublicKey(fields.join(" "));
    if (!patterns || !key) continue;
    lines.push(marker ? { marker, patterns, key } : { patterns, key });
  }
  return lines;
}
