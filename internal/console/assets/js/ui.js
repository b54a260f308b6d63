// ui.js: DOM helpers. Every value reaches the page as text (textContent or
// an attribute set with setAttribute): no HTML is ever parsed from data.

// h makes an element: attrs are attributes (event handlers are refused:
// listeners go through on), children are nodes or strings (as text).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';

// s makes an SVG element, as h does.
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (/^on/i.test(k)) throw new Error(`h: use on() for ${k}`);
    el.setAttribute(k, v === true ? '' : String(v));
  }
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function on(el, type, fn) { el.addEventListener(type, fn); return el; }

export function clear(el) { el.replaceChildren(); return el; }

const numFmt = new Intl.NumberFormat();

// num formats a number with the browser's thousands separators.
export const num = (n) => (n === null || n === undefined ? '—' : numFmt.format(n));

// count is n with its noun, singular for 1 alone: "1 day", "0 days",
// "1,000 credits". many is the plural when it is not one + "s".
export const count = (n, one, many = `${one}s`) => `${num(n)} ${n === 1 ? one : many}`;

const timeFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

// time shows an RFC 3339 time in the browser's zone, UTC on hover.
export function time(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h('span', {}, iso);
  const utc = d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  return h('time', { datetime: d.toISOString(), title: utc }, timeFmt.format(d));
}

// money formats cents in a currency.
// unitPrice formats a price per unit in micros (millionths of the
// currency's unit), with as many decimals as it needs, up to six: a
// thousand micros is $0.001, not $0.00.
export function unitPrice(micros, currency) {
  try {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency, maximumFractionDigits: 6 }).format(micros / 1e6);
  } catch {
    return `${micros / 1e6} ${currency}`;
  }
}

export function money(cents, currency) {
  try {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency }).format(cents / 100);
  } catch {
    return `${num(cents / 100)} ${currency}`;
  }
}

// table makes a table from column headers and rows of cells; a header
// {label, num} right-aligns its column, {label, block} stacks its cells'
// content under the label at phone width. Rows of cells become <tr>s whose
// cells carry their column's label (for the phone layout); a row given as
// {cells, attrs} gets attrs on its <tr>.
export function table(headers, rows, opts = {}) {
  const cols = headers.map((c) => (typeof c === 'string' ? { label: c } : c));
  const head = h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col', class: c.num ? 'num' : null }, c.label))));
  const body = h('tbody', {}, rows.map((r) => row(cols, r)));
  const t = h('table', { class: 'stack' }, opts.caption ? h('caption', { class: 'muted' }, opts.caption) : null, head, body);
  return h('div', { class: 'scroll' }, t);
}

export function row(cols, cells, attrs = {}) {
  if (cells instanceof Node) return cells;
  if (!Array.isArray(cells)) return row(cols, cells.cells, cells.attrs);
  const cls = (c) => [c?.num ? 'num' : '', c?.block ? 'block' : ''].join(' ').trim() || null;
  return h('tr', attrs, cells.map((c, i) => h('td', { 'data-label': cols[i]?.label ?? '', class: cls(cols[i]) }, h('span', { class: 'v' }, c))));
}

// errorBox shows an error: an API error's message is its problem detail,
// followed by the problem's field errors, if any.
export function errorBox(err) {
  const text = err?.message || String(err);
  const fields = err?.problem?.errors;
  return h('div', { class: 'error', role: 'alert' },
    fields?.length ? `${text}: ${fields.map((e) => `${e.field}: ${e.message}`).join('; ')}` : text);
}

export const notice = (text) => h('div', { class: 'notice', role: 'status' }, text);

// field wraps a control in its label.
export const field = (label, control, attrs = {}) => h('label', attrs, label, control);

// confirm asks in the page's <dialog> (never window.confirm) and resolves
// to true when the admin confirms; Escape or Cancel resolve to false.
export function confirm(title, text, okLabel = 'Confirm') {
  const dlg = document.getElementById('confirm');
  const ok = document.getElementById('confirm-ok');
  const cancel = document.getElementById('confirm-cancel');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  ok.textContent = okLabel;
  return new Promise((resolve) => {
    const done = (v) => {
      ok.removeEventListener('click', yes);
      cancel.removeEventListener('click', no);
      dlg.removeEventListener('close', no);
      if (dlg.open) dlg.close();
      resolve(v);
    };
    const yes = () => done(true);
    const no = () => done(false);
    ok.addEventListener('click', yes);
    cancel.addEventListener('click', no);
    dlg.addEventListener('close', no);
    dlg.showModal();
    cancel.focus();
  });
}
