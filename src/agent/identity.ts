/**
 * The host's identity, made on the host: an nkey for NATS (the hub issues its public key a user JWT
 * with the node's permissions) and an age X25519 identity (secrets placed on the node are encrypted
 * for its recipient). The private parts are created once, in the agent's state directory
 * (`identity/`, mode 0700; each file 0600), and never leave the host: only the public identity is
 * printed, reported or sent (`spec.identity` of the Node document carries it).
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createUser, fromSeed } from "@nats-io/nkeys";
import type { NodeIdentity } from "../model/generated.js";
import { writeFileAtomicSync } from "./atomic.js";

/** A host's public identity: what `spec.identity` of its Node document holds. */
export type HostIdentity = Required<NodeIdentity>;

/**
 * Where the private parts are kept, under the agent's state directory, and the user JWT the hub
 * issued for the nkey (`nats.jwt`: public, but kept beside the key it goes with).
 */
export function identityFiles(stateDir: string): { dir: string; nkey: string; age: string; jwt: string } {
  const dir = join(stateDir, "identity");
  return { dir, nkey: join(dir, "nkey.seed"), age: join(dir, "age.key"), jwt: join(dir, "nats.jwt") };
}

function readTrimmed(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** The public key of an nkey user seed (`SU...`). */
function nkeyPublic(seed: string): string {
  return fromSeed(new TextEncoder().encode(seed)).getPublicKey();
}

/** The host's NATS user seed, if its identity was made (private: never print or send it). */
export function readNkeySeed(stateDir: string): string | undefined {
  return readTrimmed(identityFiles(stateDir).nkey);
}

/**
 * The host's age identity (`AGE-SECRET-KEY-1...`), if made (private: never print or send it). The
 * file may be in age-keygen's format, with `#` comments around the key.
 */
export function readAgeIdentity(stateDir: string): string | undefined {
  const text = readTrimmed(identityFiles(stateDir).age);
  if (text === undefined) return undefined;
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .find((line) => line !== "" && !line.startsWith("#"));
}

/** The user JWT the hub issued this host (see `writeIssuedJwt`), if it has one. */
export function readIssuedJwt(stateDir: string): string | undefined {
  return readTrimmed(identityFiles(stateDir).jwt);
}

/** Keeps the user JWT the hub issued this host, so a restarted agent connects without asking again. */
export function writeIssuedJwt(stateDir: string, jwt: string): void {
  const files = identityFiles(stateDir);
  mkdirSync(files.dir, { recursive: true, mode: 0o700 });
  writeFileAtomicSync(files.jwt, `${jwt}\n`, { mode: 0o600 });
}

/** The host's public identity, when both its parts were made; undefined otherwise. */
export async function readHostIdentity(stateDir: string): Promise<HostIdentity | undefined> {
  const seed = readNkeySeed(stateDir);
  const ageKey = readAgeIdentity(stateDir);
  if (!seed || !ageKey) return undefined;
  const { identityToRecipient } = await import("age-encryption");
  return { nkey: nkeyPublic(seed), age: await identityToRecipient(ageKey) };
}

/**
 * The host's public identity, making whatever part of it does not exist yet (once: an existing key
 * is never replaced, so a host keeps its identity across runs and upgrades). `created` says whether
 * anything was made now.
 */
export async function ensureHostIdentity(
  stateDir: string,
): Promise<{ identity: HostIdentity; created: boolean }> {
  const files = identityFiles(stateDir);
  mkdirSync(files.dir, { recursive: true, mode: 0o700 });
  let created = false;
  if (readNkeySeed(stateDir) === undefined) {
    writeFileAtomicSync(files.nkey, `${new TextDecoder().decode(createUser().getSeed())}\n`, { mode: 0o600 });
    created = true;
  }
  if (readAgeIdentity(stateDir) === undefined) {
    const { generateX25519Identity } = await import("age-encryption");
    writeFileAtomicSync(files.age, `${await generateX25519Identity()}\n`, { mode: 0o600 });
    created = true;
  }
  const identity = await readHostIdentity(stateDir);
  if (!identity) throw new Error(`the host identity under ${files.dir} could not be read back`);
  return { identity, created };
}
