import { createHash } from "node:crypto";

/**
 * JSON with object keys sorted and `undefined` members left out, so equal values always give equal
 * text (and equal hashes) whatever order their keys were written in.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  let text: string;
  if (Array.isArray(value)) {
    text = "[";
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (i > 0) text += ",";
      text += item === undefined ? "null" : canonicalJson(item);
    }
    text += "]";
  } else {
    const record = value as Record<string, unknown>;
    text = "{";
    let first = true;
    for (const key of Object.keys(record).sort()) {
      const member = record[key];
      if (member === undefined) continue;
      text += `${first ? "" : ","}${JSON.stringify(key)}:${canonicalJson(member)}`;
      first = false;
    }
    text += "}";
  }
  return text;
}

/** `sha256:` and the hex digest of the canonical JSON of `value`. */
export function contentHash(value: unknown): string {
  return `sha256:${createHash("sha256").update(canonicalJson(value)).digest("hex")}`;
}

/** `sha256:` and the hex digest of raw bytes or text. */
export function bytesHash(data: Uint8Array | string): string {
  return `sha256:${createHash("sha256").update(data).digest("hex")}`;
}
