/**
 * Per-node values in assignments: `${node.name}`, `${node.vars.KEY}`, `${node.labels.KEY}`,
 * `${assignment.name}` and `${assignment.version}` in any string of a resource or probe are replaced
 * when the assignment is rendered for a node. `$${` writes a literal `${`. Any other `${...}` (a
 * shell variable in a command, say) is left alone.
 */
import type { Assignment, Node } from "./generated.js";

const reference = /\$(\$?)\{((?:node|assignment)\.[A-Za-z0-9_./-]+)\}/g;

export interface TemplateContext {
  node: Node;
  assignment: Assignment;
}

function lookup(variable: string, context: TemplateContext): string | undefined {
  const [scope, field, ...rest] = variable.split(".");
  const key = rest.join(".");
  if (scope === "assignment") {
    if (rest.length > 0) return undefined;
    if (field === "name") return context.assignment.metadata.name;
    if (field === "version") return context.assignment.spec.version;
    return undefined;
  }
  if (field === "name" && rest.length === 0) return context.node.metadata.name;
  if (field === "vars" && key) return context.node.spec.vars?.[key];
  if (field === "labels" && key) return context.node.metadata.labels?.[key];
  return undefined;
}

/** Replaces references in one string; `missing` receives each variable that has no value. */
export function substituteString(
  text: string,
  context: TemplateContext,
  missing: (variable: string) => void,
): string {
  if (!text.includes("${")) return text;
  return text.replace(reference, (whole, escaped: string, variable: string) => {
    if (escaped) return whole.slice(1);
    const value = lookup(variable, context);
    if (value === undefined) {
      missing(variable);
      return whole;
    }
    return value;
  });
}

/**
 * A deep copy of `value` with every string substituted; `missing` receives the path and variable of
 * each reference that has no value on this node. Values without references are returned as they are.
 */
export function substitute<T>(
  value: T,
  context: TemplateContext,
  missing: (path: (string | number)[], variable: string) => void,
  path: (string | number)[] = [],
): T {
  if (typeof value === "string") return substituteString(value, context, (v) => missing(path, v)) as T;
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((item, i) => {
      const next = substitute(item, context, missing, [...path, i]);
      if (next !== item) changed = true;
      return next;
    });
    return (changed ? out : value) as T;
  }
  if (value !== null && typeof value === "object") {
    let changed = false;
    const out: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) {
      const next = substitute(member, context, missing, [...path, key]);
      if (next !== member) changed = true;
      out[key] = next;
    }
    return (changed ? out : value) as T;
  }
  return value;
}
