/**
 * What `steward validate` (and so the syncer and the Action) checks of secrets, without decrypting
 * anything: a `secret: true` source (or a `{secret, key}` value's file) is encrypted, a plain
 * `source:` is not, and every node a secret is placed on can read it — by the recipients of a SOPS
 * file, or by the recipient manifest of an age file, whose count of recipients must match the
 * file's stanzas (see secrets.ts). A secret placed on a node it is not encrypted for is an error at
 * the line that uses it, with the command that fixes it: it would otherwise fail on the host.
 */
import type { AssignmentDocument, NodeDocument } from "./documents.js";
import { factsOf, type SourceUse } from "./facts.js";
import type { Finding } from "./findings.js";
import type { Node } from "./generated.js";
import type { SourceContent } from "./render.js";
import {
  ageStanzas,
  type ManifestRecipient,
  manifestPath,
  parseManifest,
  parseSopsDocument,
  type SecretFormat,
  SecretFormatError,
  secretFormat,
  sopsKeys,
  sopsMetadata,
} from "./secrets.js";
import type { LocatedFinding } from "./semantic.js";

/** What a secret file's bytes say, worked out once per content. */
interface Inspection {
  format: SecretFormat | undefined;
  /** Why it cannot be read as its format, if it cannot. */
  malformed?: string;
  /** age: the number of X25519 stanzas, and the types of any other stanza. */
  x25519?: number;
  otherStanzas?: string[];
  /** SOPS: the age recipients, what else holds its data key, and its top-level keys. */
  sops?: { recipients: Set<string>; keyGroups: number; otherKeys: number; keys: Set<string> };
}

/** A manifest as read: its recipients, or why it is missing or unreadable. */
type ManifestState =
  | { kind: "missing" }
  | { kind: "unreadable"; message: string }
  | { kind: "read"; recipients: ManifestRecipient[]; problems: { line: number; message: string }[] };

/** What the checks read of the repository. */
export interface SecretCheckInput {
  assignments: ReadonlyMap<string, AssignmentDocument>;
  placements: ReadonlyMap<string, readonly Node[]>;
  nodes: ReadonlyMap<string, NodeDocument>;
  /** The bytes of every file the resources read (see AssignmentFacts.sources). */
  sources: ReadonlyMap<string, SourceContent>;
  /** A file of the repository by path: its content id and bytes, undefined if it does not exist. */
  readFile(path: string): { id: string; bytes: () => Promise<Uint8Array> | Uint8Array } | undefined;
}

/** `node "a"`, or `nodes "a", "b" and 3 more`. */
function nodeNames(nodes: readonly Node[]): string {
  const names = nodes.slice(0, 3).map((node) => node.metadata.name);
  const more = nodes.length > 3 ? ` and ${nodes.length - 3} more` : "";
  return `${names.join(", ")}${more}`;
}

function inspect(bytes: Uint8Array): Inspection {
  const format = secretFormat(bytes);
  if (format === undefined) return { format };
  if (format === "sops") {
    const document = parseSopsDocument(bytes)!;
    const metadata = sopsMetadata(document);
    return {
      format,
      sops: {
        recipients: new Set(metadata.recipients),
        keyGroups: metadata.keyGroups,
        otherKeys: metadata.otherKeys,
        keys: new Set(sopsKeys(document)),
      },
    };
  }
  try {
    const stanzas = ageStanzas(bytes, format);
    const other = stanzas.filter((s) => s.type !== "X25519").map((s) => s.type);
    return { format, x25519: stanzas.length - other.length, otherStanzas: [...new Set(other)] };
  } catch (error) {
    if (!(error instanceof SecretFormatError)) throw error;
    return { format, malformed: error.message };
  }
}

/**
 * The secret checks of a repository, with what they read cached by content id: a sync that
 * changes nothing of a secret or its manifest parses neither again.
 */
export class SecretChecks {
  private readonly inspections = new Map<string, Inspection>();
  private readonly manifests = new Map<string, ManifestState>();

