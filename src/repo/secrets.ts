/**
 * Making and keeping a fleet repository's secrets: `steward secret encrypt`, `edit` and `update`.
 * A secret is an age file encrypted for every node it is placed on (their `spec.identity.age`) and
 * for the operators of `steward.yaml` (`spec.secrets.operators`), with its recipient manifest beside
 * it (model/secrets.ts), so validate can tell who reads it without decrypting. Only an operator,
 * with their own identity, ever decrypts here (to edit, or to encrypt again for new recipients);
 * the plaintext is never written into the repository.
 */
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import type { NodeDocument } from "../model/documents.js";
import { EnvironmentError, NotFoundError, StewardError } from "../model/errors.js";
import { factsOf } from "../model/facts.js";
import type { Node } from "../model/generated.js";
import { directorySource, loadRepo } from "../model/load.js";
import { NodeIndex } from "../model/placement.js";
import type { DesiredState } from "../model/render.js";
import {
  ageStanzas,
  dearmor,
  formatManifest,
  type ManifestRecipient,
  manifestPath,
  parseManifest,
  secretFormat,
} from "../model/secrets.js";
import { didYouMean } from "../model/suggest.js";

/** A secret cannot be encrypted for whom it should be: a node without an identity, nobody at all. */
export class SecretRecipientsError extends StewardError {
  override readonly name = "SecretRecipientsError";
  constructor(message: string, data: Record<string, unknown> = {}) {
    super("E_SECRET_RECIPIENTS", message, { data });
  }
}

/** The operator's identity is missing, unreadable, or not one the secret is encrypted for (exit 2). */
export class SecretIdentityError extends EnvironmentError {
  override readonly name = "SecretIdentityError";
  constructor(message: string) {
    super(message, { code: "E_SECRET_IDENTITY" });
  }
}

/**
 * A file given to a secret command is not what it must be: missing, unreadable, encrypted already
 * (or not at all), outside the repository (exit 2).
 */
export class SecretFileError extends EnvironmentError {
  override readonly name = "SecretFileError";
  constructor(message: string, data: Record<string, unknown> = {}) {
    super(message, { code: "E_SECRET_FILE", data });
  }
}

/** Who a secret is encrypted for: the recipient and whose it is. */
export type SecretRecipient = Required<ManifestRecipient>;

/** Which nodes a secret is for, as `steward secret encrypt` is told. */
export type Placement = { assignment: string } | { nodes: string[] } | { selector: Record<string, string> };

/** An operator's age identities (`AGE-SECRET-KEY-1...` lines), from an identity file's text. */
export function identitiesIn(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line.startsWith("AGE-SECRET-KEY-1"));
}

/**
 * The operator's identities: `--identity FILE`, else `STEWARD_AGE_IDENTITY` (a file's path, or the
 * identity itself). Throws SecretIdentityError naming both when neither gives one.
 */
