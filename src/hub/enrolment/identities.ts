/**
 * A host's identity as a transport observed it (SSH collects it on first contact with `steward
 * agent identity`), compared with what its Node document declares. None declared: an
 * `IdentityUndeclared` task with the identity to add. Another declared: an `IdentityConflict`
 * (reason `HostIdentityDiffers`) for a person. Both resolve by observation — the declaration
 * arrives, or the host presents the declared identity — and what was observed is kept in the
 * condition's evidence, so a changed declaration is compared without asking the host again.
 */
import { markOpen, markResolved } from "../conditions.js";
import type { Store } from "../store/store.js";
import { shortKey } from "./enrolments.js";
import type { PublicIdentity } from "./records.js";

/** One observation of a host's public identity. */
export interface ObservedIdentity {
  node: string;
  identity: PublicIdentity;
  /** The transport that asked (`ssh`). */
  transport: string;
}

function same(a: PublicIdentity | undefined, b: PublicIdentity | undefined): boolean {
  return a !== undefined && b !== undefined && a.nkey === b.nkey && a.age === b.age;
}

function declaredIdentity(store: Store, node: string): PublicIdentity | undefined {
  const record = store.node(node);
  const identity = record && !record.removedAt ? record.spec.spec.identity : undefined;
  return identity?.nkey && identity.age ? { nkey: identity.nkey, age: identity.age } : undefined;
}

/** The YAML to add to a Node document for `identity`. */
export function identitySnippet(identity: PublicIdentity): string {
  return `spec:\n  identity:\n    nkey: ${identity.nkey}\n    age: ${identity.age}`;
}

/** Compares an observed identity with the declared one and raises or resolves the conditions. */
export function observeHostIdentity(
  store: Store,
  observed: ObservedIdentity,
  now: string,
  newId: () => string,
): void {
  store.transaction(() => {
    const node = store.node(observed.node);
    if (!node || node.removedAt) return;
    compare(store, observed, declaredIdentity(store, observed.node), now, newId);
  });
}

function compare(
  store: Store,
  observed: ObservedIdentity,
  declared: PublicIdentity | undefined,
  now: string,
  newId: () => string,
): void {
  const name = observed.node;
  const evidence = { observed: observed.identity, transport: observed.transport };
  if (same(declared, observed.identity)) {
    markResolved(
      store,
      "IdentityUndeclared",
      "node",
      name,
      now,
      `node "${name}" declares the identity its host has`,
    );
    markResolved(
      store,
      "IdentityConflict",
      "node",
      name,
      now,
      `the host of node "${name}" presents the identity its Node document declares`,
      "HostIdentityDiffers",
    );
    return;
  }
  if (!declared) {
    markOpen(
      store,
      {
        type: "IdentityUndeclared",
        subjectKind: "node",
        subject: name,
        node: name,
        reason: "IdentityCollected",
        message: `the host of node "${name}" (reached over ${observed.transport}) has the identity nkey ${observed.identity.nkey}, age ${observed.identity.age}, which its Node document does not declare: add it as spec.identity`,
        evidence,
        procedure: `Add to the Node document of "${name}" (e.g. nodes/${name}.yaml), then commit:\n${identitySnippet(observed.identity)}`,
        resolver: "operator",
      },
      now,
      newId,
    );
    return;
  }
  markResolved(store, "IdentityUndeclared", "node", name, now, `node "${name}" declares an identity now`);
  markOpen(
    store,
    {
      type: "IdentityConflict",
      subjectKind: "node",
      subject: name,
      node: name,
      reason: "HostIdentityDiffers",
      message: `the host reached as node "${name}" over ${observed.transport} presents the identity ${shortKey(observed.identity.nkey)} (age ${shortKey(observed.identity.age)}), but its Node document declares ${shortKey(declared.nkey)} (age ${shortKey(declared.age)}): its state directory was made anew (a re-installed host), or the address leads to another host — a person decides`,
      evidence: { ...evidence, declared },
      procedure: `If the host was re-installed, put its new identity in the Node document of "${name}":\n${identitySnippet(observed.identity)}\nIf not, check spec.ssh.host and the host's pinned key: the address may lead to another host.`,
      resolver: "operator",
    },
    now,
    newId,
  );
}

/**
 * Compares again, for `nodes` whose declarations changed, the identity an open condition says their
 * host presented with what they declare now; a removed node's conditions resolve.
 */
export function reviewHostIdentities(
  store: Store,
  nodes: readonly string[],
  now: string,
  newId: () => string,
): void {
  store.transaction(() => {
    for (const name of nodes) {
      const open = [
        store.openCondition("IdentityUndeclared", "node", name),
        store.openCondition("IdentityConflict", "node", name, "HostIdentityDiffers"),
      ].filter((c) => c !== undefined);
      if (open.length === 0) continue;
      const record = store.node(name);
      if (!record || record.removedAt) {
        for (const condition of open)
          markResolved(
            store,
            condition.type,
            "node",
            name,
            now,
            `node "${name}" is no longer declared`,
            condition.reason,
          );
        continue;
      }
      const evidence = open[0]!.evidence as { observed?: PublicIdentity; transport?: string };
      if (!evidence.observed) continue;
      compare(
        store,
        { node: name, identity: evidence.observed, transport: evidence.transport ?? "ssh" },
        declaredIdentity(store, name),
        now,
        newId,
      );
    }
  });
}