  /** Every finding about secrets, in assignment order. */
  async check(input: SecretCheckInput): Promise<LocatedFinding[]> {
    const out: LocatedFinding[] = [];
    const usedInspections = new Set<string>();
    const usedManifests = new Set<string>();
    // Every node each secret is placed on, over all its uses: for recipients no use needs any more.
    const placedBy = new Map<
      string,
      { nodes: Set<string>; first: { doc: AssignmentDocument; use: SourceUse } }
    >();
    const inspectionOf = (path: string): Inspection | undefined => {
      const content = input.sources.get(path);
      if (!content) return undefined;
      usedInspections.add(content.id);
      let inspection = this.inspections.get(content.id);
      if (!inspection) {
        inspection = inspect(content.bytes);
        this.inspections.set(content.id, inspection);
      }
      return inspection;
    };
    const manifestOf = async (path: string): Promise<ManifestState> => {
      const file = input.readFile(manifestPath(path));
      if (!file) return { kind: "missing" };
      usedManifests.add(file.id);
      let state = this.manifests.get(file.id);
      if (!state) {
        try {
          const text = Buffer.from(await file.bytes()).toString("utf8");
          state = { kind: "read", ...parseManifest(text) };
        } catch (error) {
          state = { kind: "unreadable", message: (error as Error).message };
        }
        this.manifests.set(file.id, state);
      }
      return state;
    };

    for (const doc of input.assignments.values()) {
      const facts = factsOf(doc.value);
      if (facts.sources.length === 0) continue;
      const placed = input.placements.get(doc.value.metadata.name) ?? [];
      for (const use of facts.sources) {
        const inspection = inspectionOf(use.source);
        // A missing file is source/missing already.
        if (!inspection) continue;
        const push = (finding: Omit<Finding, "path">) =>
          out.push({
            document: doc,
            finding: { ...finding, path: ["spec", "resources", use.index, ...use.field] },
          });
        if (!use.secret) {
          if (inspection.format !== undefined)
            push({
              severity: "error",
              code: "secret/not-marked",
              message: `${use.source} is encrypted (${inspection.format === "sops" ? "SOPS" : "age"}) but is used without secret: true: the host would get the ciphertext as the file's content`,
              fix: "add secret: true to this resource, so the agent on the host decrypts it",
            });
          continue;
        }
        const seen = placedBy.get(use.source);
        if (seen) for (const node of placed) seen.nodes.add(node.metadata.name);
        else
          placedBy.set(use.source, {
            nodes: new Set(placed.map((n) => n.metadata.name)),
            first: { doc, use },
          });
        await this.checkUse(doc.value.metadata.name, use, inspection, placed, manifestOf, push);
      }
    }
    for (const [path, { nodes, first }] of placedBy) {
      const inspection = inspectionOf(path);
      if (!inspection?.format || inspection.format === "sops") continue;
      const manifest = await manifestOf(path);
      if (manifest.kind !== "read") continue;
      const extra = manifest.recipients.filter(
        (entry) => entry.role === "node" && entry.name !== undefined && !nodes.has(entry.name),
      );
      if (extra.length === 0) continue;
      const names = extra.map((entry) => entry.name).join(", ");
      out.push({
        document: first.doc,
        finding: {
          severity: "warning",
          code: "secret/extra-recipient",
          path: ["spec", "resources", first.use.index, ...first.use.field],
          message: `${path} is still encrypted for ${extra.length === 1 ? "node" : "nodes"} ${names}, which it is not placed on`,
          fix: `run steward secret update ${path} (and rotate the secret if ${names} must not read it: an old commit still can)`,
        },
      });
    }
    // Keep what this repository uses now, nothing else.
    for (const id of this.inspections.keys()) if (!usedInspections.has(id)) this.inspections.delete(id);
    for (const id of this.manifests.keys()) if (!usedManifests.has(id)) this.manifests.delete(id);
    return out;
  }

