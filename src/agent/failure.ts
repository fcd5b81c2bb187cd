/**
 * How a resource fails. Every driver throws ResourceFailure with a stable CamelCase `reason` and a
 * failure class that tells the hub what to do: `transient` (retry with backoff within the budget:
 * a registry unreachable, a dependency not up yet) or `permanent` (retrying cannot help: a missing
 * tool, an image or package that does not exist, a path outside the node's roots).
 */
import type { FailureClass } from "../model/generated.js";

/** A resource could not be observed or applied: why (`reason`), and whether retrying can help. */
export class ResourceFailure extends Error {
  override readonly name = "ResourceFailure";
  constructor(
    /** Stable CamelCase reason, e.g. `ToolMissing`, `ImageNotFound`, `PathOutsideRoots`. */
    readonly reason: string,
    message: string,
    readonly failureClass: Exclude<FailureClass, "ambiguous">,
    /** What was seen (command output, exit code): bounded, never secrets. */
    readonly evidence?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The reason of a one-shot command whose outcome is lost (started, then gone without an exit
 * status): reported `interrupted`, and never run again until a person decides.
 */
export const ONE_SHOT_INTERRUPTED = "OneShotInterrupted";

/** A failure that retrying will not fix. */
export function permanent(reason: string, message: string, evidence?: string): ResourceFailure {
  return new ResourceFailure(reason, message, "permanent", evidence);
}

/** A failure that may go away on its own; retried within the budget. */
export function transient(reason: string, message: string, evidence?: string): ResourceFailure {
  return new ResourceFailure(reason, message, "transient", evidence);
}

/** Turns anything thrown by a driver into a ResourceFailure, classifying system errors by their code. */
export function asResourceFailure(error: unknown): ResourceFailure {
  if (error instanceof ResourceFailure) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const message = error instanceof Error ? error.message : String(error);
  switch (code) {
    case "EACCES":
    case "EPERM":
      return new ResourceFailure("PermissionDenied", message, "permanent", undefined, { cause: error });
    case "EROFS":
      return new ResourceFailure("ReadOnlyFilesystem", message, "permanent", undefined, { cause: error });
    case "ENOSPC":
    case "EDQUOT":
      return new ResourceFailure("NoSpace", message, "transient", undefined, { cause: error });
    case "ENOTDIR":
    case "EISDIR":
      return new ResourceFailure("TypeConflict", message, "permanent", undefined, { cause: error });
    default:
      return new ResourceFailure("Unexpected", message, "transient", undefined, { cause: error });
  }
}
