/**
 * Signed-commit policy (`spec.signing` in steward.yaml): the tracked head must carry a signature
 * that verifies against a key in the trust list. Two formats, as git writes them in the `gpgsig`
 * header: SSH signatures (`gpg.format ssh`, the SSHSIG format, verified with node:crypto for
 * Ed25519, ECDSA and RSA keys) and OpenPGP signatures (verified with openpgp.js).
 */
import { createHash, createPublicKey, type KeyObject, verify as verifySignature } from "node:crypto";
import type { Diagnostic } from "../model/diagnostics.js";
import type { SigningPolicy } from "../model/generated.js";
import type { ParsedCommit } from "./commits.js";

/** What the signature check concluded. */
export type SignatureVerdict =
  | { ok: true; signer: string; format: "ssh" | "openpgp" }
  | {
      ok: false;
      code: "signing/unsigned" | "signing/untrusted" | "signing/bad-key";
      reason: string;
      fix: string;
    };

/** Reads SSH wire-format fields (uint32-length-prefixed strings). */
class SshReader {
  private pos = 0;
  constructor(private readonly data: Buffer) {}
  bytes(n: number): Buffer {
    if (this.pos + n > this.data.length) throw new Error("truncated");
    const out = this.data.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  uint32(): number {
    return this.bytes(4).readUInt32BE(0);
  }
  string(): Buffer {
    return this.bytes(this.uint32());
  }
  text(): string {
    return this.string().toString("utf8");
  }
}

function sshString(value: Buffer | string): Buffer {
  const bytes = typeof value === "string" ? Buffer.from(value) : value;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

function base64url(bytes: Buffer): string {
  return bytes.toString("base64url");
}

/** An unsigned big-endian integer without the sign byte SSH's mpint may carry. */
function unsigned(mpint: Buffer): Buffer {
  let start = 0;
  while (start < mpint.length - 1 && mpint[start] === 0) start++;
  return mpint.subarray(start);
}

const CURVES: Record<string, { crv: string; hash: string; size: number }> = {
  nistp256: { crv: "P-256", hash: "sha256", size: 32 },
  nistp384: { crv: "P-384", hash: "sha384", size: 48 },
  nistp521: { crv: "P-521", hash: "sha512", size: 66 },
};

/** A node:crypto public key for an SSH public key blob. */
function sshPublicKey(blob: Buffer): { type: string; key: KeyObject } {
  const reader = new SshReader(blob);
  const type = reader.text();
  if (type === "ssh-ed25519")
    return {
      type,
      key: createPublicKey({
        key: { kty: "OKP", crv: "Ed25519", x: base64url(reader.string()) },
        format: "jwk",
      }),
    };
  if (type === "ssh-rsa") {
    const e = unsigned(reader.string());
    const n = unsigned(reader.string());
    return {
      type,
      key: createPublicKey({ key: { kty: "RSA", e: base64url(e), n: base64url(n) }, format: "jwk" }),
    };
  }
  const curve = /^ecdsa-sha2-(nistp\d+)$/.exec(type)?.[1];
  const params = curve ? CURVES[curve] : undefined;
  if (params) {
    reader.string();
    const point = reader.string();
    const size = (point.length - 1) / 2;
    const x = point.subarray(1, 1 + size);
    const y = point.subarray(1 + size);
    return {
      type,
      key: createPublicKey({
        key: { kty: "EC", crv: params.crv, x: base64url(x), y: base64url(y) },
        format: "jwk",
      }),
    };
  }
  throw new Error(`unsupported SSH key type ${type}`);
}

/** Verifies the signature blob (`string format, string signature`) over `data` with `publicKey`. */
function verifySshBlob(
  publicKey: { type: string; key: KeyObject },
  signatureBlob: Buffer,
  data: Buffer,
): boolean {
  const reader = new SshReader(signatureBlob);
  const format = reader.text();
  const signature = reader.string();
  if (publicKey.type === "ssh-ed25519" && format === "ssh-ed25519")
    return verifySignature(null, data, publicKey.key, signature);
  if (publicKey.type === "ssh-rsa" && (format === "rsa-sha2-512" || format === "rsa-sha2-256"))
    return verifySignature(format === "rsa-sha2-512" ? "sha512" : "sha256", data, publicKey.key, signature);
  const curve = /^ecdsa-sha2-(nistp\d+)$/.exec(format)?.[1];
  const params = curve ? CURVES[curve] : undefined;
  if (params && publicKey.type === format) {
    const parts = new SshReader(signature);
    const pad = (value: Buffer) => {
      const bare = unsigned(value);
      return Buffer.concat([Buffer.alloc(Math.max(0, params.size - bare.length)), bare]);
    };
    const raw = Buffer.concat([pad(parts.string()), pad(parts.string())]);
    return verifySignature(params.hash, data, { key: publicKey.key, dsaEncoding: "ieee-p1363" }, raw);
  }
  return false;
}

/** The public key blob of an `ssh-ed25519 AAAA... comment` line. */
function sshLineBlob(line: string): Buffer | undefined {
  const parts = line.trim().split(/\s+/);
  const index = parts.findIndex((p) => /^(ssh-|ecdsa-|sk-)/.test(p));
  const encoded = index >= 0 ? parts[index + 1] : undefined;
  return encoded ? Buffer.from(encoded, "base64") : undefined;
}

function sshFingerprint(blob: Buffer): string {
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}

/** Verifies an armored SSHSIG over `payload`; returns the signing key's blob when it verifies. */
function verifySsh(armored: string, payload: Buffer): { blob: Buffer } | { error: string } {
  const body = armored
    .replace(/-----BEGIN SSH SIGNATURE-----/, "")
    .replace(/-----END SSH SIGNATURE-----/, "")
    .replace(/\s+/g, "");
  try {
    const reader = new SshReader(Buffer.from(body, "base64"));
    if (reader.bytes(6).toString("latin1") !== "SSHSIG") return { error: "not an SSH signature" };
    if (reader.uint32() !== 1) return { error: "unsupported SSH signature version" };
    const publicKeyBlob = reader.string();
    const namespace = reader.text();
    const reserved = reader.string();
    const hashAlgorithm = reader.text();
    const signatureBlob = reader.string();
    if (namespace !== "git") return { error: `signature namespace is "${namespace}", not "git"` };
    if (hashAlgorithm !== "sha512" && hashAlgorithm !== "sha256")
      return { error: `unsupported hash ${hashAlgorithm}` };
    const signed = Buffer.concat([
      Buffer.from("SSHSIG"),
      sshString(namespace),
      sshString(reserved),
      sshString(hashAlgorithm),
      sshString(createHash(hashAlgorithm).update(payload).digest()),
    ]);
    const ok = verifySshBlob(sshPublicKey(publicKeyBlob), signatureBlob, signed);
    return ok ? { blob: publicKeyBlob } : { error: "the SSH signature does not match the commit" };
  } catch (error) {
    return { error: `unreadable SSH signature (${(error as Error).message})` };
  }
}

const UNTRUSTED_FIX =
  "sign the commit with a key listed under spec.signing.trusted in steward.yaml (git commit -S), or add the key there in a commit signed by a trusted key";

/**
 * Checks `commit` against `policy`. `policy.required: false` (or no policy) accepts any commit.
 * Never throws for a bad signature or key: the verdict says what is wrong.
 */
export async function verifyCommit(
  commit: ParsedCommit,
  policy: SigningPolicy | undefined,
): Promise<SignatureVerdict> {
  if (!policy?.required) return { ok: true, signer: "(signing not required)", format: "ssh" };
  const short = commit.oid.slice(0, 12);
  const signature = commit.signature;
  if (!signature)
    return {
      ok: false,
      code: "signing/unsigned",
      reason: `commit ${short} is not signed, and steward.yaml requires signed commits (spec.signing.required)`,
      fix: UNTRUSTED_FIX,
    };
  const trusted = policy.trusted ?? [];
  if (signature.includes("-----BEGIN SSH SIGNATURE-----")) {
    const checked = verifySsh(signature, commit.payload);
    if ("error" in checked)
      return {
        ok: false,
        code: "signing/untrusted",
        reason: `commit ${short}: ${checked.error}`,
        fix: UNTRUSTED_FIX,
      };
    for (const entry of trusted) {
      const blob = sshLineBlob(entry.key);
      if (blob?.equals(checked.blob))
        return { ok: true, signer: entry.name ?? sshFingerprint(blob), format: "ssh" };
    }
    return {
      ok: false,
      code: "signing/untrusted",
      reason: `commit ${short} is signed by SSH key ${sshFingerprint(checked.blob)}, which is not in spec.signing.trusted`,
      fix: UNTRUSTED_FIX,
    };
  }
  if (signature.includes("-----BEGIN PGP SIGNATURE-----")) return verifyOpenPgp(commit, signature, trusted);
  return {
    ok: false,
    code: "signing/untrusted",
    reason: `commit ${short} carries a signature steward cannot check (only SSH and OpenPGP signatures are supported)`,
    fix: UNTRUSTED_FIX,
  };
}

async function verifyOpenPgp(
  commit: ParsedCommit,
  armoredSignature: string,
  trusted: NonNullable<SigningPolicy["trusted"]>,
): Promise<SignatureVerdict> {
  const short = commit.oid.slice(0, 12);
  const openpgp = await import("openpgp");
  const keys: { name?: string; key: import("openpgp").Key }[] = [];
  for (const [i, entry] of trusted.entries()) {
    if (!entry.key.includes("-----BEGIN PGP PUBLIC KEY BLOCK-----")) continue;
    try {
      keys.push({ name: entry.name, key: await openpgp.readKey({ armoredKey: entry.key }) });
    } catch (error) {
      return {
        ok: false,
        code: "signing/bad-key",
        reason: `spec.signing.trusted[${i}] is not a readable OpenPGP public key (${(error as Error).message})`,
        fix: "paste the whole armored key (gpg --armor --export KEYID) into steward.yaml",
      };
    }
  }
  let signature: import("openpgp").Signature;
  try {
    signature = await openpgp.readSignature({ armoredSignature });
  } catch (error) {
    return {
      ok: false,
      code: "signing/untrusted",
      reason: `commit ${short} has an unreadable OpenPGP signature (${(error as Error).message})`,
      fix: UNTRUSTED_FIX,
    };
  }
  const signer = signature.getSigningKeyIDs()[0]?.toHex().toUpperCase() ?? "unknown";
  if (keys.length > 0) {
    const message = await openpgp.createMessage({ binary: new Uint8Array(commit.payload) });
    const result = await openpgp.verify({ message, signature, verificationKeys: keys.map((k) => k.key) });
    for (const checked of result.signatures) {
      try {
        await checked.verified;
        const id = checked.keyID.toHex().toUpperCase();
        const entry = keys.find((k) => k.key.getKeys(checked.keyID).length > 0);
        return { ok: true, signer: entry?.name ?? id, format: "openpgp" };
      } catch {
        // Not this key, or a bad signature: the verdict below says so.
      }
    }
  }
  return {
    ok: false,
    code: "signing/untrusted",
    reason: `commit ${short} is signed by OpenPGP key ${signer}, which does not verify against spec.signing.trusted`,
    fix: UNTRUSTED_FIX,
  };
}

/** The verdict as a diagnostic on steward.yaml, for an invalid revision. */
export function signingDiagnostic(verdict: Extract<SignatureVerdict, { ok: false }>): Diagnostic {
  return {
    severity: "error",
    code: verdict.code,
    file: "steward.yaml",
    line: 0,
    column: 0,
    message: verdict.reason,
    fix: verdict.fix,
  };
}
