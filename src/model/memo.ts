import type { Node } from "./generated.js";

/**
 * Values memoised per (parsed value, node), for the work a sync repeats per instance. Entries live
 * on the parsed value (dropped with it) in a plain map by node name, so a node whose file changed
 * replaces its entry instead of piling up, and thousands of assignments cost thousands of small
 * maps rather than thousands of WeakMaps (which make every garbage collection slower).
 */
export class PerNodeMemo<K extends object, V> {
  private readonly byKey = new WeakMap<K, Map<string, { node: Node; value: V }>>();

  /** The value stored for `key` on this very node value, if any. */
  get(key: K, node: Node): V | undefined {
    const entry = this.byKey.get(key)?.get(node.metadata.name);
    return entry?.node === node ? entry.value : undefined;
  }

  set(key: K, node: Node, value: V): void {
    let perNode = this.byKey.get(key);
    if (!perNode) {
      perNode = new Map();
      this.byKey.set(key, perNode);
    }
    perNode.set(node.metadata.name, { node, value });
  }
}
