/**
 * Formatting of times, durations and counts for display. Times are shown in
 * UTC with an explicit zone, so two operators comparing notes read the same
 * clock.
 */

/** `2026-11-29 23:40:12 UTC` from epoch ms. */
export function formatTime(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

/** A `<time>` element for `ms`, machine-readable in `datetime`. */
export function isoTime(ms: number): string {
  return Number.isFinite(ms) ? new Date(ms).toISOString() : "";
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
