/**
 * Formatting of times, durations and counts for display. Times are shown in
 * UTC with an explicit zone, so two operators comparing notes read the same
 * clock.
 */

/** The largest |epoch ms| a `Date` holds (±100,000,000 days); stored events may be later (up to 2^53 - 1). */
const MAX_DATE_MS = 8_640_000_000_000_000;

/** The ISO string of `ms`, or null when no `Date` holds it (`toISOString` would throw). */
function isoOf(ms: number): string | null {
  return Number.isFinite(ms) && Math.abs(ms) <= MAX_DATE_MS ? new Date(ms).toISOString() : null;
}

/**
 * `2026-11-29 23:40:12 UTC` from epoch ms; a year past 9999 (or before 0) in
 * the ISO expanded form, `+055840-11-08 22:13:20 UTC`. A time no date can
 * hold is shown as its number: `9007199254740991 ms since the epoch (not a date)`.
 */
export function formatTime(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  const iso = isoOf(ms);
  if (iso === null) return `${ms} ms since the epoch (not a date)`;
  // Split at "T": the date part is longer than 10 characters for a 5-6 digit or signed year.
  const [date, time = ""] = iso.split("T");
  return `${date} ${time.slice(0, 8)} UTC`;
}

/** A `<time>` element's `datetime` for `ms`; empty when no date holds it. */
export function isoTime(ms: number): string {
  return isoOf(ms) ?? "";
}

/** A duration in the largest two units that matter: `850 ms`, `42 s`, `3 min 20 s`, `2 h 5 min`, `3 d 4 h`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  const sign = ms < 0 ? "-" : "";
  const abs = Math.abs(ms);
  if (abs < 1000) return `${sign}${Math.round(abs)} ms`;
  const seconds = Math.floor(abs / 1000);
  if (seconds < 60) return `${sign}${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${sign}${minutes} min${seconds % 60 ? ` ${seconds % 60} s` : ""}`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${sign}${hours} h${minutes % 60 ? ` ${minutes % 60} min` : ""}`;
  const days = Math.floor(hours / 24);
  return `${sign}${days} d${hours % 24 ? ` ${hours % 24} h` : ""}`;
}

const integerFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

/** `1,234,567`. */
export function formatCount(value: number): string {
  return integerFormat.format(value);
}

/** `12.5 %` of `part / whole`, with small non-zero shares shown as `< 0.1 %`. */
export function formatShare(part: number, whole: number): string {
  if (whole <= 0) return "—";
  const share = (part / whole) * 100;
  if (share > 0 && share < 0.1) return "< 0.1 %";
  return `${share.toFixed(share < 10 ? 1 : 0)} %`;
}
