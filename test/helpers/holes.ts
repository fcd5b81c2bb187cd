/**
 * Fleet repositories `steward validate` once accepted and the agent then refused or failed on
 * (issue 13, §4): symlinks that leave the repository, dangle or loop; paths with a NUL byte, a
 * line break or a trailing `/`; names the bundle schema refuses; counts and durations without
 * bounds. Each case is a change to one small valid fleet, with the one diagnostic it must give.
 * The same table runs against `steward validate DIR` and against the syncer and hub on a commit.
 */
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** The one node, with a value that is not a path (it has a line break). */
export const NODE = `apiVersion: steward.dev/v1
kind: Node
metadata:
  name: web-1
spec:
  transport: local
  roots: [/srv]
  vars:
    bad: "/srv/a\\nb"
`;

/** The web assignment with its page's content. */
export function web(content: string): string {
  return `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: web
spec:
  nodes: [web-1]
  resources:
    - kind: file
      path: /srv/web/index.html
      content: ${content}
`;
}

/** A valid fleet: the node and web at "v1". */
export const VALID_FLEET: Record<string, string> = {
  "nodes/web-1.yaml": NODE,
  "assignments/web.yaml": web("v1"),
};

/** Assignment `holes` on web-1: `body` is YAML from line 7 on, under `spec:` (two spaces in). */
function holes(body: string): string {
  return `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: holes
spec:
  nodes: [web-1]
${body}`;
}

/** A plain file resource, lines 7 to 10: `resources:`, then the file at /srv/holes/a. */
const FILE = "  resources:\n    - kind: file\n      path: /srv/holes/a\n      content: x\n";

function fleet(spec: string): string {
  return `apiVersion: steward.dev/v1\nkind: Fleet\nmetadata:\n  name: fleet\nspec:\n${spec}`;
}

/** The diagnostic a case must give, alone. */
export interface ExpectedDiagnostic {
  file: string;
  line: number;
  column: number;
  code: string;
  /** Parts the message must contain (the subject, quoted). */
  message: string[];
  /** A part of the fix it must name. */
  fix: string;
}

export interface BrokenFleet {
  name: string;
  /** Files written over the valid fleet (with web at "v2", so an accepted revision would show). */
  files?: Record<string, string>;
  /** Symlinks to make, by path: their targets, where `OUTSIDE` is a directory outside the repository. */
  links?: Record<string, string>;
  expected: ExpectedDiagnostic;
}

/** Stands for a directory outside the repository in link targets. */
export const OUTSIDE = "<outside>";

const link = (file: string, code: string, message: string[], fix: string): ExpectedDiagnostic => ({
  file,
  line: 1,
  column: 1,
  code,
  message: [`symlink "${file}"`, ...message],
  fix,
});
const LEAVES = "put the file itself in the repository";

