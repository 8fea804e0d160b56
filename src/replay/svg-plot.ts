/**
 * A hand-written SVG of a replay: the CDF of time to first token per policy (log time
 * axis, since policies differ by orders of magnitude) and the prefix hit rate per policy
 * against the trace's ceiling. No plotting dependency; the output is plain text.
 */

export interface PlotSeries {
  readonly label: string;
  /** TTFTs in ms, ascending. */
  readonly ttftSorted: ArrayLike<number>;
  /** Token hit rate 0..1. */
  readonly hitRate: number;
}

const COLOURS = ["#1b6ac9", "#d1495b", "#2e933c", "#edae49", "#7b4b94", "#00798c", "#6b4226"];

const esc = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

const f = (x: number) => (Math.round(x * 10) / 10).toString();

/** Up to `max` (value, fraction ≤ value) points of an ascending sample. */
function cdfPoints(sorted: ArrayLike<number>, max: number): [number, number][] {
  const n = sorted.length;
  if (n === 0) return [];
  const step = Math.max(1, Math.floor(n / max));
  const pts: [number, number][] = [];
  for (let i = 0; i < n; i += step) pts.push([sorted[i]!, (i + 1) / n]);
  pts.push([sorted[n - 1]!, 1]);
  return pts;
}

/** The SVG document. `ceiling` (0..1) draws the one-infinite-cache hit rate, when known. */
export function renderSvg(
  series: readonly PlotSeries[],
  title: string,
  ceiling: number | null,
): string {
  const W = 960;
  const H = 420;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  );

  // Left panel: TTFT CDF, log10 seconds.
  const L = { x: 60, y: 50, w: 520, h: 310 };
  let lo = Number.POSITIVE_INFINITY;
  let hi = 0;
  for (const s of series) {
    const n = s.ttftSorted.length;
    if (n === 0) continue;
    lo = Math.min(lo, Math.max(1, s.ttftSorted[0]!));
    hi = Math.max(hi, s.ttftSorted[n - 1]!);
  }
  if (!Number.isFinite(lo)) {
    lo = 1;
    hi = 10;
  }
  const d0 = Math.floor(Math.log10(lo));
  const d1 = Math.max(d0 + 1, Math.ceil(Math.log10(Math.max(hi, lo * 10))));
  const xOf = (ms: number) => L.x + ((Math.log10(Math.max(ms, 10 ** d0)) - d0) / (d1 - d0)) * L.w;
  const yOf = (p: number) => L.y + L.h - p * L.h;
  out.push(
    `<rect x="${L.x}" y="${L.y}" width="${L.w}" height="${L.h}" fill="none" stroke="#888"/>`,
  );
  for (let d = d0; d <= d1; d++) {
    const x = f(xOf(10 ** d));
    const label = d >= 3 ? `${10 ** (d - 3)} s` : `${10 ** d} ms`;
    out.push(
      `<line x1="${x}" y1="${L.y}" x2="${x}" y2="${L.y + L.h}" stroke="#eee"/>`,
      `<text x="${x}" y="${L.y + L.h + 16}" text-anchor="middle">${label}</text>`,
    );
  }
  for (let p = 0; p <= 1.0001; p += 0.25) {
    const y = f(yOf(p));
    out.push(
      `<line x1="${L.x}" y1="${y}" x2="${L.x + L.w}" y2="${y}" stroke="#eee"/>`,
      `<text x="${L.x - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${p.toFixed(2)}</text>`,
    );
  }
  out.push(
    `<text x="${L.x + L.w / 2}" y="${L.y + L.h + 34}" text-anchor="middle">time to first token (log scale)</text>`,
    `<text x="16" y="${L.y + L.h / 2}" text-anchor="middle" transform="rotate(-90 16 ${L.y + L.h / 2})">fraction of requests</text>`,
  );
  series.forEach((s, i) => {
    const pts = cdfPoints(s.ttftSorted, 400);
    if (pts.length === 0) return;
    const d = pts.map(([v, p], k) => `${k === 0 ? "M" : "L"}${f(xOf(v))},${f(yOf(p))}`).join("");
    const c = COLOURS[i % COLOURS.length]!;
    out.push(
      `<path d="${d}" fill="none" stroke="${c}" stroke-width="2"/>`,
      `<rect x="${L.x + 10}" y="${L.y + 10 + i * 18}" width="12" height="3" fill="${c}"/>`,
      `<text x="${L.x + 28}" y="${L.y + 14 + i * 18}">${esc(s.label)}</text>`,
    );
  });

  // Right panel: hit rate bars.
  const R = { x: 650, y: 50, w: 280, h: 310 };
  const maxRate = Math.max(0.05, ceiling ?? 0, ...series.map((s) => s.hitRate));
  const top = Math.ceil(maxRate * 10) / 10;
  const yR = (r: number) => R.y + R.h - (r / top) * R.h;
  out.push(
    `<rect x="${R.x}" y="${R.y}" width="${R.w}" height="${R.h}" fill="none" stroke="#888"/>`,
  );
  for (let r = 0; r <= top + 1e-9; r += 0.1) {
    const y = f(yR(r));
    out.push(
      `<line x1="${R.x}" y1="${y}" x2="${R.x + R.w}" y2="${y}" stroke="#eee"/>`,
      `<text x="${R.x - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${Math.round(r * 100)}%</text>`,
    );
  }
  const slot = R.w / Math.max(1, series.length);
  series.forEach((s, i) => {
    const c = COLOURS[i % COLOURS.length]!;
    const x = R.x + i * slot + slot * 0.15;
    const y = yR(s.hitRate);
    out.push(
      `<rect x="${f(x)}" y="${f(y)}" width="${f(slot * 0.7)}" height="${f(R.y + R.h - y)}" fill="${c}"/>`,
      `<text x="${f(x + slot * 0.35)}" y="${f(y - 4)}" text-anchor="middle">${(100 * s.hitRate).toFixed(1)}%</text>`,
      `<text x="${f(x + slot * 0.35)}" y="${R.y + R.h + 16}" text-anchor="middle" font-size="10">${esc(s.label)}</text>`,
    );
  });
  if (ceiling !== null) {
    const y = f(yR(ceiling));
    out.push(
      `<line x1="${R.x}" y1="${y}" x2="${R.x + R.w}" y2="${y}" stroke="#333" stroke-dasharray="5,4"/>`,
      `<text x="${R.x + R.w - 4}" y="${Number(y) - 4}" text-anchor="end">ceiling ${(100 * ceiling).toFixed(1)}%</text>`,
    );
  }
  out.push(
    `<text x="${R.x + R.w / 2}" y="${R.y + R.h + 34}" text-anchor="middle">prefix hit rate (tokens)</text>`,
    "</svg>",
  );
  return `${out.join("\n")}\n`;
}