export function operatorIdentities(flag: string | undefined, env: NodeJS.ProcessEnv, cwd: string): string[] {
  const fromEnv = env.STEWARD_AGE_IDENTITY;
  let text: string;
  let where: string;
  if (flag !== undefined || (fromEnv !== undefined && !fromEnv.trim().startsWith("AGE-SECRET-KEY-"))) {
    const file = resolve(cwd, (flag ?? fromEnv)!);
    where = flag !== undefined ? `--identity ${flag}` : `STEWARD_AGE_IDENTITY=${fromEnv}`;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new SecretIdentityError(
        `cannot read the identity file ${file} (${where}): ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
  } else if (fromEnv !== undefined) {
    text = fromEnv;
    where = "STEWARD_AGE_IDENTITY";
  } else
    throw new SecretIdentityError(
      "this needs your age identity to decrypt the secret: pass --identity FILE (an age-keygen file) or set STEWARD_AGE_IDENTITY to its path",
    );
  const identities = identitiesIn(text);
  if (identities.length === 0)
    throw new SecretIdentityError(`${where} holds no age identity (a line AGE-SECRET-KEY-1...)`);
  return identities;
}

/** The repository's desired state, whatever its secrets say (they are what these commands fix). */
async function loadDesired(repo: string): Promise<DesiredState> {
  // Secret files not written yet count as there (checkSecrets: false): they are what is being made.
  const loaded = await loadRepo(directorySource(repo), { checkSecrets: false });
  if (!loaded.ok || !loaded.desired) {
    const first = loaded.diagnostics.find((d) => d.severity === "error");
    throw new SecretRecipientsError(
      `the fleet repository ${repo} is not valid${first ? ` (${first.file}:${first.line}:${first.column}: ${first.message})` : ""}: run steward validate ${repo} and fix it first`,
    );
  }
  return loaded.desired;
}

/** The recipients of `nodes` and of the fleet's operators (and extra ones); throws for a node without an identity. */
function recipientsFor(
  nodes: readonly Node[],
  desired: DesiredState,
  extra: readonly string[],
  what: string,
): SecretRecipient[] {
  const without = nodes.filter((node) => node.spec.identity?.age === undefined);
  if (without.length > 0) {
    const names = without.map((node) => node.metadata.name);
    throw new SecretRecipientsError(
      `${what} is for ${names.length === 1 ? "node" : "nodes"} ${names.join(", ")}, which ${names.length === 1 ? "has" : "have"} no spec.identity.age: run steward agent identity on ${names.length === 1 ? "that host" : "each of those hosts"} and add the age recipient it prints to spec.identity of nodes/${names[0]}.yaml, then run this again`,
      { nodes: names },
    );
  }
  const out: SecretRecipient[] = nodes.map((node) => ({
    recipient: node.spec.identity!.age!,
    role: "node",
    name: node.metadata.name,
  }));
  for (const operator of desired.fleet.secrets?.operators ?? [])
    out.push({ recipient: operator.recipient, role: "operator", name: operator.name });
  for (const recipient of extra) {
    if (!/^age1[02-9ac-hj-np-z]{58}$/.test(recipient))
      throw new SecretRecipientsError(
        `--operator-recipient ${JSON.stringify(recipient)} is not an age X25519 recipient (age1..., as age-keygen -y prints)`,
      );
    out.push({ recipient, role: "operator", name: "(--operator-recipient)" });
  }
  // One stanza per recipient: a node that is also an operator's key is listed once.
  const seen = new Set<string>();
  return out.filter((entry) => !seen.has(entry.recipient) && seen.add(entry.recipient));
}

/** The nodes a placement names, by name, assignment or labels; throws for one that names nothing. */
function placedNodes(placement: Placement, desired: DesiredState): Node[] {
  const index = new NodeIndex(desired.nodes);
  if ("assignment" in placement) {
    const assignment = desired.assignments.get(placement.assignment);
    if (!assignment)
      throw new NotFoundError(
        `assignment "${placement.assignment}" is not declared${didYouMean(placement.assignment, desired.assignments.keys())}: name one of the repository's assignments`,
      );
    return index.place(assignment.value);
  }
  if ("nodes" in placement)
    return placement.nodes.map((name) => {
      const node = index.node(name);
      if (!node)
        throw new NotFoundError(
          `node "${name}" is not declared${didYouMean(name, desired.nodes.keys())}: add nodes/${name}.yaml or fix --node`,
        );
      return node;
    });
  return [...index.matching(placement.selector)];
}

/** Encrypts `plaintext` for `recipients`: armored text, or the binary form. */
async function encryptFor(
  plaintext: Uint8Array,
  recipients: readonly ManifestRecipient[],
  armor: boolean,
): Promise<Uint8Array> {
  const age = await import("age-encryption");
  const encrypter = new age.Encrypter();
  for (const { recipient } of recipients) encrypter.addRecipient(recipient);
  const binary = await encrypter.encrypt(plaintext);
  return armor ? Buffer.from(age.armor.encode(binary), "utf8") : binary;
}

