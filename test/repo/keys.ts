/**
 * Real signing keys for tests: SSH keys made with ssh-keygen, OpenPGP keys made with openpgp.js and
 * imported into a throwaway GnuPG home, and the `git -c ...` settings that make `git commit -S` use
 * them.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as openpgp from "openpgp";
import { tempDir } from "../helpers/git.js";

export interface SigningKey {
  /** The public key as steward.yaml's spec.signing.trusted lists it. */
  publicKey: string;
  /** `git -c` settings for signing with it. */
  config: Record<string, string>;
  /** Environment git needs (GNUPGHOME for OpenPGP). */
  env: Record<string, string>;
  /** Stops helper processes (gpg-agent). */
  dispose(): void;
}

/** An SSH key pair of `type` (`ed25519`, `ecdsa`, `rsa`); commits are signed with `gpg.format ssh`. */
export function sshKey(type: "ed25519" | "ecdsa" | "rsa" = "ed25519"): SigningKey {
  const dir = tempDir("steward-ssh-key-");
  const path = join(dir, `id_${type}`);
  const args = ["-q", "-t", type, "-N", "", "-C", `test-${type}`, "-f", path];
  if (type === "rsa") args.push("-b", "2048");
  execFileSync("ssh-keygen", args, { stdio: "pipe" });
  return {
    publicKey: readFileSync(`${path}.pub`, "utf8").trim(),
    config: { "gpg.format": "ssh", "user.signingkey": path },
    env: {},
    dispose() {},
  };
}

/** An OpenPGP key generated with openpgp.js and imported into a fresh GNUPGHOME for git to sign with. */
export async function openPgpKey(name = "Fleet Signer"): Promise<SigningKey> {
  const { privateKey, publicKey } = await openpgp.generateKey({
    type: "ecc",
    curve: "ed25519Legacy",
    userIDs: [{ name, email: "signer@example.test" }],
    format: "armored",
  });
  const home = tempDir("steward-gpg-");
  const env = { GNUPGHOME: home };
  execFileSync("gpg", ["--batch", "--quiet", "--import"], {
    input: privateKey,
    env: { ...process.env, ...env },
    stdio: "pipe",
  });
  const key = await openpgp.readKey({ armoredKey: publicKey });
  const fingerprint = key.getFingerprint().toUpperCase();
  return {
    publicKey,
    config: { "gpg.format": "openpgp", "user.signingkey": fingerprint, "gpg.program": "gpg" },
    env,
    dispose() {
      try {
        execFileSync("gpgconf", ["--kill", "gpg-agent"], { env: { ...process.env, ...env }, stdio: "pipe" });
      } catch {
        // No agent was started.
      }
    },
  };
}
