/**
 * Admitting a host is a commit: `steward enrolments approve` writes the host's Node document into
 * the fleet repository — a new `nodes/NAME.yaml`, or, for a node already declared (a re-installed
 * host), its `spec.identity` edited in place, comments and all — as a commit on the branch
 * `steward/enrol-NAME` made from the tracked branch (to open a pull request), or with `commit` on
 * the tracked branch itself (compare-and-swap, the working tree updated), or only printed. The
 * fleet with the document must load without error, as the syncer will load it; otherwise nothing
 * is written.
 */
import fs, { readFileSync } from "node:fs";
import { join } from "node:path";
import git, { type HttpClient } from "isomorphic-git";
import { parseAllDocuments, stringify } from "yaml";
import type { Node, NodeIdentity } from "../model/generated.js";
import { loadRepo } from "../model/load.js";
import { EnrolmentProposalError, type RepoError } from "./errors.js";
import { credentialsFromEnv, FleetRepository, type SourceLocation, workingTreeChanges } from "./git.js";
import { authorOf, editTree } from "./rollback.js";
import { treeSource } from "./tree.js";

/** What to write, where, and how. */
export interface EnrolmentProposalRequest {
  location: SourceLocation;
  /** The tracked branch: the proposal starts from its head (and `commit` writes onto it). */
  branch: string;
  /** The Node document of a host not declared yet. */
  node: Node;
  /** `branch`: on `steward/enrol-NAME`; `commit`: on the tracked branch; `print`: nothing written. */
  mode: "branch" | "commit" | "print";
  push: boolean;
  /** Roots for a new node when `node.spec.roots` is empty: the fleet's `spec.enrolment.roots`, else an error. */
  env: NodeJS.ProcessEnv;
  cacheDir: string;
  now?: Date;
  http?: HttpClient;
}

/** What was (or, printed, would be) written. */
export interface EnrolmentProposal {
  /** The file, relative to the repository. */
  path: string;
  content: string;
  /** Whether the file declared the node already (its identity edited) or is new. */
  edited: boolean;
  /** The branch committed on; absent when printed. */
  branch?: string;
  commit?: string;
  /** The tracked branch's head the commit was made on. */
  parent: string;
  roots: string[];
  pushed: boolean;
}

/** The branch a proposal for `node` goes on. */
export function proposalBranch(node: string): string {
  return `steward/enrol-${node}`;
}

const HEADER = (node: Node) =>
  `# Node ${node.metadata.name}, admitted with \`steward enrolments approve\`: its identity was made on the host.\n`;

