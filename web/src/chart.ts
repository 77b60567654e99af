/**
 * A small line chart drawn as inline SVG (no chart library): one series over
 * a fixed time window ending now, so that a backlog growing over the last hour
 * shows as a line going up. Labels are SVG `<text>` nodes (text only); colours
 * come from classes in app.css.
 */
import { svg } from "./dom.js";

/** One sample; `value: null` is a gap (the sample could not be taken). */
export interface SeriesPoint {
  readonly at: number;
  readonly value: number | null;
}

/** What to draw. */
export interface LineChartOptions {
  /** Accessible name of the chart, e.g. "Depth over the last hour". */
  readonly label: string;
  readonly points: readonly SeriesPoint[];
  /** The right edge of the window (epoch ms). */
  readonly now: number;
  /** Width of the window (ms), e.g. one hour. */
  readonly windowMs: number;
  /** Two samples further apart than this are not joined by a line. */
  readonly maxGapMs: number;
  readonly formatValue: (value: number) => string;
  /** The y axis tops out at the first of these at or above the largest value (else a 1-2-5 step). */
  readonly niceSteps?: readonly number[];
  /** The y axis reaches at least this high (so a flat line at 1 does not fill the chart). */
  readonly minTop?: number;
  /** Extra class for the series colour. */
  readonly seriesClass: string;
}

const WIDTH = 600;
const HEIGHT = 150;
const PAD = { left: 72, right: 14, top: 12, bottom: 26 } as const;

/** The smallest "round" number at or above `value`: from `steps`, else 1, 2, 5 times a power of ten. */
export function niceCeiling(value: number, steps?: readonly number[]): number {
  if (value <= 0) return steps?.[0] ?? 1;
  const fromSteps = steps?.find((step) => step >= value);
  if (fromSteps !== undefined) return fromSteps;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const factor of [1, 2, 5, 10]) {
    if (factor * power >= value) return factor * power;
  }
  return 10 * power;
}

/** `30 s`, `5 min`, `1 h` for an x-axis label. */
function agoText(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 2 * 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

/**
 * Draw the chart. With fewer than two samples in the window it says so
 * instead of drawing an empty frame.
 */
export function lineChart(options: LineChartOptions): SVGSVGElement {
  const { now, windowMs } = options;
  const start = now - windowMs;
  const visible = options.points.filter((point) => point.at >= start && point.at <= now);
  const values = visible.flatMap((point) => (point.value === null ? [] : [point.value]));
  const yMax = niceCeiling(Math.max(options.minTop ?? 0, ...values), options.niceSteps);
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const x = (at: number) => PAD.left + ((at - start) / windowMs) * plotWidth;
  const y = (value: number) => PAD.top + plotHeight - (value / yMax) * plotHeight;

  const chart = svg("svg", {
    class: "chart",
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": options.label,
  });

  for (const fraction of [0, 0.5, 1]) {
    const value = yMax * fraction;
    chart.append(
      svg("line", { class: "chart-grid", x1: PAD.left, x2: WIDTH - PAD.right, y1: y(value), y2: y(value) }),
      svg("text", { class: "chart-label", x: PAD.left - 6, y: y(value) + 4, "text-anchor": "end" }, options.formatValue(value)),
    );
  }
  const xLabels: readonly [number, string, string][] = [
    [start, `${agoText(windowMs)} ago`, "start"],
    [start + windowMs / 2, `${agoText(windowMs / 2)} ago`, "middle"],
    [now, "now", "end"],
  ];
  for (const [at, text, anchor] of xLabels) {
    chart.append(svg("text", { class: "chart-label", x: x(at), y: HEIGHT - 6, "text-anchor": anchor }, text));
  }

  if (values.length < 2) {
    chart.append(
      svg(
        "text",
        { class: "chart-empty", x: PAD.left + plotWidth / 2, y: PAD.top + plotHeight / 2, "text-anchor": "middle" },
        "Collecting samples…",
      ),
    );
    return chart;
  }

  let path = "";
  let previous: SeriesPoint | null = null;
  for (const point of visible) {
    if (point.value === null) {
      previous = null;
      continue;
    }
    const joined = previous !== null && point.at - previous.at <= options.maxGapMs;
    path += `${joined ? "L" : "M"}${x(point.at).toFixed(1)},${y(point.value).toFixed(1)} `;
    previous = point;
  }
  chart.append(svg("path", { class: `chart-line ${options.seriesClass}`, d: path.trim() }));
  const last = [...visible].reverse().find((point) => point.value !== null);
  if (last && last.value !== null) {
    chart.append(svg("circle", { class: `chart-dot ${options.seriesClass}`, cx: x(last.at), cy: y(last.value), r: 3.5 }));
  }
  return chart;
}
