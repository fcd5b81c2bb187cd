/**
 * What the ahead-of-time compiled validators (validators.generated.ts) call at run time, in place of
 * ajv's and ajv-formats' CommonJS helpers: loading those costs more at start-up than validating a
 * thousand documents. Behaviour is theirs, copied (MIT licence, ajv-validator): `ucs2length` for
 * `minLength`/`maxLength`, `equal` (fast-deep-equal) for `uniqueItems`/`const`, and the formats the
 * schemas use. scripts/gen-types.mjs refuses a schema that needs a format not listed here.
 */

/** Length in code points, as JSON Schema counts string length. */
export function ucs2length(text: string): number {
  const length = text.length;
  let count = 0;
  let pos = 0;
  while (pos < length) {
    count++;
    const value = text.charCodeAt(pos++);
    if (value >= 0xd800 && value <= 0xdbff && pos < length) {
      // A high surrogate followed by a low one is one code point.
      if ((text.charCodeAt(pos) & 0xfc00) === 0xdc00) pos++;
    }
  }
  return count;
}

/** Deep equality of JSON values. */
export function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a && b && typeof a === "object" && typeof b === "object") {
    if (a.constructor !== b.constructor) return false;
    if (Array.isArray(a)) {
      const other = b as unknown[];
      if (a.length !== other.length) return false;
      for (let i = a.length; i-- !== 0; ) if (!equal(a[i], other[i])) return false;
      return true;
    }
    const left = a as Record<string, unknown>;
    const right = b as Record<string, unknown>;
    const keys = Object.keys(left);
    if (keys.length !== Object.keys(right).length) return false;
    for (const key of keys) if (!Object.hasOwn(right, key)) return false;
    for (const key of keys) if (!equal(left[key], right[key])) return false;
    return true;
  }
  // True when both are NaN.
  return Number.isNaN(a) && Number.isNaN(b);
}

const NOT_URI_FRAGMENT = /\/|:/;
const URI =
  /^(?:[a-z][a-z0-9+\-.]*:)(?:\/?\/(?:(?:[a-z0-9\-._~!$&'()*+,;=:]|%[0-9a-f]{2})*@)?(?:\[(?:(?:(?:(?:[0-9a-f]{1,4}:){6}|::(?:[0-9a-f]{1,4}:){5}|(?:[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){4}|(?:(?:[0-9a-f]{1,4}:){0,1}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){3}|(?:(?:[0-9a-f]{1,4}:){0,2}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){2}|(?:(?:[0-9a-f]{1,4}:){0,3}[0-9a-f]{1,4})?::[0-9a-f]{1,4}:|(?:(?:[0-9a-f]{1,4}:){0,4}[0-9a-f]{1,4})?::)(?:[0-9a-f]{1,4}:[0-9a-f]{1,4}|(?:(?:25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(?:25[0-5]|2[0-4]\d|[01]?\d\d?))|(?:(?:[0-9a-f]{1,4}:){0,5}[0-9a-f]{1,4})?::[0-9a-f]{1,4}|(?:(?:[0-9a-f]{1,4}:){0,6}[0-9a-f]{1,4})?::)|[Vv][0-9a-f]+\.[a-z0-9\-._~!$&'()*+,;=:]+)\]|(?:(?:25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(?:25[0-5]|2[0-4]\d|[01]?\d\d?)|(?:[a-z0-9\-._~!$&'()*+,;=]|%[0-9a-f]{2})*)(?::\d*)?(?:\/(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*|\/(?:(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})+(?:\/(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*)?|(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})+(?:\/(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*)(?:\?(?:[a-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9a-f]{2})*)?(?:#(?:[a-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9a-f]{2})*)?$/i;

/** RFC 3986 URI with a scheme (ajv-formats' `uri`). */
function uri(text: string): boolean {
  return NOT_URI_FRAGMENT.test(text) && URI.test(text);
}

const DATE = /^(\d\d\d\d)-(\d\d)-(\d\d)$/;
const DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const TIME = /^(\d\d):(\d\d):(\d\d(?:\.\d+)?)(z|([+-])(\d\d)(?::?(\d\d))?)?$/i;
const DATE_TIME_SEPARATOR = /t|\s/i;

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

/** RFC 3339 full-date. */
function date(text: string): boolean {
  const matches = DATE.exec(text);
  if (!matches) return false;
  const year = +matches[1]!;
  const month = +matches[2]!;
  const day = +matches[3]!;
  return (
    month >= 1 && month <= 12 && day >= 1 && day <= (month === 2 && isLeapYear(year) ? 29 : DAYS[month]!)
  );
}

/** RFC 3339 full-time, with a time zone (a leap second only at 23:59 UTC). */
function time(text: string): boolean {
  const matches = TIME.exec(text);
  if (!matches) return false;
  const hour = +matches[1]!;
  const minute = +matches[2]!;
  const second = +matches[3]!;
  const zone = matches[4];
  const sign = matches[5] === "-" ? -1 : 1;
  const zoneHours = +(matches[6] || 0);
  const zoneMinutes = +(matches[7] || 0);
  if (zoneHours > 23 || zoneMinutes > 59 || !zone) return false;
  if (hour <= 23 && minute <= 59 && second < 60) return true;
  const utcMinute = minute - zoneMinutes * sign;
  const utcHour = hour - zoneHours * sign - (utcMinute < 0 ? 1 : 0);
  return (utcHour === 23 || utcHour === -1) && (utcMinute === 59 || utcMinute === -1) && second < 61;
}

/** The formats the schemas use, shaped as ajv-formats' `fullFormats`. */
export const formats = {
  uri,
  "date-time": {
    validate(text: string): boolean {
      const parts = text.split(DATE_TIME_SEPARATOR);
      return parts.length === 2 && date(parts[0]!) && time(parts[1]!);
    },
  },
};