export const BROKEN_FLEETS: BrokenFleet[] = [
  {
    name: "a YAML file that is a symlink to /etc/passwd",
    // Not named *passwd*: the hub masks what follows such a name in the messages it keeps.
    links: { "nodes/users.yaml": "/etc/passwd" },
    expected: link(
      "nodes/users.yaml",
      "file/symlink-outside",
      ['"/etc/passwd"', "outside the repository"],
      LEAVES,
    ),
  },
  {
    name: "a Node document symlinked from outside the repository",
    links: { "nodes/web-2.yaml": `${OUTSIDE}/web-2.yaml` },
    expected: link("nodes/web-2.yaml", "file/symlink-outside", ["outside the repository"], LEAVES),
  },
  {
    name: "a directory symlink to outside the repository",
    links: { "nodes/more": OUTSIDE },
    expected: link("nodes/more", "file/symlink-outside", ["outside the repository"], LEAVES),
  },
  {
    name: "a relative symlink that escapes the repository",
    links: { "assignments/hostname": "../../etc/hostname" },
    expected: link(
      "assignments/hostname",
      "file/symlink-outside",
      ['"../../etc/hostname"', "outside the repository"],
      LEAVES,
    ),
  },
  {
    name: "a source: file that is a symlink out of the repository",
    files: {
      "assignments/holes.yaml": holes(
        "  resources:\n    - kind: file\n      path: /srv/holes/a\n      source: files/a\n",
      ),
    },
    links: { "files/a": "/etc/hostname" },
    expected: link("files/a", "file/symlink-outside", ['"/etc/hostname"'], LEAVES),
  },
  {
    name: "a dangling symlink",
    links: { "nodes/web-3.yaml": "web-9.yaml" },
    expected: link(
      "nodes/web-3.yaml",
      "file/symlink-dangling",
      ['"web-9.yaml"', '"nodes/web-9.yaml" does not exist'],
      "point the link at an existing file or directory",
    ),
  },
  {
    name: "a symlink that loops",
    links: { "nodes/loop.yaml": "loop.yaml" },
    expected: link("nodes/loop.yaml", "file/symlink-loop", ["loop"], "does not lead back to it"),
  },
  {
    name: "a directory symlink to the directory it is in",
    links: { "nodes/again": "." },
    expected: link("nodes/again", "file/symlink-loop", ["contains the link itself"], "does not contain it"),
  },
  {
    name: "a path with a NUL byte",
    files: {
      "assignments/holes.yaml": holes('  resources:\n    - kind: file\n      path: "/srv/holes/a\\0b"\n'),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 9,
      column: 13,
      code: "schema/pattern",
      message: [
        'spec.resources[0].path must not contain control characters (NUL, line breaks, tabs) (got "/srv/holes/a\\u0000b")',
      ],
      fix: "without control characters (NUL, line breaks, tabs)",
    },
  },
  {
    name: "a path with a line break",
    files: {
      "assignments/holes.yaml": holes('  resources:\n    - kind: file\n      path: "/srv/holes/a\\nb"\n'),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 9,
      column: 13,
      code: "schema/pattern",
      message: [
        'spec.resources[0].path must not contain control characters (NUL, line breaks, tabs) (got "/srv/holes/a\\nb")',
      ],
      fix: "without control characters (NUL, line breaks, tabs)",
    },
  },
  {
    name: "a path with a trailing slash",
    files: {
      "assignments/holes.yaml": holes("  resources:\n    - kind: directory\n      path: /srv/holes/\n"),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 9,
      column: 13,
      code: "schema/pattern",
      message: ['spec.resources[0].path must not end with "/" (got "/srv/holes/")'],
      fix: "or a trailing `/`",
    },
  },
  {
    name: "a resource name with a control character",
    files: {
      "assignments/holes.yaml": holes(
        '  resources:\n    - kind: file\n      name: "web\\tconfig"\n      path: /srv/holes/a\n',
      ),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 9,
      column: 13,
      code: "schema/pattern",
      message: [
        'spec.resources[0].name must not contain control characters (NUL, line breaks, tabs) (got "web\\tconfig")',
      ],
      fix: "without control characters",
    },
  },
  {
    name: "a name defaulted from a path that a node's value breaks",
    files: {
      "assignments/holes.yaml": holes("  resources:\n    - kind: file\n      path: ${node.vars.bad}/x\n"),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 9,
      column: 13,
      code: "path/invalid",
      message: ['"${node.vars.bad}/x" becomes "/srv/a\\nb/x" on node "web-1"'],
      fix: "fix the node's value (spec.vars of nodes/web-1)",
    },
  },
  {
    name: "a given name that a node's value breaks",
    files: {
      "assignments/holes.yaml": holes(
        '  resources:\n    - kind: file\n      name: "conf ${node.vars.bad}"\n      path: /srv/holes/a\n',
      ),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 9,
      column: 13,
      code: "schema/pattern",
      message: [
        'spec.resources[0].name must not contain control characters (NUL, line breaks, tabs) (got "conf /srv/a\\nb") on node "web-1", once its values are filled in',
      ],
      fix: 'fix the values it uses on node "web-1"',
    },
  },
  ...(
    [
      ["attempts: 1e400", "a number too large to hold (read as Infinity)"],
      ["attempts: .inf", "a number too large to hold (read as Infinity)"],
      ["attempts: 1e21", "number 1e+21"],
    ] as const
  ).map(
    ([line, got]): BrokenFleet => ({
      name: `budget ${line}`,
      files: { "assignments/holes.yaml": holes(`${FILE}  budget:\n    ${line}\n`) },
      expected: {
        file: "assignments/holes.yaml",
        line: 12,
        column: 15,
        code: "schema/maximum",
        message: [`spec.budget.attempts must be at most 1000 (got ${got})`],
        fix: "from 1 to 1000",
      },
    }),
  ),
  {
    name: "rollout maxInFlight: 1e308",
    files: { "assignments/holes.yaml": holes(`${FILE}  rollout:\n    maxInFlight: 1e308\n`) },
    expected: {
      file: "assignments/holes.yaml",
      line: 12,
      column: 18,
      code: "schema/invalid",
      message: ["spec.rollout.maxInFlight must be an integer >= 1 and <= 100000 or a string"],
      fix: "a count from 1 to 100000",
    },
  },
  {
    name: "rollout canary.count: 1e21",
    files: { "assignments/holes.yaml": holes(`${FILE}  rollout:\n    canary:\n      count: 1e21\n`) },
    expected: {
      file: "assignments/holes.yaml",
      line: 13,
      column: 14,
      code: "schema/maximum",
      message: ["spec.rollout.canary.count must be at most 100000 (got number 1e+21)"],
      fix: "from 1 to 100000",
    },
  },
  {
    name: "rollout maxFailures: 1e308",
    files: { "assignments/holes.yaml": holes(`${FILE}  rollout:\n    maxFailures: 1e308\n`) },
    expected: {
      file: "assignments/holes.yaml",
      line: 12,
      column: 18,
      code: "schema/maximum",
      message: ["spec.rollout.maxFailures must be at most 100000 (got number 1e+308)"],
      fix: "from 0 to 100000",
    },
  },
  {
    name: "heartbeat missed: 1e21",
    files: { "steward.yaml": fleet("  heartbeat:\n    missed: 1e21\n") },
    expected: {
      file: "steward.yaml",
      line: 7,
      column: 13,
      code: "schema/maximum",
      message: ["spec.heartbeat.missed must be at most 100 (got number 1e+21)"],
      fix: "from 1 to 100",
    },
  },
  {
    name: "heartbeat interval: 0s",
    files: { "steward.yaml": fleet("  heartbeat:\n    interval: 0s\n") },
    expected: {
      file: "steward.yaml",
      line: 7,
      column: 15,
      code: "duration/range",
      message: ['spec.heartbeat.interval must be from 1s to 1h (got "0s")'],
      fix: "use a duration from 1s to 1h",
    },
  },
  {
    name: "budget within: 99999999999999999999999d",
    files: { "assignments/holes.yaml": holes(`${FILE}  budget:\n    within: 99999999999999999999999d\n`) },
    expected: {
      file: "assignments/holes.yaml",
      line: 12,
      column: 13,
      code: "duration/range",
      message: ['spec.budget.within must be from 1s to 30d (got "99999999999999999999999d")'],
      fix: "use a duration from 1s to 30d",
    },
  },
  {
    name: "a command timeout: 50ms",
    files: {
      "assignments/holes.yaml": holes(
        "  resources:\n    - kind: command\n      name: migrate\n      run: [/bin/true]\n      timeout: 50ms\n",
      ),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 11,
      column: 16,
      code: "duration/range",
      message: ['spec.resources[0].timeout must be from 100ms to 24h (got "50ms")'],
      fix: "use a duration from 100ms to 24h",
    },
  },
  {
    name: "a canary soak: 8d",
    files: {
      "assignments/holes.yaml": holes(`${FILE}  rollout:\n    canary:\n      count: 1\n      soak: 8d\n`),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 14,
      column: 13,
      code: "duration/range",
      message: ['spec.rollout.canary.soak must be from 0s to 7d (got "8d")'],
      fix: "use a duration from 0s to 7d",
    },
  },
  {
    name: "a probe interval: 500ms",
    files: {
      "assignments/holes.yaml": holes(
        `${FILE}  probes:\n    - kind: tcp\n      name: port\n      port: 80\n      interval: 500ms\n`,
      ),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 15,
      column: 17,
      code: "duration/range",
      message: ['spec.probes[0].interval must be from 1s to 24h (got "500ms")'],
      fix: "use a duration from 1s to 24h",
    },
  },
  {
    name: "a service stopTimeout: 2h",
    files: {
      "assignments/holes.yaml": holes(
        "  resources:\n    - kind: service\n      name: app\n      exec: [/bin/sleep, '60']\n      stopTimeout: 2h\n",
      ),
    },
    expected: {
      file: "assignments/holes.yaml",
      line: 11,
      column: 20,
      code: "duration/range",
      message: ['spec.resources[0].stopTimeout must be from 0s to 1h (got "2h")'],
      fix: "use a duration from 0s to 1h",
    },
  },
];

