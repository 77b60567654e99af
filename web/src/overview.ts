/**
 * The overview of one consumer: the numbers an operator alerts on (pending, in
 * flight, quarantined, dropped, oldest pending age, capacity used) and two
 * charts of the last hour (depth, oldest pending age), sampled by this page
 * every few seconds while it is open. The history lives in the page only: it
 * starts when the page opens and is gone when it closes.
 */
import type { JournalStats } from "../../src/journal/types.js";
import { describeError, AuthError, type OperatorApi } from "./api.js";
import { lineChart, type SeriesPoint } from "./chart.js";
import { el, replaceChildren } from "./dom.js";
import { formatCount, formatDuration, formatShare, formatTime } from "./format.js";
import type { Selection } from "./session.js";
import { displayValue } from "./text.js";

/** The longest window the charts show (and how long samples are kept). */
export const HISTORY_MS = 60 * 60 * 1000;
/** The shortest window: a page open for a minute shows that minute across the chart, not a dot at its edge. */
const MIN_WINDOW_MS = 60 * 1000;

/** Durations the age chart's axis may top out at: round minutes and hours. */
const AGE_STEPS = [1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400].map((seconds) => seconds * 1000);

/** One stats reading (or a failed one: `stats` null). */
interface Sample {
  readonly at: number;
  readonly stats: JournalStats | null;
}

/** What the overview needs from the page. */
export interface OverviewOptions {
  readonly api: OperatorApi;
  readonly selection: Selection;
  /** How often stats are read (ms). */
  readonly sampleMs: number;
  /** The token was refused: the page shows the sign-in screen. */
  readonly onAuthError: (error: AuthError) => void;
  readonly now?: () => number;
}

/**
 * The overview section. `start()` begins sampling, `stop()` ends it (on sign
 * out or when another consumer is chosen), `refresh()` reads now (after an
 * operator action).
 */
export class Overview {
  readonly element: HTMLElement;
  readonly #options: OverviewOptions;
  readonly #now: () => number;
  readonly #samples: Sample[] = [];
  readonly #cards = el("dl", { class: "stat-grid", "aria-busy": "true" });
  readonly #charts = el("div", { class: "charts" });
  readonly #footnote = el("p", { class: "muted small footnote" });
  // Not a live region: it changes with every sample, and a screen reader would read each one.
  readonly #status = el("p", { class: "muted" });
  readonly #error = el("div", { class: "banner error", role: "alert", hidden: true });
  #timer: ReturnType<typeof setTimeout> | null = null;
  #reading: Promise<void> | null = null;
  /** A read was asked for while one was running: its answer may predate what prompted the ask. */
  #readAgain = false;
  #stopped = false;

