/** Builders for fleet repo documents in tests (YAML text from plain objects). */
import { stringify } from "yaml";
import type { AssignmentSpec, FleetSpec, NodeSpec, Resource } from "../../../src/model/generated.js";

export function nodeYaml(
  name: string,
  spec: Partial<NodeSpec> = {},
  labels: Record<string, string> = {},
): string {
  return stringify({
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: { name, labels: { env: "test", ...labels } },
    spec: { transport: "local", roots: ["/srv"], ...spec },
  });
}

export function assignmentYaml(
  name: string,
  spec: Partial<AssignmentSpec> & { resources: Resource[] },
): string {
  return stringify({ apiVersion: "steward.dev/v1", kind: "Assignment", metadata: { name }, spec });
}

export function fleetYaml(spec: FleetSpec): string {
  return stringify({ apiVersion: "steward.dev/v1", kind: "Fleet", metadata: { name: "test" }, spec });
}

/** A file resource under /srv. */
export function file(name: string, content: string, path = `/srv/${name}`): Resource {
  return { kind: "file", name, path, content };
}

/** A command resource run with sh -c; `$STEWARD_ROOT` is the node's root. */
export function shell(
  name: string,
  script: string,
  extra: Partial<Extract<Resource, { kind: "command" }>> = {},
): Resource {
  return { kind: "command", name, run: ["sh", "-c", script], ...extra };
}

/** Node files for `names`, keyed by repo path. */
export function nodes(...names: string[]): Record<string, string> {
  return Object.fromEntries(names.map((n) => [`nodes/${n}.yaml`, nodeYaml(n)]));
}
