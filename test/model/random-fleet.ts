/**
 * Random histories of a small fleet repository, for tests that compare a load by difference with a
 * load from scratch. The files are drawn from variants chosen to take part in every cross-document
 * check: duplicate names, undeclared and invalid nodes, selectors, dependencies between assignments
 * (unknown, cycles, not placed), conflicts over paths and services (also per node through
 * templates), paths outside roots, `source:` files that come and go (one of them YAML, which is a
 * document only while nothing reads it), ignore globs that change, misplaced Fleet documents,
 * missing template values and files that do not parse.
 */
import { createHash } from "node:crypto";
import type { RepoFile, RepoSource } from "../../src/model/load.js";

/** A deterministic generator of numbers in [0, 1) (mulberry32), so a failing seed can be replayed. */
export function randomNumbers(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Random = () => number;

/** How likely a file is to have a mistake: histories with few mistakes reach rendering too. */
let mess = 0.2;

/** Sets how likely generated files are to have mistakes (0: none that a variant can avoid). */
export function setMess(probability: number): void {
  mess = probability;
}

const pick = <T>(random: Random, list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
const chance = (random: Random, p: number) => random() < p;

const NODES = ["n0", "n1", "n2", "n3", "n4"];
const ASSIGNMENTS = ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"];

function fleetVariant(random: Random): string | null {
  const variants = [
    null,
    "mode: apply",
    "mode: observe\nbudget:\n  attempts: 3\n  within: 5m",
    'mode: apply\nignore: ["docs/**"]',
    'mode: apply\nignore: ["docs/**", "assignments/a5.yaml"]',
  ];
  const spec = chance(random, mess / 3) ? "mode: sideways" : pick(random, variants);
  if (spec === null) return null;
  return `apiVersion: steward.dev/v1\nkind: Fleet\nmetadata:\n  name: random\nspec:\n${spec
    .split("\n")
    .map((line) => `  ${line}`)
    .join("\n")}\n`;
}

function nodeVariant(random: Random, name: string): string | null {
  if (chance(random, mess / 2)) return null;
  const shown = chance(random, mess / 3) ? pick(random, NODES) : name;
  const role = pick(random, ["r0", "r1"]);
  const roots = chance(random, mess / 2)
    ? "[/srv/a0, /srv/a1, /srv/a2]"
    : pick(random, ["[/srv]", "[/srv, /etc]"]);
  // No value at all is no mistake until an assignment placed there uses it.
  const dir = chance(random, 0.1)
    ? null
    : chance(random, mess)
      ? pick(random, ["../etc", ""])
      : pick(random, ["data", "logs"]);
  const transport = chance(random, mess / 4) ? "carrier-pigeon" : chance(random, mess / 3) ? "ssh" : "local";
  return `apiVersion: steward.dev/v1
kind: Node
metadata:
  name: ${shown}
  labels:
    role: ${role}
spec:
  transport: ${transport}
  roots: ${roots}
${dir === null ? "" : `  vars:\n    dir: "${dir}"\n`}`;
}

function resourceVariant(random: Random, name: string, i: number): string {
  const good = [
    `- kind: file\n  name: config${i}\n  path: /srv/${name}/config${i}\n  content: "${name} ${Math.floor(random() * 3)}"`,
    `- kind: directory\n  name: dir${i}\n  path: /srv/\${node.vars.dir}/${name}${i}`,
    `- kind: file\n  name: src${i}\n  path: /srv/${name}/from-f0-${i}\n  source: files/f0.conf`,
    `- kind: file\n  name: srcy${i}\n  path: /srv/${name}/from-y${i}\n  source: files/y.yaml`,
    `- kind: file\n  name: srcf1${i}\n  path: /srv/${name}/from-f1-${i}\n  source: files/f1.conf`,
    `- kind: file\n  name: templated${i}\n  path: /srv/${name}/t${i}\n  content: "\${node.name} \${node.vars.dir}"`,
  ];
  const bad = [
    `- kind: file\n  name: shared${i}\n  path: /srv/shared.conf\n  content: shared`,
    `- kind: directory\n  name: common${i}\n  path: /srv/\${node.vars.dir}`,
    `- kind: file\n  name: outside${i}\n  path: /etc/${name}.conf\n  content: x`,
    `- kind: service\n  name: web\n  exec: [node, server.mjs]`,
    `- kind: file\n  name: lacking${i}\n  path: /srv/${name}/lacking\n  content: "\${node.vars.nope}"`,
    `- kind: symlink\n  name: link${i}\n  path: /srv/${name}/link\n  target: ../../etc/passwd`,
    `- kind: file\n  name: dep${i}\n  path: /srv/${name}/dep${i}\n  content: y\n  dependsOn: [${pick(random, ["config0", "dir1", "nothing"])}]`,
  ];
  return pick(random, chance(random, mess) ? bad : good);
}

function assignmentVariant(random: Random, name: string): string | null {
  if (chance(random, 0.1)) return null;
  if (chance(random, mess / 4))
    return `apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: ${name}\nspec: {}\n`;
  const shown = chance(random, mess / 4) ? pick(random, ASSIGNMENTS) : name;
  const lines = ["apiVersion: steward.dev/v1", "kind: Assignment", "metadata:", `  name: ${shown}`, "spec:"];
  if (chance(random, 0.35))
    lines.push(
      "  selector:",
      `    matchLabels:`,
      `      role: ${pick(random, chance(random, mess) ? ["r9"] : ["r0", "r1"])}`,
    );
  else {
    const nodes = [...NODES, ...(chance(random, mess) ? ["n9"] : [])].filter(() => chance(random, 0.3));
    lines.push(`  nodes: [${nodes.join(", ")}]`);
  }
  if (chance(random, 0.4)) {
    const candidates = chance(random, mess)
      ? [...ASSIGNMENTS, "zz"]
      : ASSIGNMENTS.filter((other) => other > name);
    const dependencies = candidates.filter((other) => other !== name && chance(random, 0.15));
    if (dependencies.length > 0) lines.push(`  dependsOn: [${dependencies.join(", ")}]`);
  }
  if (chance(random, 0.3)) lines.push(`  version: "1.${Math.floor(random() * 3)}"`);
  lines.push("  resources:");
  const count = 1 + Math.floor(random() * 3);
  for (let i = 0; i < count; i++)
    for (const line of resourceVariant(random, name, i).split("\n")) lines.push(`    ${line}`);
  if (chance(random, mess / 2))
    lines.push("  rollout:", "    canary:", `      nodes: [${pick(random, NODES)}]`);
  return `${lines.join("\n")}\n`;
}

/** Every path the random fleet may have, with a generator of its next content (null: absent). */
const PATHS: [string, (random: Random) => string | null][] = [
  ["steward.yaml", fleetVariant],
  ...NODES.map((name): [string, (random: Random) => string | null] => [
    `nodes/${name}.yaml`,
    (random) => nodeVariant(random, name),
  ]),
  ...ASSIGNMENTS.map((name): [string, (random: Random) => string | null] => [
    `assignments/${name}.yaml`,
    (random) => assignmentVariant(random, name),
  ]),
  [
    "files/f0.conf",
    (random) => (chance(random, mess) ? null : pick(random, ["workers = 1\n", "workers = 2\n"])),
  ],
  ["files/f1.conf", (random) => (chance(random, mess) ? null : pick(random, ["a\n", "b\n"]))],
  [
    "files/y.yaml",
    (random) =>
      chance(random, mess)
        ? pick(random, [null, nodeVariant(random, "n3")])
        : pick(random, ["just: content\n", "port: 80\n"]),
  ],
  ["docs/notes.yaml", (random) => (chance(random, mess) ? "this: [is not\n" : null)],
  ["misc/second-fleet.yaml", (random) => (chance(random, mess) ? fleetVariant(random) : null)],
  [
    "misc/broken.yaml",
    (random) => (chance(random, mess / 2) ? pick(random, ["key: [unclosed\n", "a: 1\na: 2\n"]) : null),
  ],
  ["misc/.hidden.yaml", (random) => pick(random, [null, "garbage: [\n"])],
];

/** The files of a repository by path. */
export type FleetFiles = Map<string, string>;

/** A random starting fleet: most paths present. */
export function randomFleet(random: Random): FleetFiles {
  const files: FleetFiles = new Map();
  for (const [path, next] of PATHS) {
    const content = next(random);
    if (content !== null) files.set(path, content);
  }
  return files;
}

/**
 * The next revision of `files`: a few paths get other content or go away, and sometimes a file
 * moves to another path with its content.
 */
export function mutateFleet(random: Random, files: FleetFiles): FleetFiles {
  const next = new Map(files);
  const count = chance(random, 0.15) ? 4 + Math.floor(random() * 6) : 1 + Math.floor(random() * 2);
  for (let i = 0; i < count; i++) {
    const [path, generate] = pick(random, PATHS);
    const content = generate(random);
    if (content === null) next.delete(path);
    else next.set(path, content);
    // A moved assignment comes back to its own path rather than being declared twice.
    if (path.startsWith("assignments/")) next.delete(path.replace("assignments/", "assignments/moved-"));
  }
  if (chance(random, 0.1)) {
    const present = [...next.keys()].filter((p) => p.startsWith("assignments/"));
    if (present.length > 0) {
      const from = pick(random, present);
      next.set(from.replace("assignments/", "assignments/moved-"), next.get(from)!);
      next.delete(from);
    }
  }
  return next;
}

const blobId = (text: string) => createHash("sha1").update(text).digest("hex");

/**
 * RepoSources over successive revisions, like git trees: an unchanged file keeps its RepoFile
 * object (sometimes a new object with the same id, as another listing would give), ids are content
 * hashes, a source tells what changed since an earlier one (mostly), and `read` counts what it is
 * asked for.
 */
export class RevisionSources {
  private known = new Map<string, RepoFile>();
  /** The files of each source made, for `changesSince`. */
  private readonly listings = new WeakMap<RepoSource, Map<string, RepoFile>>();
  reads = 0;

  constructor(private readonly random: Random) {}

  /** A source of `files`, its RepoFiles reusing the previous revision's where the content is the same. */
  source(files: FleetFiles): RepoSource {
    const listing: RepoFile[] = [];
    const known = new Map<string, RepoFile>();
    for (const [path, text] of files) {
      const id = blobId(text);
      let file = this.known.get(path);
      if (!file || file.id !== id || chance(this.random, 0.05)) file = { path, id };
      known.set(path, file);
      listing.push(file);
    }
    this.known = known;
    // Git lists a tree in its own order; the loader must not rely on it.
    listing.sort(() => (chance(this.random, 0.5) ? -1 : 1));
    const bytes = new Map([...files].map(([path, text]) => [path, new TextEncoder().encode(text)]));
    const source: RepoSource = {
      files: () => listing,
      read: (file) => {
        this.reads++;
        const content = bytes.get(file.path);
        if (!content) throw new Error(`no file ${file.path}`);
        return content;
      },
      // Like a git tree: the paths whose file differs from an earlier source's, and sometimes
      // no answer (the loader then compares the listings).
      changesSince: (earlier) => {
        const before = this.listings.get(earlier);
        if (!before || chance(this.random, 0.2)) return undefined;
        const changes = new Map<string, RepoFile | undefined>();
        for (const [path, file] of known) if (before.get(path) !== file) changes.set(path, file);
        for (const path of before.keys()) if (!known.has(path)) changes.set(path, undefined);
        return changes;
      },
    };
    this.listings.set(source, known);
    return source;
  }
}

/** A RepoSource of `files` with no ids: every load of it reads everything. */
export function plainSource(files: FleetFiles): RepoSource {
  return {
    files: () => [...files.keys()].map((path) => ({ path })),
    read: (file) => new TextEncoder().encode(files.get(file.path)!),
  };
}
