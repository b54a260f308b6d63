// chart.js: the daily usage chart, an SVG drawn here with DOM calls. Each
// day is a bar of used units (its overage part on top, in its own colour)
// and, below the axis, a bar of denied checks. Every bar carries a <title>
// with its date and numbers, dates label the axis at even steps ending
// with the last day, and a table of the same data sits under the chart for
// screen readers and for copying.

import { h, s, num, count } from './ui.js';

const H = 270, LEFT = 64, RIGHT = 8, TOP = 10, USED_H = 170, GAP = 24, DENIED_H = 40;
// BAR_MAX is the widest a day's bar gets (a few days across the page).
const BAR_MAX = 40;
// LABEL_W is the room a date label needs on the axis.
const LABEL_W = 64;
const DAY_MS = 24 * 3600 * 1000;

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

// daysBetween is how many UTC dates from's date to to's date span, both
// included: 1 for the same day.
export function daysBetween(from, to) {
  const day = (d) => Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  return Math.round((day(to) - day(from)) / DAY_MS) + 1;
}

const dateFmt = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });

// shortDate is a YYYY-MM-DD date as the browser writes a short one ("Dec 6").
export const shortDate = (date) => dateFmt.format(new Date(`${date}T00:00:00Z`));

// usageChart draws days ([{date, used, overage, denied}], one per date, in
// order) for metric, width pixels wide (so that its text keeps its size on
// a phone). Days before since (a YYYY-MM-DD date, if given: the customer's
// first day) are shaded, as days the customer did not exist.
export function usageChart(metric, days, width = 900, since = '') {
  const W = Math.max(320, Math.round(width));
  const maxUsed = Math.max(1, ...days.map((d) => d.used));
  const maxDenied = Math.max(1, ...days.map((d) => d.denied));
  const step = (W - LEFT - RIGHT) / days.length;
  const bw = Math.min(BAR_MAX, Math.max(1, step * 0.8));
  const base = TOP + USED_H;
  const dBase = base + GAP + DENIED_H;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `Daily usage of ${metric}, last ${count(days.length, 'day')}` });
  svg.append(
    s('line', { class: 'axis', x1: LEFT, x2: W - RIGHT, y1: base, y2: base }),
    s('line', { class: 'axis', x1: LEFT, x2: W - RIGHT, y1: dBase, y2: dBase }),
    s('text', { x: LEFT - 6, y: TOP + 10, 'text-anchor': 'end' }, num(maxUsed)),
    s('text', { x: LEFT - 6, y: base, 'text-anchor': 'end' }, '0'),
    s('text', { x: LEFT - 6, y: base + GAP + 10, 'text-anchor': 'end' }, num(maxDenied)),
    s('text', { x: 4, y: base + GAP + DENIED_H / 2 + 4 }, 'denied'),
  );
  // The days before the customer existed: shaded, said in their title.
  const before = since ? days.filter((d) => d.date < since).length : 0;
  if (before > 0) {
    const band = s('rect', { class: 'before', x: LEFT, width: before * step, y: TOP, height: dBase - TOP });
    band.append(s('title', {}, `Before the customer was created (${shortDate(since)})`));
    svg.append(band);
  }
  // Dates under the axis: every k-th day, ending with the last, as many
  // as the width has room for.
  const k = Math.max(1, Math.ceil(days.length / Math.max(2, Math.floor((W - LEFT - RIGHT) / LABEL_W))));
  for (let i = (days.length - 1) % k; i < days.length; i += k) {
    const x = LEFT + (i + 0.5) * step;
    const anchor = x - LABEL_W / 2 < LEFT ? 'start' : x + LABEL_W / 2 > W ? 'end' : 'middle';
    svg.append(s('line', { class: 'axis', x1: x, x2: x, y1: dBase, y2: dBase + 4 }),
      s('text', { class: 'tick', x: anchor === 'start' ? x - step / 2 : anchor === 'end' ? x + step / 2 : x, y: H - 4, 'text-anchor': anchor, 'data-date': days[i].date }, shortDate(days[i].date)));
  }
  days.forEach((d, i) => {
    const x = LEFT + i * step + (step - bw) / 2;
    const g = s('g', { 'data-date': d.date });
    g.append(s('title', {}, `${d.date}: ${num(d.used)} used, ${num(d.overage)} overage, ${count(d.denied, 'denied check')}`));
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
    h('span', {}, h('i', { class: 'denied' }), 'denied checks'),
    before > 0 ? h('span', {}, h('i', { class: 'before' }), 'before the customer was created') : null);
  const withData = days.filter((d) => d.used || d.overage || d.denied);
  const data = h('details', {}, h('summary', {}, `Data (${count(withData.length, 'day')} with activity)`),
    h('div', { class: 'scroll' }, h('table', {},
      h('thead', {}, h('tr', {}, ['Date', 'Used', 'Overage', 'Denied'].map((c, i) => h('th', { scope: 'col', class: i ? 'num' : null }, c)))),
      h('tbody', {}, withData.map((d) => h('tr', {}, h('td', {}, d.date), h('td', { class: 'num' }, num(d.used)),
        h('td', { class: 'num' }, num(d.overage)), h('td', { class: 'num' }, num(d.denied))))))));
  return h('div', { class: 'chart' }, legend, svg, data);
}
