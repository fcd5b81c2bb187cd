/**
 * Errors steward raises on purpose. Each has a stable `code`, structured `data` and an optional
 * `cause`; the CLI prints `message` as one line and maps the class to an exit code. A user's mistake
 * is never shown as a stack trace.
 */
export class StewardError extends Error {
  override readonly name: string = "StewardError";
  /** Stable identifier, e.g. `E_USAGE`, for scripts and tests. */
  readonly code: string;
  readonly data: Record<string, unknown>;

  constructor(
    code: string,
    message: string,
    options: { data?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.data = options.data ?? {};
  }
}

/** The command line was wrong: unknown flag, missing argument, bad value. Exit 2. */
export class UsageError extends StewardError {
  override readonly name = "UsageError";
  constructor(message: string, data?: Record<string, unknown>) {
    super("E_USAGE", message, data ? { data } : {});
  }
}

/**
 * The environment cannot support the command: missing path, tool or permission. Exit 2. A failure
 * of its own kind subclasses it with its own `code` (every subclass exits 2 too).
 */
export class EnvironmentError extends StewardError {
  override readonly name: string = "EnvironmentError";
  constructor(
    message: string,
    options: { code?: string; data?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(options.code ?? "E_ENVIRONMENT", message, options);
  }
}

/** A name given on the command line names nothing (a node, an instance, a task, an id). Exit 2. */
export class NotFoundError extends StewardError {
  override readonly name = "NotFoundError";
  constructor(message: string, data?: Record<string, unknown>) {
    super("E_NOT_FOUND", message, data ? { data } : {});
  }
}

/** True when `error` is one of ours (its message is meant for the user as it is). */
export function isStewardError(error: unknown): error is StewardError {
  return error instanceof StewardError;
}
