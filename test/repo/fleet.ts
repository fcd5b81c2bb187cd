/** Small fleet repositories for the syncer's tests: YAML text for steward.yaml, nodes and assignments. */

export function fleetYaml(spec: string = "mode: apply"): string {
  return `apiVersion: steward.dev/v1
kind: Fleet
metadata:
  name: test
spec:
${indent(spec, 2)}
`;
}

export function nodeYaml(name: string, labels: Record<string, string> = {}): string {
  const labelLines = Object.entries(labels)
    .map(([k, v]) => `    ${k}: ${v}`)
    .join("\n");
  return `apiVersion: steward.dev/v1
kind: Node
metadata:
  name: ${name}
${labelLines ? `  labels:\n${labelLines}\n` : ""}spec:
  transport: local
  roots: [/srv]
`;
}

export interface AssignmentOptions {
  nodes?: string[];
  selector?: Record<string, string>;
  /** Content of its one config file. */
  content?: string;
  /** Extra YAML under spec (already indented by two spaces). */
  extra?: string;
}

export function assignmentYaml(name: string, options: AssignmentOptions = {}): string {
  const placement = options.selector
    ? `  selector:\n    matchLabels:\n${Object.entries(options.selector)
        .map(([k, v]) => `      ${k}: ${v}`)
        .join("\n")}\n`
    : `  nodes: [${(options.nodes ?? []).join(", ")}]\n`;
  return `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: ${name}
spec:
${placement}  resources:
    - kind: file
      name: config
      path: /srv/${name}/config.txt
      content: ${JSON.stringify(options.content ?? `${name} v1\n`)}
${options.extra ?? ""}`;
}

function indent(text: string, spaces: number): string {
  return text
    .split("\n")
    .map((line) => (line ? " ".repeat(spaces) + line : line))
    .join("\n");
}

/** A fleet of two web nodes and one db node, with `web` (by label) and `db` (by name). */
export function smallFleet(): Record<string, string> {
  return {
    "steward.yaml": fleetYaml(),
    "nodes/web-1.yaml": nodeYaml("web-1", { role: "web" }),
    "nodes/web-2.yaml": nodeYaml("web-2", { role: "web" }),
    "nodes/db-1.yaml": nodeYaml("db-1", { role: "db" }),
    "assignments/web.yaml": assignmentYaml("web", { selector: { role: "web" } }),
    "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"] }),
  };
}