/** Decrypts an age file (armored or binary) with an operator's identities. */
async function decryptWith(
  path: string,
  bytes: Uint8Array,
  identities: readonly string[],
): Promise<Uint8Array> {
  const format = secretFormat(bytes);
  if (format === "sops")
    throw new SecretFileError(
      `${path} is a SOPS file: edit it and its recipients with sops (sops edit, sops updatekeys)`,
    );
  if (format === undefined)
    throw new SecretFileError(`${path} is not encrypted: encrypt it with steward secret encrypt first`);
  const age = await import("age-encryption");
  const decrypter = new age.Decrypter();
  for (const identity of identities) decrypter.addIdentity(identity);
  try {
    return await decrypter.decrypt(format === "age-armored" ? dearmor(bytes) : bytes);
  } catch (error) {
    const mine = await Promise.all(identities.map((identity) => age.identityToRecipient(identity)));
    if (/no identity matched/.test((error as Error).message))
      throw new SecretIdentityError(
        `${path} is not encrypted for your identity (${mine.join(", ")}): ask an operator who can read it to add your recipient to spec.secrets.operators in steward.yaml and run steward secret update ${path}`,
      );
    throw new SecretFileError(`${path} cannot be decrypted: ${(error as Error).message}`);
  }
}

/** `path` relative to the repository (`/`-separated); throws when it is outside. */
function inRepository(repo: string, path: string, flag: string): string {
  const rel = relative(repo, path);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel))
    throw new SecretFileError(
      `${flag} ${path} is outside the repository ${repo}: write the secret inside it`,
    );
  return rel.split("\\").join("/");
}

/** Writes a secret and its manifest (the file first: a manifest never describes a file not there yet). */
function writeSecret(
  file: string,
  repoPath: string,
  ciphertext: Uint8Array,
  recipients: readonly SecretRecipient[],
): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, ciphertext, { mode: 0o644 });
  writeFileSync(manifestPath(file), formatManifest(repoPath, recipients), { mode: 0o644 });
}

/** Who a list of recipients is, for what a command prints: `node db-1, operator alice`. */
export function describeRecipients(recipients: readonly ManifestRecipient[]): string {
  return recipients.map((entry) => (entry.role ? `${entry.role} ${entry.name}` : entry.recipient)).join(", ");
}

/** What `encryptSecret` wrote. */
export interface Encrypted {
  /** The secret's path in the repository. */
  path: string;
  file: string;
  manifest: string;
  recipients: SecretRecipient[];
}

/**
 * `steward secret encrypt`: encrypts `plaintext` for the nodes `placement` names and the fleet's
 * operators (and `operatorRecipients`), writing `out` (armored unless `binary`) and its manifest.
 */
export async function encryptSecret(request: {
  repo: string;
  plaintext: Uint8Array;
  /** Where the plaintext came from, for messages. */
  from: string;
  out: string;
  placement: Placement;
  operatorRecipients?: readonly string[];
  binary?: boolean;
}): Promise<Encrypted> {
  const repo = resolve(request.repo);
  const out = resolve(request.out);
  const path = inRepository(repo, out, "--out");
  if (secretFormat(request.plaintext) !== undefined)
    throw new SecretFileError(
      `${request.from} is encrypted already: give the plaintext (or use steward secret update ${path} to encrypt it for new recipients)`,
    );
  const desired = await loadDesired(repo);
  const nodes = placedNodes(request.placement, desired);
  const recipients = recipientsFor(nodes, desired, request.operatorRecipients ?? [], path);
  if (recipients.length === 0)
    throw new SecretRecipientsError(
      `${path} would be encrypted for nobody: the placement names no node and steward.yaml declares no spec.secrets.operators; name the nodes (--assignment, --node, --selector) or pass --operator-recipient`,
    );
  writeSecret(out, path, await encryptFor(request.plaintext, recipients, !request.binary), recipients);
  return { path, file: out, manifest: manifestPath(out), recipients };
}

