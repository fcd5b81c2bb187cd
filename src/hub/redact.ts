/**
 * Keeps secrets out of what the hub writes for people to read: conditions, tasks, logs and statuses.
 * Messages and evidence come from agents (command output, probe bodies) and may quote a file that
 * holds a key; what looks like a secret is replaced before it is stored or logged.
 */
const PEM = /-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)/g;
const ASSIGNMENT =
  /\b([A-Za-z0-9_.-]*(?:password|passwd|secret|token|api[_-]?key|private[_-]?key)[A-Za-z0-9_.-]*)\s*([=:])\s*("[^"]*"|'[^']*'|\S+)/gi;
const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/g;
const URL_CREDENTIALS = /(\b[a-z][a-z0-9+.-]*:\/\/)[^/\s:@]+:[^/\s@]+@/gi;

/** `text` with PEM blocks, `password=...`-style values, bearer tokens and URL credentials masked. */
export function redact(text: string): string {
  return text
    .replace(PEM, "[redacted PEM block]")
    .replace(ASSIGNMENT, (_match, name: string, sep: string) => `${name}${sep}[redacted]`)
    .replace(BEARER, (_match, scheme: string) => `${scheme} [redacted]`)
    .replace(URL_CREDENTIALS, "$1[redacted]@");
}

/** A deep copy of `value` with every string redacted (for evidence objects). */
export function redactDeep<T>(value: T): T {
  if (typeof value === "string") return redact(value) as T;
  if (Array.isArray(value)) return value.map((item) => redactDeep(item)) as T;
  if (value && typeof value === "object") {
    const copy: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) copy[key] = redactDeep(member);
    return copy as T;
  }
  return value;
}