  private async checkUse(
    assignment: string,
    use: SourceUse,
    inspection: Inspection,
    placed: readonly Node[],
    manifestOf: (path: string) => Promise<ManifestState>,
    push: (finding: Omit<Finding, "path">) => void,
  ): Promise<void> {
    const path = use.source;
    const update = `run steward secret update ${path}`;
    if (inspection.format === undefined) {
      push({
        severity: "error",
        code: "secret/not-encrypted",
        message: `${path} is used as a secret but is not encrypted: its content is in Git in the clear`,
        fix: `encrypt it for the nodes it is placed on (steward secret encrypt --assignment ${assignment} ${path} --out ${path}.age, then use ${path}.age and remove ${path} from Git); a secret that was ever committed in the clear must be rotated`,
      });
      return;
    }
    if (inspection.malformed) {
      push({
        severity: "error",
        code: "secret/malformed",
        message: `${path} is not a valid age file: ${inspection.malformed}`,
        fix: "encrypt it again with steward secret encrypt (or age -a -R)",
      });
      return;
    }
    // Which recipients can read it, and what to run when a node is missing.
    let readers: Set<string>;
    let fix: string;
    if (inspection.sops) {
      const sops = inspection.sops;
      if (sops.keyGroups > 1) {
        push({
          severity: "error",
          code: "secret/sops-unsupported",
          message: `${path} splits its data key into ${sops.keyGroups} key groups (Shamir): a host holds one age identity and cannot read it`,
          fix: "encrypt it with one key group whose age recipients include the nodes it is placed on",
        });
        return;
      }
      if (use.field[0] === "source" && (sops.keys.size !== 1 || !sops.keys.has("data"))) {
        push({
          severity: "error",
          code: "secret/sops-not-a-file",
          message: `${path} is a SOPS ${sops.keys.size === 0 ? "file with no data" : "map of keys"}, not a file: a file's secret source must be in SOPS's binary format (one \`data\` entry)`,
          fix: `encrypt the file itself: sops encrypt --input-type binary --output-type json FILE > ${path}; or take single values from this map with env: {NAME: {secret: ${path}, key: KEY}}`,
        });
        return;
      }
      if (use.key !== undefined && !sops.keys.has(use.key)) {
        push({
          severity: "error",
          code: "secret/unknown-key",
          message: `${path} has no key ${JSON.stringify(use.key)} (it has ${[...sops.keys].map((k) => JSON.stringify(k)).join(", ") || "none"})`,
          fix: `add ${use.key} with sops edit ${path}, or name one of its keys`,
        });
        return;
      }
      readers = sops.recipients;
      fix = `add the node's age recipient to ${path}'s recipients with sops (for instance in .sops.yaml, then sops updatekeys ${path})`;
    } else {
      const manifest = await manifestOf(path);
      const manifestFile = manifestPath(path);
      if (manifest.kind === "missing") {
        push({
          severity: "error",
          code: "secret/no-manifest",
          message: `${path} has no recipient manifest (${manifestFile}): which hosts can read it cannot be told without decrypting it`,
          fix: `${update} (it re-encrypts the file for the nodes it is placed on and writes the manifest); for a file encrypted with age -R FILE, copy FILE to ${manifestFile}`,
        });
        return;
      }
      if (manifest.kind === "unreadable" || manifest.problems.length > 0) {
        const why =
          manifest.kind === "unreadable"
            ? manifest.message
            : `line ${manifest.problems[0]!.line}: ${manifest.problems[0]!.message}`;
        push({
          severity: "error",
          code: "secret/manifest",
          message: `the recipient manifest ${manifestFile} cannot be read: ${why}`,
          fix: update,
        });
        return;
      }
      if ((inspection.otherStanzas?.length ?? 0) > 0) {
        push({
          severity: "error",
          code: "secret/recipient-type",
          message: `${path} is encrypted for ${inspection.otherStanzas!.join(", ")} recipients: hosts hold X25519 identities only`,
          fix: `encrypt it for X25519 recipients only: ${update}`,
        });
        return;
      }
      if (inspection.x25519 !== manifest.recipients.length) {
        push({
          severity: "error",
          code: "secret/manifest-mismatch",
          message: `${path} is encrypted for ${inspection.x25519} recipient${inspection.x25519 === 1 ? "" : "s"} but ${manifestFile} lists ${manifest.recipients.length}: the file was encrypted again without its manifest`,
          fix: update,
        });
        return;
      }
      readers = new Set(manifest.recipients.map((entry) => entry.recipient));
      fix = update;
    }
    const withoutIdentity = placed.filter((node) => node.spec.identity?.age === undefined);
    if (withoutIdentity.length > 0) {
      const names = nodeNames(withoutIdentity);
      push({
        severity: "error",
        code: "secret/no-identity",
        message: `${path} is placed on ${names}, which ${withoutIdentity.length === 1 ? "has" : "have"} no spec.identity.age to encrypt it for`,
        fix: `run steward agent identity on ${withoutIdentity.length === 1 ? "the host" : "each host"}, add its age recipient to spec.identity of nodes/${withoutIdentity[0]!.metadata.name}.yaml, then ${fix}`,
      });
    }
    const unreadable = placed.filter((node) => {
      const recipient = node.spec.identity?.age;
      return recipient !== undefined && !readers.has(recipient);
    });
    if (unreadable.length > 0)
      push({
        severity: "error",
        code: "secret/not-for-node",
        message: `${path} is placed on ${nodeNames(unreadable)} but not encrypted for ${unreadable.length === 1 ? "it" : "them"}`,
        fix,
      });
  }
}
