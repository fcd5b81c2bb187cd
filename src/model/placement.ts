/**
 * Placement: which nodes an assignment lands on, by name (`spec.nodes`) and by label
 * (`spec.selector.matchLabels`), as a union. Nodes are indexed by name and by label so placing every
 * assignment of a large fleet costs what each one selects, not assignments × nodes.
 */
import type { NodeDocument } from "./documents.js";
import type { Assignment, Node } from "./generated.js";

function byName(a: Node, b: Node): number {
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}

function isDocumentMap(
  nodes: ReadonlyMap<string, NodeDocument> | Iterable<Node>,
): nodes is ReadonlyMap<string, NodeDocument> {
  return typeof (nodes as ReadonlyMap<string, NodeDocument>).get === "function";
}

/** Nodes by name and by `label=value`, each list sorted by node name. */
export class NodeIndex {
  private readonly all: Node[];
  private readonly named = new Map<string, Node>();
  private readonly labelled = new Map<string, Node[]>();

  constructor(nodes: ReadonlyMap<string, NodeDocument> | Iterable<Node>) {
    // Any ReadonlyMap (a SortedMap of the loader too), or plain nodes.
    const values = isDocumentMap(nodes)
      ? [...nodes.values()].map((doc) => doc.value)
      : [...(nodes as Iterable<Node>)];
    this.all = values.sort(byName);
    for (const node of this.all) {
      if (!this.named.has(node.metadata.name)) this.named.set(node.metadata.name, node);
      for (const [key, value] of Object.entries(node.metadata.labels ?? {})) {
        const id = `${key}\0${value}`;
        const list = this.labelled.get(id);
        if (list) list.push(node);
        else this.labelled.set(id, [node]);
      }
    }
  }

  /** The node named `name`, if declared. */
  node(name: string): Node | undefined {
    return this.named.get(name);
  }

  /** Nodes whose labels include every `key: value` of `match` (all nodes for an empty selector). */
  matching(match: Readonly<Record<string, string>>): readonly Node[] {
    const entries = Object.entries(match);
    if (entries.length === 0) return this.all;
    // Start from the rarest label and check the others on those few nodes only.
    let shortest: Node[] | undefined;
    for (const [key, value] of entries) {
      const list = this.labelled.get(`${key}\0${value}`);
      if (!list) return [];
      if (!shortest || list.length < shortest.length) shortest = list;
    }
    if (entries.length === 1) return shortest!;
    return shortest!.filter((node) => {
      const labels = node.metadata.labels ?? {};
      return entries.every(([key, value]) => labels[key] === value);
    });
  }

  /** The nodes `assignment` is placed on, sorted by name, without duplicates. */
  place(assignment: Assignment): Node[] {
    const match = assignment.spec.selector?.matchLabels;
    const selected = match ? this.matching(match) : [];
    const names = assignment.spec.nodes ?? [];
    if (names.length === 0) return [...selected];
    const placed = new Set(selected);
    for (const name of names) {
      const node = this.named.get(name);
      if (node) placed.add(node);
    }
    return [...placed].sort(byName);
  }
}

/** Placement of every assignment, by assignment name. */
export function placeAll(
  assignments: Iterable<Assignment>,
  nodes: ReadonlyMap<string, NodeDocument> | NodeIndex,
): Map<string, Node[]> {
  const index = nodes instanceof NodeIndex ? nodes : new NodeIndex(nodes);
  const out = new Map<string, Node[]>();
  for (const assignment of assignments) out.set(assignment.metadata.name, index.place(assignment));
  return out;
}
