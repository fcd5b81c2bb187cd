/**
 * A host's identity as a transport observed it (SSH collects it on first contact with `steward
 * agent identity`), compared with what its Node document declares. None declared: an
 * `IdentityUndeclared` task with the identity to add. Another declared: an `IdentityConflict`
 * (reason `HostIdentityDiffers`) for a person. Both resolve by observation — the declaration
 * arrives, or the host presents the declared identity — and what was observed is kept in the
 * condition's evidence, so a changed declaration is compared without asking the host again.
 */
import { markOpen, markResolved } from "../conditions.js";
import type { StoreReads, Transactional, UnitOfWork } from "../store/store.js";
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

async function declaredIdentity(store: StoreReads, node: string): Promise<PublicIdentity | undefined> {
  const record = await store.nodes.get(node);
  const identity = record && !record.removedAt ? record.spec.spec.identity : undefined;
  return identity?.nkey && identity.age ? { nkey: identity.nkey, age: identity.age } : undefined;
}

/** The YAML to add to a Node document for `identity`. */
export function identitySnippet(identity: PublicIdentity): string {
  return `spec:\n  identity:\n    nkey: ${identity.nkey}\n    age: ${identity.age}`;
}

/** Compares an observed identity with the declared one and raises or resolves the conditions. */
export async function observeHostIdentity(
  store: UnitOfWork,
  observed: ObservedIdentity,
  now: string,
  newId: () => string,
): Promise<void> {
  const node = await store.nodes.get(observed.node);
  if (!node || node.removedAt) return;
  await compare(store, observed, await declaredIdentity(store, observed.node), now, newId);
}

async function compare(
  store: UnitOfWork,
  observed: ObservedIdentity,
  declared: PublicIdentity | undefined,
  now: string,
  newId: () => string,
): Promise<void> {
  const name = observed.node;
  const evidence = { observed: observed.identity, transport: observed.transport };
  if (same(declared, observed.identity)) {
    await markResolved(
      store,
      "IdentityUndeclared",
      "node",
      name,
      now,
      `node "${name}" declares the identity its host has`,
    );
    await markResolved(
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
    await markOpen(
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
  await markResolved(
    store,
    "IdentityUndeclared",
    "node",
    name,
    now,
    `node "${name}" declares an identity now`,
  );
  await markOpen(
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
  store: Transactional,
  nodes: readonly string[],
  now: string,
  newId: () => string,
): Promise<void> {
  if (nodes.length === 0) return Promise.resolve();
  return store.transaction(async (tx) => {
    // A fleet's nodes at once (a first sync declares them all): only those with an open identity
    // condition have anything to review, and which they are is one query per type.
    const withOpen = new Set<string>();
    for (const type of ["IdentityUndeclared", "IdentityConflict"] as const)
      for (const condition of await tx.conditions.list({ status: "open", type, subjectKind: "node" }))
        withOpen.add(condition.subject);
    for (const name of nodes) {
      if (!withOpen.has(name)) continue;
      const open = [
        await tx.conditions.findOpen("IdentityUndeclared", "node", name),
        await tx.conditions.findOpen("IdentityConflict", "node", name, "HostIdentityDiffers"),
      ].filter((c) => c !== undefined);
      if (open.length === 0) continue;
      const record = await tx.nodes.get(name);
      if (!record || record.removedAt) {
        for (const condition of open)
          await markResolved(
            tx,
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
      await compare(
        tx,
        { node: name, identity: evidence.observed, transport: evidence.transport ?? "ssh" },
        await declaredIdentity(tx, name),
        now,
        newId,
      );
    }
  });
}