/** Writes (or prints) the Node document; throws EnrolmentProposalError when it must not. */
export async function proposeEnrolment(request: EnrolmentProposalRequest): Promise<EnrolmentProposal> {
  const { location } = request;
  if (location.kind === "url" && request.mode !== "print" && !request.push)
    throw new EnrolmentProposalError(
      "unpushed",
      `a commit to ${location.url} exists only once pushed: add --push (or --print the document)`,
    );
  const credentials = credentialsFromEnv(request.env);
  const repo = FleetRepository.open(location, {
    cacheDir: request.cacheDir,
    ...(credentials ? { credentials } : {}),
    ...(request.http ? { http: request.http } : {}),
  });
  try {
    const base =
      location.kind === "url"
        ? await repo.fetch(request.branch)
        : await repo.resolve(`refs/heads/${request.branch}`);
    const head = repo.commit(base);
    const loaded = await loadRepo(treeSource(repo.reader, repo.trees, head.tree));
    const name = request.node.metadata.name;
    const declared = loaded.desired?.nodes.get(name);
    const roots =
      request.node.spec.roots.length > 0
        ? request.node.spec.roots
        : (loaded.desired?.fleet.enrolment?.roots ?? []);
    if (!declared && roots.length === 0)
      throw new EnrolmentProposalError(
        "invalid",
        `node "${name}" needs roots (the directories its resources may touch): pass --roots DIR[,DIR...], or declare spec.enrolment.roots in steward.yaml`,
      );
    let path: string;
    let content: string;
    if (declared) {
      path = declared.file;
      content = withIdentity(
        readBlob(repo, head.tree, path),
        declared.index,
        name,
        request.node.spec.identity!,
      );
    } else {
      path = `nodes/${name}.yaml`;
      if (readBlobIfAny(repo, head.tree, path) !== undefined)
        throw new EnrolmentProposalError(
          "declared",
          `${path} exists in ${request.branch} but does not declare node "${name}": move it, or write the Node document by hand`,
        );
      const node: Node = { ...request.node, spec: { ...request.node.spec, roots } };
      content = `${HEADER(node)}${stringify(node, { lineWidth: 0 })}`;
    }
    const blob = await git.writeBlob({ fs, gitdir: repo.gitdir, blob: new TextEncoder().encode(content) });
    const tree = (await editTree(repo, head.tree, [[path, { oid: blob, mode: "100644" }]]))!;
    const check = await loadRepo(treeSource(repo.reader, repo.trees, tree));
    const errors = check.diagnostics.filter((d) => d.severity === "error");
    if (errors.length > 0)
      throw new EnrolmentProposalError(
        "invalid",
        `with ${path} the fleet would be invalid: ${errors
          .slice(0, 3)
          .map((d) => `${d.file}:${d.line}:${d.column}: ${d.message}`)
          .join("; ")} — nothing was written`,
        { diagnostics: errors.slice(0, 10) },
      );
    const proposal: EnrolmentProposal = {
      path,
      content,
      edited: declared !== undefined,
      parent: base,
      roots: declared ? declared.value.spec.roots : [...roots],
      pushed: false,
    };
    if (request.mode === "print") return proposal;

    const author = await authorOf(
      repo,
      request.env,
      (request.now ?? new Date()).getTime(),
      () =>
        new EnrolmentProposalError(
          "author",
          "no author for the enrolment commit: set STEWARD_GIT_AUTHOR_NAME and STEWARD_GIT_AUTHOR_EMAIL, or git config user.name and user.email",
        ),
    );
    const identity = request.node.spec.identity!;
    const message = `${declared ? "Give" : "Admit"} node ${name}${declared ? " its new identity" : ""} (steward enrolments approve)\n\nThe host asked to join as ${name}; its identity was made on the host:\nnkey ${identity.nkey}\nage ${identity.age}\n`;
    const target = request.mode === "commit" ? request.branch : proposalBranch(name);
    const ref = `refs/heads/${target}`;
    if (request.mode === "branch" && (await refExists(repo, ref)))
      throw new EnrolmentProposalError(
        "exists",
        `the branch ${target} exists already: merge or delete it (git branch -D ${target}), then approve again`,
        { branch: target },
      );
    let workdir: string | undefined;
    if (request.mode === "commit" && location.kind === "path") {
      workdir = checkedOutWorkdir(repo, location.path, request.branch);
      if (workdir) await refuseDirty(workdir, repo.gitdir);
    }
    const commit = await git.writeCommit({
      fs,
      gitdir: repo.gitdir,
      commit: { tree, parent: [base], author, committer: author, message },
    });
    if (request.mode === "commit") {
      const now = await repo.resolve(ref);
      if (now !== base)
        throw new EnrolmentProposalError(
          "moved",
          `branch ${target} moved while the Node document was written (${base.slice(0, 12)} → ${now.slice(0, 12)}): nothing was changed; approve again`,
        );
    }
    await git.writeRef({ fs, gitdir: repo.gitdir, ref, value: commit, force: request.mode === "commit" });
    if (workdir)
      await git.checkout({
        fs,
        dir: workdir,
        gitdir: repo.gitdir,
        ref: target,
        filepaths: [path],
        force: true,
      });
    let pushed = false;
    if (request.push) {
      const url = location.kind === "url" ? location.url : await originUrl(repo);
      try {
        await repo.pushTo(url, target);
      } catch (error) {
        if ((error as RepoError).code === "E_PUSH_REJECTED")
          throw new EnrolmentProposalError(
            "moved",
            `${url} refused ${target}: the remote branch moved; the commit is in the local repository, not pushed — pull, then push`,
          );
        throw error;
      }
      pushed = true;
    }
    return { ...proposal, branch: target, commit, pushed };
  } finally {
    repo.close();
  }
}

