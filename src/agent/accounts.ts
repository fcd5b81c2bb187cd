/**
 * Owner and group names of the host (not of `--root`: accounts are the host's), read from
 * /etc/passwd and /etc/group without native code so the agent bundles into one plain JS file.
 */
import { readFileSync } from "node:fs";
import { permanent } from "./failure.js";

interface AccountTable {
  byName: Map<string, number>;
  byId: Map<number, string>;
}

const tables = new Map<string, AccountTable>();

function table(file: string): AccountTable {
  let cached = tables.get(file);
  if (cached) return cached;
  cached = { byName: new Map(), byId: new Map() };
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    // No account database (a minimal container): only numeric ids resolve.
  }
  for (const line of text.split("\n")) {
    const [name, , id] = line.split(":");
    if (!name || id === undefined || !/^[0-9]+$/.test(id)) continue;
    if (!cached.byName.has(name)) cached.byName.set(name, Number(id));
    if (!cached.byId.has(Number(id))) cached.byId.set(Number(id), name);
  }
  tables.set(file, cached);
  return cached;
}

/** The numeric id of a user (`kind` "owner") or group, by name or number; refuses an unknown name. */
export function accountId(kind: "owner" | "group", spec: string): number {
  if (/^[0-9]+$/.test(spec)) return Number(spec);
  const id = table(kind === "owner" ? "/etc/passwd" : "/etc/group").byName.get(spec);
  if (id === undefined)
    throw permanent(
      kind === "owner" ? "UnknownUser" : "UnknownGroup",
      `${kind === "owner" ? "user" : "group"} ${JSON.stringify(spec)} does not exist on this host: create it first (a command resource) or use a numeric id`,
    );
  return id;
}

/** A readable name for an id (the name when known, else the number). */
export function accountName(kind: "owner" | "group", id: number): string {
  return table(kind === "owner" ? "/etc/passwd" : "/etc/group").byId.get(id) ?? String(id);
}
