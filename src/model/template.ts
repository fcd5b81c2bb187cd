/**
 * Per-node values in assignments: `${node.name}`, `${node.vars.KEY}`, `${node.labels.KEY}`,
 * `${assignment.name}` and `${assignment.version}` in any string of a resource or probe are replaced
 * when the assignment is rendered for a node. `$${` writes a literal `${`. Any other `${...}` (a
 * shell variable in a command, say) is left alone.
 */
import type { Assignment, Node } from "./generated.js";

// `$${` is the escape for a literal `${`; of the rest, only node and assignment references are replaced.
const reference = /\$\$\{|\$\{((?:node|assignment)\.[A-Za-z0-9_./-]+)\}/g;

export interface TemplateContext {
  node: Node;
  assignment: Assignment;
}

/** The value of a variable (`node.vars.KEY`...) in a context; undefined when it has none. */
export function lookup(variable: string, context: TemplateContext): string | undefined {
  switch (variable) {
    case "node.name":
      return context.node.metadata.name;
    case "assignment.name":
      return context.assignment.metadata.name;
    case "assignment.version":
      return context.assignment.spec.version;
  }
  if (variable.startsWith("node.vars.")) return own(context.node.spec.vars, variable.slice(10));
  if (variable.startsWith("node.labels.")) return own(context.node.metadata.labels, variable.slice(12));
  return undefined;
}

/** `map[key]` when it is the map's own entry (`${node.vars.constructor}` is not a value). */
function own(map: Readonly<Record<string, string>> | undefined, key: string): string | undefined {
  return map && Object.hasOwn(map, key) ? map[key] : undefined;
}

/** Replaces references in one string; `missing` receives each variable that has no value. */
export function substituteString(
  text: string,
  context: TemplateContext,
  missing: (variable: string) => void,
): string {
  if (!text.includes("${")) return text;
  return text.replace(reference, (whole, variable: string | undefined) => {
    if (variable === undefined) return "${";
    const value = lookup(variable, context);
    if (value === undefined) {
      missing(variable);
      return whole;
    }
    return value;
  });
}

/** Whether `value` has a `${` in any of its strings. */
export function hasReferences(value: unknown): boolean {
  if (typeof value === "string") return value.includes("${");
  if (value === null || typeof value !== "object") return false;
  if (Array.isArray(value)) return value.some(hasReferences);
  const record = value as Record<string, unknown>;
  for (const key in record) if (hasReferences(record[key])) return true;
  return false;
}

/**
 * A copy of `value` with every string substituted; `missing` receives the path and variable of each
 * reference that has no value on this node. Parts without `${` are returned as they are (the same
 * objects), so instances of one assignment share what does not depend on the node.
 */
export function substitute<T>(
  value: T,
  context: TemplateContext,
  missing: (path: (string | number)[], variable: string) => void,
  path: readonly (string | number)[] = [],
): T {
  const stack = [...path];
  const report = (variable: string) => missing([...stack], variable);
  const walk = (member: unknown): unknown => {
    if (typeof member === "string") return substituteString(member, context, report);
    if (member === null || typeof member !== "object") return member;
    let changed = false;
    if (Array.isArray(member)) {
      const out: unknown[] = [];
      for (let i = 0; i < member.length; i++) {
        stack.push(i);
        const next = walk(member[i]);
        stack.pop();
        if (next !== member[i]) changed = true;
        out.push(next);
      }
      return changed ? out : member;
    }
    const record = member as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    // Parsed documents are plain objects: for-in sees exactly their own keys.
    for (const key in record) {
      stack.push(key);
      const next = walk(record[key]);
      stack.pop();
      if (next !== record[key]) changed = true;
      out[key] = next;
    }
    return changed ? out : member;
  };
  return walk(value) as T;
}

/** A `${...}` reference in a value: where (the path below the value) and to which variable. */
export interface Reference {
  path: (string | number)[];
  variable: string;
}

/**
 * Every node or assignment reference in `value`, in the order `substitute` meets them (so a check
 * of which ones have no value reports what substituting would, without building any copy).
 */
export function references(value: unknown, path: readonly (string | number)[] = []): Reference[] {
  const out: Reference[] = [];
  const stack = [...path];
  const visit = (member: unknown) => {
    if (typeof member === "string") {
      if (!member.includes("${")) return;
      for (const match of member.matchAll(reference))
        if (match[1] !== undefined) out.push({ path: [...stack], variable: match[1] });
      return;
    }
    if (member === null || typeof member !== "object") return;
    if (Array.isArray(member))
      for (let i = 0; i < member.length; i++) {
        stack.push(i);
        visit(member[i]);
        stack.pop();
      }
    else
      for (const key in member as Record<string, unknown>) {
        stack.push(key);
        visit((member as Record<string, unknown>)[key]);
        stack.pop();
      }
  };
  visit(value);
  return out;
}