/** `text` (a file of YAML documents) with the `index`th document's spec.identity set, the rest as it was. */
function withIdentity(text: string, index: number, name: string, identity: NodeIdentity): string {
  const documents = parseAllDocuments(text);
  const document = Array.isArray(documents) ? documents[index] : undefined;
  if (document?.get("kind") !== "Node" || document.getIn(["metadata", "name"]) !== name)
    throw new EnrolmentProposalError(
      "declared",
      `node "${name}" is not where the fleet says it is declared (document ${index + 1}): edit its spec.identity by hand`,
    );
  document.setIn(["spec", "identity"], document.createNode({ nkey: identity.nkey, age: identity.age }));
  return documents.map((d) => d.toString({ lineWidth: 0 })).join("");
}

function blobAt(repo: FleetRepository, tree: string, path: string): string | undefined {
  let current = tree;
  const parts = path.split("/");
  for (const [i, part] of parts.entries()) {
    const entry = repo.reader.readTree(current).find((e) => e.name === part);
    if (!entry) return undefined;
    if (i === parts.length - 1) return entry.type === "blob" ? entry.oid : undefined;
    if (entry.type !== "tree") return undefined;
    current = entry.oid;
  }
  return undefined;
}

function readBlobIfAny(repo: FleetRepository, tree: string, path: string): string | undefined {
  const oid = blobAt(repo, tree, path);
  return oid ? new TextDecoder().decode(repo.reader.readBlob(oid)) : undefined;
}

function readBlob(repo: FleetRepository, tree: string, path: string): string {
  const text = readBlobIfAny(repo, tree, path);
  if (text === undefined)
    throw new EnrolmentProposalError(
      "declared",
      `${path} is not a file of the tracked branch: edit it by hand`,
    );
  return text;
}

async function refExists(repo: FleetRepository, ref: string): Promise<boolean> {
  try {
    await git.resolveRef({ fs, gitdir: repo.gitdir, ref });
    return true;
  } catch {
    return false;
  }
}

/** The working tree to update when `branch` is the one checked out there; undefined otherwise (or bare). */
function checkedOutWorkdir(repo: FleetRepository, path: string, branch: string): string | undefined {
  if (repo.gitdir === path || repo.gitdir !== join(path, ".git")) return undefined;
  const head = readFileSync(join(repo.gitdir, "HEAD"), "utf8").trim();
  return head === `ref: refs/heads/${branch}` ? path : undefined;
}

async function refuseDirty(dir: string, gitdir: string): Promise<void> {
  const dirty = (await workingTreeChanges(dir, gitdir)).changed;
  if (dirty.length > 0)
    throw new EnrolmentProposalError(
      "dirty",
      `the working tree of ${dir} has uncommitted changes (${dirty.slice(0, 5).join(", ")}${dirty.length > 5 ? ", ..." : ""}): commit or stash them first, or approve without --commit`,
      { paths: dirty },
    );
}

async function originUrl(repo: FleetRepository): Promise<string> {
  const url = (await git.getConfig({ fs, gitdir: repo.gitdir, path: "remote.origin.url" })) as
    | string
    | undefined;
  if (!url || !/^https?:\/\//.test(url))
    throw new EnrolmentProposalError(
      "unpushed",
      `${repo.describe()} has no HTTP(S) remote "origin" to push to (${url ?? "none"}): approve without --push, then git push`,
    );
  return url;
}
