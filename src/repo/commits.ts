/**
 * Commit objects, parsed from their raw bytes: the tree, parents, author, message and — for signed
 * commits — the signature and the exact bytes it covers (the commit without its `gpgsig` header).
 */
import type { RevisionInfo } from "./store.js";

/** A commit's author or committer. */
export interface Person {
  name: string;
  email: string;
  /** Seconds since the epoch. */
  timestamp: number;
  /** Offset as written, e.g. `+0200`. */
  timezone: string;
}

/** A commit object, parsed. */
export interface ParsedCommit {
  oid: string;
  tree: string;
  parents: string[];
  author: Person;
  committer: Person;
  message: string;
  /** The armored signature from the `gpgsig` header, if the commit is signed. */
  signature?: string;
  /** The bytes the signature covers: the commit object without the `gpgsig` header. */
  payload: Buffer;
}

function parsePerson(value: string): Person {
  const match = /^(.*?) <([^>]*)> (-?\d+) ([+-]\d{4})$/.exec(value);
  if (!match) return { name: value, email: "", timestamp: 0, timezone: "+0000" };
  return { name: match[1]!, email: match[2]!, timestamp: Number(match[3]), timezone: match[4]! };
}

/** Parses a commit object's content (without the `commit <size>\0` header). */
export function parseCommit(oid: string, data: Buffer): ParsedCommit {
  const end = data.indexOf("\n\n");
  const headerEnd = end < 0 ? data.length : end;
  const lines = data.toString("utf8", 0, headerEnd).split("\n");
  const headers: [string, string][] = [];
  for (const line of lines) {
    // A line starting with a space continues the previous header (multi-line signatures, mergetags).
    if (line.startsWith(" ") && headers.length > 0) headers[headers.length - 1]![1] += `\n${line.slice(1)}`;
    else {
      const space = line.indexOf(" ");
      headers.push([line.slice(0, space), line.slice(space + 1)]);
    }
  }
  const commit: ParsedCommit = {
    oid,
    tree: "",
    parents: [],
    author: parsePerson(""),
    committer: parsePerson(""),
    message: end < 0 ? "" : data.toString("utf8", end + 2),
    payload: data,
  };
  for (const [name, value] of headers) {
    if (name === "tree") commit.tree = value;
    else if (name === "parent") commit.parents.push(value);
    else if (name === "author") commit.author = parsePerson(value);
    else if (name === "committer") commit.committer = parsePerson(value);
    else if (name === "gpgsig") commit.signature = value;
  }
  if (commit.signature !== undefined) commit.payload = withoutSignature(data, headerEnd);
  return commit;
}

/** The commit bytes with the `gpgsig` header and its continuation lines removed, as git verifies them. */
function withoutSignature(data: Buffer, headerEnd: number): Buffer {
  const kept: Buffer[] = [];
  let pos = 0;
  let skipping = false;
  while (pos < headerEnd) {
    const newline = data.indexOf(0x0a, pos);
    const lineEnd = newline < 0 || newline > headerEnd ? headerEnd : newline;
    const line = data.subarray(pos, lineEnd);
    if (line.subarray(0, 7).toString("latin1") === "gpgsig ") skipping = true;
    else if (line[0] !== 0x20) skipping = false;
    if (!skipping) kept.push(data.subarray(pos, Math.min(lineEnd + 1, data.length)));
    pos = lineEnd + 1;
  }
  // What is left is the blank line and the message.
  kept.push(data.subarray(pos));
  return Buffer.concat(kept);
}

/** The commit as the store records a revision. */
export function revisionInfo(commit: ParsedCommit): RevisionInfo {
  return {
    sha: commit.oid,
    authorName: commit.author.name,
    authorEmail: commit.author.email,
    message: commit.message,
    committedAt: new Date(commit.committer.timestamp * 1000).toISOString(),
  };
}

/** The first line of a commit message. */
export function subject(message: string): string {
  return message.split("\n", 1)[0] ?? "";
}