/** A secret file read for editing: its format and its manifest's recipients. */
function readSecretFile(
  absolute: string,
  file: string,
): { bytes: Buffer; armored: boolean; recipients: ManifestRecipient[] } {
  let bytes: Buffer;
  try {
    bytes = readFileSync(absolute);
  } catch (error) {
    throw new SecretFileError(
      `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  const format = secretFormat(bytes);
  if (format === "sops")
    throw new SecretFileError(
      `${file} is a SOPS file: edit it with sops edit ${file} (its recipients are SOPS's own)`,
    );
  if (format === undefined)
    throw new SecretFileError(
      `${file} is not encrypted: encrypt it with steward secret encrypt --out ${file}.age`,
    );
  let manifest: string | undefined;
  try {
    manifest = readFileSync(manifestPath(absolute), "utf8");
  } catch {
    manifest = undefined;
  }
  if (manifest === undefined)
    throw new SecretFileError(
      `${file} has no recipient manifest (${manifestPath(file)}), so whom to encrypt it for again is not known: run steward secret update ${file}`,
    );
  const { recipients, problems } = parseManifest(manifest);
  if (problems.length > 0)
    throw new SecretFileError(
      `${manifestPath(file)}:${problems[0]!.line}: ${problems[0]!.message}: run steward secret update ${file}`,
    );
  const stanzas = ageStanzas(bytes, format).length;
  if (stanzas !== recipients.length)
    throw new SecretFileError(
      `${file} is encrypted for ${stanzas} recipients but ${manifestPath(file)} lists ${recipients.length}: run steward secret update ${file} first`,
    );
  return { bytes, armored: format === "age-armored", recipients };
}

/** What `editSecret` did. */
export interface Edited {
  file: string;
  changed: boolean;
  recipients: ManifestRecipient[];
}

/**
 * `steward secret edit`: decrypts `file` with the operator's identities into a private temporary
 * file, lets `edit` change it (the editor), and encrypts it again for the same recipients — the
 * manifest's — when it changed. The temporary file is removed whatever happens.
 */
export async function editSecret(request: {
  /** The secret, as the operator named it (relative to `cwd`). */
  file: string;
  cwd?: string;
  identities: readonly string[];
  edit: (temporary: string) => Promise<void>;
}): Promise<Edited> {
  const file = resolve(request.cwd ?? ".", request.file);
  const { bytes, armored, recipients } = readSecretFile(file, request.file);
  const plaintext = await decryptWith(request.file, bytes, request.identities);
  const dir = mkdtempSync(join(tmpdir(), "steward-secret-"));
  chmodSync(dir, 0o700);
  // The secret's own name, so an editor picks the right mode for it.
  const temporary = join(dir, basename(file).replace(/\.age$/, "") || "secret");
  try {
    writeFileSync(temporary, plaintext, { mode: 0o600 });
    await request.edit(temporary);
    const edited = readFileSync(temporary);
    if (Buffer.compare(edited, Buffer.from(plaintext)) === 0) return { file, changed: false, recipients };
    // The same recipients: the manifest stays as it is.
    writeFileSync(file, await encryptFor(edited, recipients, armored));
    return { file, changed: true, recipients };
  } finally {
    try {
      // Overwritten before it is unlinked: an editor's backup aside, nothing of it stays on disk.
      const size = statSync(temporary).size;
      writeFileSync(temporary, randomBytes(size));
    } catch {
      // The editor removed or renamed it.
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What `updateSecrets` did with one secret. */
export interface Updated {
  path: string;
  action: "re-encrypted" | "up-to-date" | "skipped";
  recipients: ManifestRecipient[];
  before: ManifestRecipient[];
  /** Why it was skipped. */
  note?: string;
}

/** Every secret the repository's assignments use, with the nodes they are placed on. */
function secretUses(desired: DesiredState): Map<string, Set<Node>> {
  const index = new NodeIndex(desired.nodes);
  const uses = new Map<string, Set<Node>>();
  for (const assignment of desired.assignments.values()) {
    const placed = index.place(assignment.value);
    for (const use of factsOf(assignment.value).sources) {
      if (!use.secret) continue;
      let nodes = uses.get(use.source);
      if (!nodes) {
        nodes = new Set();
        uses.set(use.source, nodes);
      }
      for (const node of placed) nodes.add(node);
    }
  }
  return uses;
}

function sameRecipients(a: readonly ManifestRecipient[], b: readonly ManifestRecipient[]): boolean {
  const set = new Set(a.map((entry) => entry.recipient));
  return a.length === b.length && b.every((entry) => set.has(entry.recipient));
}

/**
 * `steward secret update`: encrypts each secret again for whom it is for now — the nodes the
 * repository places it on (a secret no assignment uses: the nodes its manifest names) and the
 * fleet's operators — when that is not whom it is encrypted for. `paths` (repository paths, or
 * files) default to every age secret the assignments use. Decrypts with `identities` only what it
 * must encrypt again.
 */
export async function updateSecrets(request: {
  repo: string;
  paths?: readonly string[];
  identities: () => readonly string[];
  operatorRecipients?: readonly string[];
  cwd?: string;
}): Promise<Updated[]> {
  const repo = resolve(request.repo);
  const desired = await loadDesired(repo);
  const uses = secretUses(desired);
  const wanted =
    request.paths && request.paths.length > 0
      ? request.paths.map((path) => {
          const absolute = resolve(request.cwd ?? repo, path);
          return existsSync(absolute) ? inRepository(repo, absolute, "PATH") : path;
        })
      : [...uses.keys()].sort();
  const out: Updated[] = [];
  let identities: readonly string[] | undefined;
  for (const path of wanted) {
    const file = join(repo, path);
    if (!existsSync(file))
      throw new SecretFileError(
        `${path} does not exist in ${repo}: give the secret's path in the repository`,
      );
    const bytes = readFileSync(file);
    const format = secretFormat(bytes);
    let before: ManifestRecipient[] = [];
    try {
      before = parseManifest(readFileSync(manifestPath(file), "utf8")).recipients;
    } catch {
      before = [];
    }
    if (format === "sops") {
      out.push({
        path,
        action: "skipped",
        recipients: before,
        before,
        note: "a SOPS file: add or remove its age recipients with sops (.sops.yaml, then sops updatekeys)",
      });
      continue;
    }
    if (format === undefined)
      throw new SecretFileError(
        `${path} is not encrypted: encrypt it with steward secret encrypt --repo ${repo} ... ${path} --out ${path}.age`,
      );
    const placed = uses.get(path);
    const nodes: Node[] = placed
      ? [...placed].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))
      : before
          .filter((entry) => entry.role === "node" && entry.name && desired.nodes.has(entry.name))
          .map((entry) => (desired.nodes.get(entry.name!) as NodeDocument).value);
    const recipients = recipientsFor(nodes, desired, request.operatorRecipients ?? [], path);
    const stanzas = ageStanzas(bytes, format).length;
    if (sameRecipients(before, recipients) && stanzas === before.length) {
      // Names may have changed (a renamed operator): the manifest says them as they are now.
      writeFileSync(manifestPath(file), formatManifest(path, recipients));
      out.push({ path, action: "up-to-date", recipients, before });
      continue;
    }
    identities ??= request.identities();
    const plaintext = await decryptWith(path, bytes, identities);
    writeSecret(file, path, await encryptFor(plaintext, recipients, format === "age-armored"), recipients);
    out.push({ path, action: "re-encrypted", recipients, before });
  }
  return out;
}
