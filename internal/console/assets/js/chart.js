// chart.js: the 90-day usage chart, an SVG drawn here with DOM calls. Each
// day is a bar of used units (its overage part on top, in its own colour)
// and, below the axis, a bar of denied checks. Every bar carries a <title>
// with its date and numbers, and a table of the same data sits under the
// chart for screen readers and for copying.

import { h, s, num } from './ui.js';

const H = 260, LEFT = 64, RIGHT = 8, TOP = 10, USED_H = 170, GAP = 24, DENIED_H = 40;

// dayList returns the n dates (YYYY-MM-DD, UTC) ending with end.
export function dayList(end, n) {
  const out = [];
  const d = new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth(), end.getUTCDate()));
  d.setUTCDate(d.getUTCDate() - (n - 1));
  for (let i = 0; i < n; i++) {
    out.push(d.toISOString().slice(0, 10));
    d.setUTCDate(d.getUTCDate() + 1);
  }
  return out;
}

// usageChart draws days ([{date, used, overage, denied}], one per date, in
// order) for metric, width pixels wide (so that its text keeps its size on
// a phone).
export function usageChart(metric, days, width = 900) {
  const W = Math.max(320, Math.round(width));
  const maxUsed = Math.max(1, ...days.map((d) => d.used));
  const maxDenied = Math.max(1, ...days.map((d) => d.denied));
  const step = (W - LEFT - RIGHT) / days.length;
  const bw = Math.max(1, step * 0.8);
  const base = TOP + USED_H;
  const dBase = base + GAP + DENIED_H;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `Daily usage of ${metric}, last ${days.length} days` });
  svg.append(
    s('line', { class: 'axis', x1: LEFT, x2: W - RIGHT, y1: base, y2: base }),
    s('line', { class: 'axis', x1: LEFT, x2: W - RIGHT, y1: dBase, y2: dBase }),
    s('text', { x: LEFT - 6, y: TOP + 10, 'text-anchor': 'end' }, num(maxUsed)),
    s('text', { x: LEFT - 6, y: base, 'text-anchor': 'end' }, '0'),
    s('text', { x: LEFT - 6, y: base + GAP + 10, 'text-anchor': 'end' }, num(maxDenied)),
    s('text', { x: 4, y: base + GAP + DENIED_H / 2 + 4 }, 'denied'),
    s('text', { x: LEFT, y: H - 2 }, days[0]?.date ?? ''),
    s('text', { x: W - RIGHT, y: H - 2, 'text-anchor': 'end' }, days[days.length - 1]?.date ?? ''),
  );
  days.forEach((d, i) => {
    const x = LEFT + i * step + (step - bw) / 2;
    const g = s('g', { 'data-date': d.date });
    g.append(s('title', {}, `${d.date}: ${num(d.used)} used, ${num(d.overage)} overage, ${num(d.denied)} denied checks`));
    const hUsed = (d.used / maxUsed) * USED_H;
    const hOver = (Math.min(d.overage, d.used) / maxUsed) * USED_H;
    if (hUsed > 0) g.append(s('rect', { class: 'used', x, width: bw, y: base - hUsed, height: hUsed - hOver }));
    if (hOver > 0) g.append(s('rect', { class: 'overage', x, width: bw, y: base - hUsed, height: hOver }));
    const hDen = (d.denied / maxDenied) * DENIED_H;
    if (hDen > 0) g.append(s('rect', { class: 'denied', x, width: bw, y: dBase - hDen, height: hDen }));
    // An invisible full-height target, so that hovering any day shows its title.
    g.append(s('rect', { x: LEFT + i * step, width: step, y: TOP, height: dBase - TOP, fill: 'transparent' }));
    svg.append(g);
  });
  const legend = h('div', { class: 'legend' },
    h('span', {}, h('i', { class: 'used' }), 'used'),
    h('span', {}, h('i', { class: 'overage' }), 'overage (part of used)'),
    h('span', {}, h('i', { class: 'denied' }), 'denied checks'));
  const withData = days.filter((d) => d.used || d.overage || d.denied);
  const data = h('details', {}, h('summary', {}, `Data (${withData.length} days with activity)`),
    h('div', { class: 'scroll' }, h('table', {},
      h('thead', {}, h('tr', {}, ['Date', 'Used', 'Overage', 'Denied'].map((c, i) => h('th', { scope: 'col', class: i ? 'num' : null }, c)))),
      h('tbody', {}, withData.map((d) => h('tr', {}, h('td', {}, d.date), h('td', { class: 'num' }, num(d.used)),
        h('td', { class: 'num' }, num(d.overage)), h('td', { class: 'num' }, num(d.denied))))))));
  return h('div', { class: 'chart' }, legend, svg, data);
}
