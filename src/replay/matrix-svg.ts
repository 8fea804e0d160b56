/**
 * The matrix as one hand-written SVG: a panel per workload and cache size (rows) and load
 * (columns);
 * in each, one bar per policy for mean TTFT and a tick for p99, on a log time axis shared
 * by all panels (policies differ by orders of magnitude).
 */

import { cacheLabel, type MatrixResult } from "./matrix.js";

const COLOURS = [
  "#1b6ac9",
  "#888888",
  "#d1495b",
  "#2e933c",
  "#edae49",
  "#7b4b94",
  "#00798c",
  "#6b4226",
  "#c45ab3",
  "#3a3a3a",
];

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const f = (x: number) => (Math.round(x * 10) / 10).toString();

export function renderMatrixSvg(results: readonly MatrixResult[], title: string): string {
  const rows: { workload: string; cache: number | null }[] = [];
  for (const w of new Set(results.map((r) => r.workload))) {
    for (const c of new Set(results.map((r) => r.cacheTokens))) {
      if (results.some((r) => r.workload === w && r.cacheTokens === c)) {
        rows.push({ workload: w, cache: c });
      }
    }
  }
  const loads = [...new Set(results.map((r) => r.load))].sort((a, b) => a - b);
  const policies = [...new Set(results.map((r) => r.policy))];
  const barH = 9;
  const panelW = 300;
  const panelH = policies.length * (barH + 2) + 34;
  const left = 170;
  const top = 40;
  const W = left + loads.length * (panelW + 20) + 10;
  const H = top + rows.length * (panelH + 12) + 30 + 14 * Math.ceil(policies.length / 4);
  const lo = 0.05;
  let hi = 1;
  for (const r of results) hi = Math.max(hi, r.summary.ttftMs.p99 / 1000);
  const x = (s: number) => (Math.log10(Math.max(lo, s) / lo) / Math.log10(hi / lo)) * (panelW - 10);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="10">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="16" text-anchor="middle" font-size="13">${esc(title)}</text>`,
    `<text x="${W / 2}" y="30" text-anchor="middle">bars: mean TTFT, ticks: p99 TTFT (log scale, seconds); columns: round-robin prefill utilisation</text>`,
  ];
  rows.forEach(({ workload: w, cache }, wi) => {
    const y0 = top + wi * (panelH + 12);
    out.push(
      `<text x="4" y="${y0 + panelH / 2}" font-size="12">${esc(w)}</text>`,
      `<text x="4" y="${y0 + panelH / 2 + 13}" fill="#555">${esc(cacheLabel(cache))}</text>`,
    );
    loads.forEach((l, li) => {
      const x0 = left + li * (panelW + 20);
      out.push(
        `<rect x="${x0}" y="${y0}" width="${panelW}" height="${panelH}" fill="none" stroke="#ccc"/>`,
        `<text x="${x0 + 4}" y="${y0 + 11}">${Math.round(100 * l)} %</text>`,
      );
      for (const s of [0.1, 1, 10, 100]) {
        if (s > hi) continue;
        const gx = x0 + 5 + x(s);
        out.push(
          `<line x1="${f(gx)}" y1="${y0 + 14}" x2="${f(gx)}" y2="${y0 + panelH - 12}" stroke="#eee"/>`,
          `<text x="${f(gx)}" y="${y0 + panelH - 2}" text-anchor="middle" fill="#777">${s} s</text>`,
        );
      }
      policies.forEach((p, pi) => {
        const r = results.find(
          (q) => q.workload === w && q.cacheTokens === cache && q.load === l && q.policy === p,
        );
        if (r === undefined) return;
        const by = y0 + 16 + pi * (barH + 2);
        const c = COLOURS[pi % COLOURS.length]!;
        out.push(
          `<rect x="${x0 + 5}" y="${by}" width="${f(Math.max(1, x(r.summary.ttftMs.mean / 1000)))}" height="${barH}" fill="${c}"/>`,
          `<line x1="${f(x0 + 5 + x(r.summary.ttftMs.p99 / 1000))}" y1="${by}" x2="${f(x0 + 5 + x(r.summary.ttftMs.p99 / 1000))}" y2="${by + barH}" stroke="${c}" stroke-width="2"/>`,
        );
      });
    });
  });
  const ly = top + rows.length * (panelH + 12) + 10;
  policies.forEach((p, pi) => {
    const lx = left + (pi % 4) * 200;
    const yy = ly + Math.floor(pi / 4) * 14;
    out.push(
      `<rect x="${lx}" y="${yy}" width="10" height="10" fill="${COLOURS[pi % COLOURS.length]}"/>`,
      `<text x="${lx + 14}" y="${yy + 9}">${esc(p)}</text>`,
    );
  });
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
