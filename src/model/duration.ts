const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses a schema-valid duration (`500ms`, `30s`, `5m`, `1h`, `2d`) into milliseconds. */
export function parseDuration(text: string): number {
  const match = /^([0-9]+)(ms|s|m|h|d)$/.exec(text);
  if (!match)
    throw new RangeError(`not a duration: ${JSON.stringify(text)} (expected a number and ms, s, m, h or d)`);
  return Number(match[1]) * (units[match[2]!] ?? 1);
}

/** Formats milliseconds as the largest whole unit: 90000 → `90s`, 120000 → `2m`. */
export function formatDuration(ms: number): string {
  for (const unit of ["d", "h", "m", "s"] as const) {
    const size = units[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
