/**
 * A warning that can come once per node in one turn: at 100,000 instances a bus that times out
 * writes thousands of identical lines, and the one that says why scrolls away. The first warning of
 * a window is logged in full (with its error); the rest are counted, and when the window ends one
 * line says how many there were, which reasons, and a few of the subjects.
 */
import type { Logger } from "pino";
import { redact } from "./redact.js";

/** Subjects named in a summary line (the count says how many there were). */
const EXAMPLES = 5;
/** Distinct reasons counted in a summary; the rest are counted as "other". */
const REASONS = 5;

export class WarningDigest {
  private timer: NodeJS.Timeout | undefined;
  private count = 0;
  private readonly examples: string[] = [];
  private readonly reasons = new Map<string, number>();

  /**
   * `message` is a format with one `%s`, the subject (a node's name); `many` the summary's, with a
   * `%d` (how many more) and a `%s` (the window, as "30 s").
   */
  constructor(
    private readonly log: Logger,
    private readonly message: string,
    private readonly many: string,
    private readonly windowMs = 30_000,
  ) {}

  /** One warning about `subject`, for `error`. */
  warn(subject: string, error: unknown, fields: Record<string, unknown> = {}): void {
    if (!this.timer) {
      this.log.warn({ ...fields, err: error }, this.message, subject);
      this.timer = setTimeout(() => this.flush(), this.windowMs);
      this.timer.unref();
      return;
    }
    this.count++;
    if (this.examples.length < EXAMPLES) this.examples.push(subject);
    const reason = redact(error instanceof Error ? error.message : String(error)).slice(0, 200);
    if (this.reasons.has(reason) || this.reasons.size < REASONS)
      this.reasons.set(reason, (this.reasons.get(reason) ?? 0) + 1);
    else this.reasons.set("other", (this.reasons.get("other") ?? 0) + 1);
  }

  /** Ends the window: the summary of the warnings counted in it, if any (also on stop). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.count === 0) return;
    this.log.warn(
      { count: this.count, examples: [...this.examples], reasons: Object.fromEntries(this.reasons) },
      this.many,
      this.count,
      `${Math.round(this.windowMs / 1000)} s`,
    );
    this.count = 0;
    this.examples.length = 0;
    this.reasons.clear();
  }
}