  constructor(options: OverviewOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    const { journal, consumer } = options.selection;
    this.element = el(
      "section",
      { class: "panel overview", "aria-labelledby": "overview-title" },
      el("div", { class: "panel-head" }, el("h2", { id: "overview-title", tabindex: -1 }, "Overview"), this.#status),
      el("p", { class: "muted" }, "Consumer ", el("strong", { class: "untrusted" }, displayValue(consumer)), " of journal ", el("strong", { class: "untrusted" }, displayValue(journal)), "."),
      this.#error,
      this.#cards,
      this.#footnote,
      this.#charts,
    );
    replaceChildren(this.#cards, ...["Pending", "In flight", "Quarantined", "Dropped", "Oldest pending age", "Capacity used"].map((label) => card(label, "…")));
    this.#status.textContent = "Loading stats…";
    this.#renderCharts();
  }

  /** Read now, then every `sampleMs` until `stop()`. */
  start(): void {
    this.#stopped = false;
    this.#schedule(0);
  }

  /** Stop sampling. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /**
   * Read the stats now. When a read is already running, its answer may have
   * been computed before whatever prompted this call (an operator action), so
   * one more read follows it; the promise settles after that one. Asks made
   * during one running read share that one follow-up.
   */
  refresh(): Promise<void> {
    // Stopped (signed out, another consumer chosen): its token and selection are no longer the page's.
    if (this.#stopped) return Promise.resolve();
    if (this.#reading) {
      this.#readAgain = true;
      return this.#reading;
    }
    const reading = (async () => {
      do {
        this.#readAgain = false;
        await this.#read();
      } while (this.#readAgain && !this.#stopped);
    })().finally(() => {
      this.#readAgain = false;
      this.#reading = null;
    });
    this.#reading = reading;
    return reading;
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      void this.refresh().then(() => this.#schedule(this.#options.sampleMs));
    }, delayMs);
  }

  async #read(): Promise<void> {
    const { api, selection } = this.#options;
    let stats: JournalStats | null = null;
    try {
      stats = await api.stats(selection.journal, selection.consumer);
    } catch (error) {
      if (error instanceof AuthError) {
        this.stop();
        this.#options.onAuthError(error);
        return;
      }
      const message =
        `Stats could not be read: ${describeError(error)}. ` +
        (this.#samples.some((sample) => sample.stats) ? "The figures below are from the last good reading; " : "") +
        `retrying every ${formatDuration(this.#options.sampleMs)}.`;
      // Rewritten only when it changes, so the alert is announced once, not at every retry.
      if (this.#error.hidden || this.#error.textContent !== message) {
        this.#error.hidden = false;
        this.#error.textContent = message;
      }
    }
    if (this.#stopped) return;
    const at = this.#now();
    this.#samples.push({ at, stats });
    while (this.#samples.length > 0 && this.#samples[0]!.at < at - HISTORY_MS) this.#samples.shift();
    if (stats) {
      this.#error.hidden = true;
      this.#renderCards(stats);
      this.#status.textContent = `Updated ${formatTime(at)}; sampled every ${formatDuration(this.#options.sampleMs)} while this page is open.`;
    } else if (!this.#samples.some((sample) => sample.stats)) {
      this.#status.textContent = "No reading yet.";
    }
    this.#renderCharts();
  }

  #renderCards(stats: JournalStats): void {
    const held = stats.pending + stats.inFlight + stats.quarantined;
    const maxEvents = stats.capacity.maxEvents;
    const meter = el("meter", {
      min: 0,
      max: maxEvents,
      value: Math.min(held, maxEvents),
      high: maxEvents * 0.8,
      optimum: 0,
      "aria-label": "Capacity used",
    });
    this.#cards.setAttribute("aria-busy", "false");
    this.#footnote.textContent =
      `* Capacity used is this consumer's pending + in flight + quarantined, across all partitions, against maxEvents (${formatCount(maxEvents)}, policy ${stats.capacity.policy}), ` +
      "a limit each partition applies on its own to everything it stores, acknowledged events not yet pruned included. Read it as a warning sign, not as one partition's fill level.";
    replaceChildren(
      this.#cards,
      card("Pending", formatCount(stats.pending), "stored, not yet finished, not leased"),
      card("In flight", formatCount(stats.inFlight), "claimed under a running lease"),
      card("Quarantined", formatCount(stats.quarantined), "awaiting an operator", stats.quarantined > 0 ? "warn" : undefined),
      // A lifetime count: data written under drop_oldest and reopened under refuse keeps its past drops.
      card("Dropped", formatCount(stats.dropped), "journal-wide lifetime count of events lost to drop_oldest, whatever the current policy", stats.dropped > 0 ? "bad" : undefined),
      card(
        "Oldest pending age",
        stats.oldestPendingAgeMs === null ? "none pending" : formatDuration(stats.oldestPendingAgeMs),
        "now minus observedAt of the first pending event",
      ),
      card(
        "Capacity used",
        `${formatCount(held)} of ${formatCount(maxEvents)}`,
        el("span", {}, meter, el("span", { class: "block" }, `${formatShare(held, maxEvents)} of the per-partition capacity*`)),
        held >= maxEvents * 0.8 ? "bad" : undefined,
      ),
    );
  }

  #renderCharts(): void {
    const now = this.#now();
    const depth: SeriesPoint[] = this.#samples.map(({ at, stats }) => ({ at, value: stats ? stats.pending + stats.inFlight : null }));
    // No pending event means nothing is waiting: an age of zero, not a gap.
    const age: SeriesPoint[] = this.#samples.map(({ at, stats }) => ({ at, value: stats ? (stats.oldestPendingAgeMs ?? 0) : null }));
    const maxGapMs = this.#options.sampleMs * 3;
    // The window grows with the history, from a minute up to the hour kept.
    const windowMs = Math.min(HISTORY_MS, Math.max(MIN_WINDOW_MS, now - (this.#samples[0]?.at ?? now)));
    const windowText =
      windowMs >= HISTORY_MS ? "last hour" : windowMs <= MIN_WINDOW_MS ? "last minute" : `last ${formatDuration(windowMs)} (since this page opened)`;
    const latest = [...this.#samples].reverse().find((sample) => sample.stats)?.stats ?? null;
    replaceChildren(
      this.#charts,
      el(
        "figure",
        { class: "chart-figure" },
        el("figcaption", {}, el("strong", {}, "Depth"), ` (pending + in flight), ${windowText}`, latest ? `: now ${formatCount(latest.pending + latest.inFlight)}` : ""),
        lineChart({
          label: `Depth over the ${windowText}${summary(depth, formatCount)}`,
          points: depth,
          now,
          windowMs,
          maxGapMs,
          // Half of a round top may be fractional (2.5 of 5): shown as such rather than rounded.
          formatValue: (value) => (Number.isInteger(value) ? formatCount(value) : value.toFixed(1)),
          minTop: 4,
          seriesClass: "series-depth",
        }),
      ),
      el(
        "figure",
        { class: "chart-figure" },
        el(
          "figcaption",
          {},
          el("strong", {}, "Oldest pending age"),
          `, ${windowText}`,
          latest ? `: now ${latest.oldestPendingAgeMs === null ? "none pending" : formatDuration(latest.oldestPendingAgeMs)}` : "",
        ),
        lineChart({
          label: `Oldest pending age over the ${windowText}${summary(age, formatDuration)}`,
          points: age,
          now,
          windowMs,
          maxGapMs,
          formatValue: (value) => (value === 0 ? "0" : formatDuration(value)),
          niceSteps: AGE_STEPS,
          seriesClass: "series-age",
        }),
      ),
    );
  }
}

function card(label: string, value: string, note?: Node | string, tone?: "warn" | "bad"): HTMLElement {
  return el(
    "div",
    { class: tone ? `stat ${tone}` : "stat", "data-stat": label.toLowerCase().replace(/ /g, "-") },
    el("dt", {}, label),
    el("dd", { class: "stat-value" }, value),
    note ? el("dd", { class: "stat-note" }, note) : null,
  );
}

/** `: from 3 to 12 (lowest 2, highest 15)` for a chart's accessible name. */
function summary(points: readonly SeriesPoint[], format: (value: number) => string): string {
  const values = points.flatMap((point) => (point.value === null ? [] : [point.value]));
  if (values.length === 0) return ": no samples yet";
  return `: from ${format(values[0]!)} to ${format(values[values.length - 1]!)} (lowest ${format(Math.min(...values))}, highest ${format(Math.max(...values))})`;
}