/** Writes `files` and makes the symlinks `links` (path → target) in the repository at `dir`. */
export function writeRepository(
  dir: string,
  files: Record<string, string>,
  links: Record<string, string> = {},
): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  for (const [path, target] of Object.entries(links)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    symlinkSync(target, join(dir, path));
  }
}

/**
 * Writes a case into the repository at `dir` (over whatever is there, web at "v2"): its files,
 * and its links with `OUTSIDE` standing for `outside`, where a valid Node document `web-2.yaml` is.
 */
export function writeBroken(dir: string, broken: BrokenFleet, outside: string): void {
  writeFileSync(join(outside, "web-2.yaml"), NODE.replace("web-1", "web-2"));
  const links = Object.entries(broken.links ?? {}).map(([path, target]) => [
    path,
    target.replace(OUTSIDE, outside),
  ]);
  writeRepository(dir, { "assignments/web.yaml": web("v2"), ...broken.files }, Object.fromEntries(links));
}

/**
 * A valid fleet whose documents and content are partly reached through symlinks that stay inside:
 * steward.yaml is a link to config/fleet.yaml (mode observe), read once, as steward.yaml; node
 * web-2 lives in a dot-directory, which is not read on its own; web-1 and web-2 are each reached
 * by a second link and by a directory link; assignment `page` on web-2 reads its `source:`
 * through a link.
 */
export const LINKED_FLEET: { files: Record<string, string>; links: Record<string, string> } = {
  files: {
    ...VALID_FLEET,
    ".shared/web-2.yaml": NODE.replace("web-1", "web-2"),
    "config/fleet.yaml": fleet("  mode: observe\n"),
    "content/page.html": "<p>linked</p>\n",
    "assignments/page.yaml": `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: page
spec:
  nodes: [web-2]
  resources:
    - kind: file
      path: /srv/page.html
      source: files/page.html
`,
  },
  links: {
    "steward.yaml": "config/fleet.yaml",
    "nodes/web-2.yaml": "../.shared/web-2.yaml",
    "nodes/web-2-again.yaml": "web-2.yaml",
    "nodes/web-1-again.yaml": "./web-1.yaml",
    "all-nodes": "nodes",
    "files/page.html": "../content/page.html",
  },
};
