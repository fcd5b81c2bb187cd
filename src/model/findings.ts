/** A problem found in one document, located by its path inside the document rather than by line. */
export interface Finding {
  severity: "error" | "warning";
  code: string;
  /** Path inside the document, e.g. `["spec", "resources", 2, "mode"]`. */
  path: (string | number)[];
  /** Point at the key of the last path segment rather than at its value. */
  key?: boolean;
  message: string;
  fix?: string;
  /** The value YAML read as a number or boolean where a string is wanted; its fix quotes the raw text. */
  unquoted?: unknown;
}

/** `spec.resources[2].mode` for `["spec", "resources", 2, "mode"]`. */
export function formatPath(path: readonly (string | number)[]): string {
  let out = "";
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(segment)) out += out === "" ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out === "" ? "document" : out;
}
