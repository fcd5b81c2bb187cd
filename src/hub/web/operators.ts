/**
 * Who may act in the web view. `steward hub --operator-tokens FILE` names the operators: one
 * `name token` line each (blank lines and `#` comments allowed), in a file only its owner can read
 * (mode 0600 or stricter; anything else is refused, as ssh refuses a readable key). A person signs
 * in once with their token and gets a session: an HttpOnly cookie and a CSRF token that every form
 * posts back. A program may send `Authorization: Bearer TOKEN` instead. Every action is recorded
 * with the operator's name, never the token; tokens are compared in constant time and never shown.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { EnvironmentError, UsageError } from "../../model/errors.js";

/** An operator, as an action records them. */
export interface Operator {
  name: string;
}

/** A signed-in browser: who, the CSRF token its forms carry, and when it ends. */
export interface Session {
  id: string;
  operator: Operator;
  csrf: string;
  expiresAt: number;
  /** What the last action did, shown once on the next page. */
  flash?: string;
}

/** Shortest token accepted: a guessable token would make the hub's actions anyone's. */
const MIN_TOKEN_LENGTH = 16;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** Whether two secrets are equal, in time that does not depend on where they differ. */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/** The operators of a token file's text; `source` names the file in messages. */
export function parseOperatorTokens(text: string, source: string): Map<string, Operator> {
  const byToken = new Map<string, Operator>();
  const names = new Set<string>();
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const where = `${source}:${index + 1}`;
    const fields = line.split(/\s+/);
    if (fields.length !== 2)
      throw new UsageError(
        `${where}: expected "name token" (two fields), got ${fields.length}: write one operator a line`,
      );
    const [name, token] = fields as [string, string];
    if (!NAME.test(name))
      throw new UsageError(
        `${where}: operator name ${JSON.stringify(name)} must be letters, digits and . _ @ - (at most 64)`,
      );
    if (token.length < MIN_TOKEN_LENGTH)
      throw new UsageError(
        `${where}: the token of ${name} is shorter than ${MIN_TOKEN_LENGTH} characters: make one with \`openssl rand -hex 32\``,
      );
    if (names.has(name)) throw new UsageError(`${where}: operator ${name} is named twice`);
    if (byToken.has(token)) throw new UsageError(`${where}: the token of ${name} is also another's`);
    names.add(name);
    byToken.set(token, { name });
  });
  if (byToken.size === 0)
    throw new UsageError(`${source}: no operator in it: write one "name token" line per operator`);
  return byToken;
}

/** Reads `--operator-tokens FILE`: refused unless only its owner can read it. */
export function readOperatorTokens(file: string): Map<string, Operator> {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (error) {
    throw new EnvironmentError(
      `--operator-tokens ${file}: ${(error as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (error as Error).message}`,
      { cause: error },
    );
  }
  if ((mode & 0o077) !== 0)
    throw new EnvironmentError(
      `--operator-tokens ${file} can be read by others (mode ${(mode & 0o777).toString(8).padStart(4, "0")}): run \`chmod 600 ${file}\``,
      { data: { file, mode: mode & 0o777 } },
    );
  return parseOperatorTokens(readFileSync(file, "utf8"), file);
}

/** The hub's operators and their sessions (in memory: a restarted hub asks them to sign in again). */
export class Operators {
  private readonly sessions = new Map<string, Session>();

  constructor(
    private readonly byToken: ReadonlyMap<string, Operator>,
    private readonly options: { sessionMs?: number; now?: () => number } = {},
  ) {}

  /** Whether anyone may act at all (a hub without `--operator-tokens` is read-only). */
  get enabled(): boolean {
    return this.byToken.size > 0;
  }

  /** The operator whose token this is, or undefined. Every token is compared, in constant time. */
  byTokenOf(token: string): Operator | undefined {
    let found: Operator | undefined;
    for (const [known, operator] of this.byToken) if (sameSecret(known, token)) found = operator;
    return found;
  }

  /** Starts a session for `operator`. */
  signIn(operator: Operator): Session {
    this.sweep();
    const session: Session = {
      id: randomBytes(32).toString("base64url"),
      operator,
      csrf: randomBytes(32).toString("base64url"),
      expiresAt: this.now() + (this.options.sessionMs ?? 12 * 3600_000),
    };
    this.sessions.set(session.id, session);
    return session;
  }

  session(id: string | undefined): Session | undefined {
    if (!id) return undefined;
    const session = this.sessions.get(id);
    if (!session) return undefined;
    if (session.expiresAt <= this.now()) {
      this.sessions.delete(id);
      return undefined;
    }
    return session;
  }

  signOut(id: string): void {
    this.sessions.delete(id);
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private sweep(): void {
    const now = this.now();
    for (const [id, session] of this.sessions) if (session.expiresAt <= now) this.sessions.delete(id);
  }
}
