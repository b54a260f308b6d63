// app.js: the console's router and pages. Routes live in the URL's fragment
// (#/customers, #/customers/<id>, ...), which never reaches a server; the
// token never appears in it.

import { api, ApiError, qs, enc, etag, token, setToken, clearToken, onUnauthorized } from './api.js';
import { h, on, clear, num, count, time, money, unitPrice, table, errorBox, notice, field, confirm } from './ui.js';
import { usageChart, dayList, daysBetween, shortDate } from './chart.js';

const mainEl = document.getElementById('main');
const nav = document.getElementById('nav');

// REFRESH_MS is how often the customer page reloads usage.
const REFRESH_MS = 3000;
// HISTORY_DAYS is how far back the customer page charts daily usage;
// CHART_MIN_DAYS the fewest days it charts, for a customer created lately.
const HISTORY_DAYS = 90;
const CHART_MIN_DAYS = 7;
const WINDOWS = ['second', 'minute', 'hour', 'day', 'week', 'month', 'total'];
// CAPACITY_WINDOWS are those a metric may declare a capacity for: a total,
// hard only, has none.
const CAPACITY_WINDOWS = WINDOWS.filter((w) => w !== 'total');
const MODES = ['hard', 'soft', 'elastic'];
// PER_SUBJECT is the per of a limit (or override) that counts each subject
// of the customer apart (an end user, an IP, an API key); without it, a
// limit counts the customer as a whole.
const PER_SUBJECT = 'subject';
// SUBJECT_PATTERN is what a subject must match (the API's rule, as an
// input's pattern: the v flag wants / and - escaped in a class).
const SUBJECT_PATTERN = '[A-Za-z0-9._:@\\/\\-]{1,128}';

// limitKey names a limit (or override) by metric and window, with
// "/subject" after them for one per subject.
const limitKey = (l) => `${l.metric}/${l.window}${l.per === PER_SUBJECT ? '/subject' : ''}`;

// windowLabel is a limit's window, labelled "per subject" when it counts
// each subject apart (customer-wide ones show the window alone), and the
// subject a window counts for, if any.
function windowLabel(window, per, subject) {
  if (per !== PER_SUBJECT) return window;
  return h('span', {}, window, ' ', h('span', { class: 'per' }, 'per subject'), subject ? [' ', h('code', { class: 'subject' }, subject)] : '');
}

// page is the current page's lifetime: its timers stop when it is left.
let page = { timers: [], alive: true };

function newPage() {
  page.alive = false;
  page.timers.forEach(clearInterval);
  page = { timers: [], alive: true };
  return page;
}

function every(ms, fn) {
  const p = page;
  const id = setInterval(() => { if (p.alive) fn(); }, ms);
  p.timers.push(id);
}

let signinReason = '';

onUnauthorized(() => {
  signinReason = 'Your token was refused (or your session ended). Sign in again.';
  go('#/signin');
});

function go(hash) {
  if (location.hash === hash) route(); else location.hash = hash;
}

function route() {
  const hash = location.hash || '#/customers';
  const [path, query = ''] = hash.slice(1).split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query);
  newPage();
  if (!token() && parts[0] !== 'signin') {
    signinReason = signinReason || 'Sign in with an admin token to use the console.';
    go('#/signin');
    return;
  }
  nav.hidden = !token();
  for (const a of nav.querySelectorAll('a')) {
    if (a.getAttribute('href') === `#/${parts[0]}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  // Each page draws into an element of its own, so that a page left while
  // it still loads draws nothing into the next one.
  const main = h('div');
  clear(mainEl).append(main);
  const pages = {
    signin: () => signinPage(main),
    customers: () => (parts[1] !== undefined ? customerPage(main, parts[1]) : customersPage(main, params)),
    plans: () => plansPage(main),
    metrics: () => metricsPage(main),
    webhooks: () => (parts[1] !== undefined ? webhookPage(main, parts[1]) : webhooksPage(main)),
    audit: () => auditPage(main, params),
  };
  const render = pages[parts[0]] || (() => main.append(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '#/customers' }, 'Customers'))));
  Promise.resolve(render()).catch(showError(main));
  mainEl.focus({ preventScroll: true });
}

// showError returns a handler that shows an error in el (a 401 has already
// sent the admin to sign-in).
const showError = (el) => (err) => {
  if (err instanceof ApiError && err.status === 401) return;
  if (!page.alive) return;
  el.append(errorBox(err));
};

// isStale tells a write refused because what it edits changed since the
// page loaded it (If-Match did not match: 412).
const isStale = (err) => err instanceof ApiError && err.status === 412;

// staleBox says so, of what ("this override"). Its caller closes the
// stale editor (saving it again would only meet another 412) and reloads
// what the message is under (above: "list above", say).
const staleBox = (what, err, above = 'list above') => errorBox(new Error(`Someone changed ${what} since you loaded it (412 Precondition Failed: ${err.message}). `
  + `Nothing was saved. The ${above} is reloaded with their change: check it, then edit again.`));

// section makes a card with a heading.
const section = (title, ...children) => h('section', { class: 'card', 'aria-label': title }, h('h2', {}, title), ...children);

// Sign-in.

function signinPage(main) {
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const msg = h('div');
  if (signinReason) msg.append(notice(signinReason));
  signinReason = '';
  const form = h('form', { class: 'signin card section', id: 'signin-form' },
    h('h1', {}, 'Sign in'),
    h('p', { class: 'sub' }, 'Paste an admin token. It stays in this tab only (session storage) and is sent to this quotad alone.'),
    field('Admin token', input), msg,
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Sign in')));
  on(form, 'submit', async (e) => {
    e.preventDefault();
    clear(msg);
    const t = input.value.trim();
    try {
      await api('GET', '/v1/customers?limit=1', { token: t });
      setToken(t);
      go('#/customers');
    } catch (err) {
      msg.append(errorBox(err.status === 401 ? new Error('That token is not valid.') : err.status === 403 ? new Error('That token is not an admin token.') : err));
    }
  });
  main.append(form);
  input.focus();
}

on(document.getElementById('signout'), 'click', () => {
  clearToken();
  signinReason = 'Signed out.';
  go('#/signin');
});

// Customers.

async function customersPage(main, params) {
  const q = params.get('q') || '';
  const plan = params.get('plan') || '';
  const cursor = params.get('cursor') || '';
  const back = params.getAll('back');
  const qIn = h('input', { id: 'q', type: 'search', value: q, placeholder: 'id or name' });
  const planSel = h('select', { id: 'plan' }, h('option', { value: '' }, 'All plans'));
  const form = h('form', { class: 'inline', role: 'search', id: 'customer-search' },
    field('Search by id or name', qIn), field('Plan', planSel), h('button', { type: 'submit' }, 'Search'));
  on(form, 'submit', (e) => {
    e.preventDefault();
    go(`#/customers${qs({ q: qIn.value.trim(), plan: planSel.value })}`);
  });
  const results = h('div', { id: 'customers' });
  main.append(h('h1', {}, 'Customers'), section('Find a customer', form, results));
  api('GET', '/v1/plans?limit=1000').then((r) => {
    for (const p of r.plans) planSel.append(h('option', { value: p.key, selected: p.key === plan }, `${p.name || p.key} (${p.key})`));
  }).catch(showError(results));
  const r = await api('GET', `/v1/customers${qs({ q, plan, cursor, limit: 25 })}`);
  if (r.customers.length === 0) {
    results.append(h('p', { class: 'muted' }, 'No customer matches.'));
  } else {
    results.append(table(['Id', 'Name', 'Plan', 'Status', 'Updated'], r.customers.map((c) => ({
      attrs: { 'data-customer': c.id },
      cells: [h('a', { href: `#/customers/${enc(c.id)}` }, c.id), c.name, c.plan, statusBadge(c), time(c.updated_at)],
    }))));
  }
  const pager = h('div', { class: 'pager' });
  const link = (label, cur, stack) => {
    const p = new URLSearchParams(qs({ q, plan, cursor: cur }).slice(1));
    for (const b of stack) p.append('back', b);
    return h('a', { href: `#/customers?${p}` }, label);
  };
  if (back.length) pager.append(link('← Previous', back[back.length - 1] === '-' ? '' : back[back.length - 1], back.slice(0, -1)));
  if (r.next_cursor) pager.append(link('Next →', r.next_cursor, [...back, cursor || '-']));
  results.append(pager);
}

// The customer page.

// SUSPENDED is the status of a customer whose checks are refused (403
// customer_suspended) until it is resumed; ACTIVE, of the others.
const SUSPENDED = 'suspended';
const ACTIVE = 'active';

// statusBadge is a customer's status, red when suspended (its reason on
// hover).
const statusBadge = (c) => h('span', {
  class: `badge ${c.status === SUSPENDED ? SUSPENDED : ACTIVE}`, 'data-status': c.status,
  title: c.status === SUSPENDED && c.status_reason ? c.status_reason : null,
}, c.status === SUSPENDED ? SUSPENDED : ACTIVE);

// due tells whether an instant has come: a trial or scheduled change then
// is (or is about to be) applied by quotad, and is not sent back.
const due = (iso) => new Date(iso).getTime() <= Date.now();

// customerSpec is the body of PUT /v1/customers/{id} that keeps c as it
// is: the PUT replaces the whole customer (a field left out goes back to
// its default: active, no trial, no scheduled change), so a write of one
// field sends all the others back. A scheduled change is sent as the
// instant it was given (period_end became one when it was written).
function customerSpec(c) {
  const body = { plan: c.plan, name: c.name, billing_anchor_day: c.billing_anchor_day, time_zone: c.time_zone,
    metadata: c.metadata, status: c.status };
  if (c.status === SUSPENDED && c.status_reason) body.status_reason = c.status_reason;
  if (c.trial && !due(c.trial.ends_at)) body.trial = { plan: c.trial.plan, ends_at: c.trial.ends_at };
  if (c.scheduled_change && !due(c.scheduled_change.at)) body.scheduled_change = { plan: c.scheduled_change.plan, at: c.scheduled_change.at };
  return body;
}

// planOptions are the options of a plan select: every plan but except's.
const planOptions = (plans, except, selected) => plans.filter((p) => p.key !== except)
  .map((p) => h('option', { value: p.key, selected: p.key === selected }, `${p.name || p.key} (${p.key})`));

// windowState is a usage entry's state, as a check would report it now:
// exceeded when no unit more can pass, overage (soft) or elastic above the
// limit, else ok.
function windowState(u, lim) {
  const mode = lim?.mode || 'hard';
  if (mode === 'soft') {
    const threshold = Math.floor((u.limit * (100 + (lim.overage_percent || 0))) / 100);
    if (u.used >= threshold) return 'exceeded';
    return u.used > u.limit ? 'overage' : 'ok';
  }
  if (mode === 'elastic') {
    if (lim.ceiling !== null && lim.ceiling !== undefined && u.used >= lim.ceiling) return 'exceeded';
    return u.used > u.limit ? 'elastic' : 'ok';
  }
  return u.used >= u.limit ? 'exceeded' : 'ok';
}

// perWindow says a window in words: "per day", "in total", and "per
// subject" after it for a subject's window.
const perWindow = (w) => `${w.window === 'total' ? 'in total' : `per ${w.window}`}${w.subject !== undefined ? ' per subject' : ''}`;

// upgradeAnswer shows the answer to a dry run of one unit: that it would
// pass, or the upgrade the denial names, or that it names none.
function upgradeAnswer(r, subject) {
  const what = `1 unit of ${r.metric}${subject ? ` for subject ${subject}` : ''}`;
  if (r.allowed) {
    return h('div', { class: 'upgrade', 'data-upgrade': '', 'data-allowed': 'true' },
      h('p', {}, `The next request (${what}) would pass now: no upgrade needed.`));
  }
  const denied = h('p', { class: 'muted' }, `The next request (${what}) would be denied: ${r.detail}`);
  const u = r.upgrade;
  if (!u) {
    return h('div', { class: 'upgrade', 'data-upgrade': '', 'data-allowed': 'false' }, denied,
      h('p', {}, h('strong', {}, 'No upgrade: '), 'no public plan would admit it (and only a denial by a hard limit names one).'));
  }
  // With a cost of one, every window that denies has nothing left, and the
  // upgrade's limit is the plan's on the first of them the answer lists.
  const w = r.limits.find((l) => l.state === 'exceeded');
  const where = w ? perWindow(w) : 'in the window that denied it';
  const price = `${money(u.price.amount_cents, u.price.currency)} per ${u.price.interval}`;
  return h('div', { class: 'upgrade', 'data-upgrade': u.plan, 'data-allowed': 'false' }, denied,
    h('p', {}, h('strong', {}, 'Upgrade: '), `${u.name} (${u.plan}, ${price}) would allow `,
      u.limit === null ? `any amount ${where} (no limit there).` : `${num(u.limit)} ${where}.`));
}

// usageBar is a window's usage against its limit; key names the window
// (with its subject, for a subject's).
function usageBar(u, state, key) {
  const pct = u.limit > 0 ? Math.min(100, (u.used / u.limit) * 100) : 100;
  const fill = h('span');
  fill.style.width = `${pct}%`; // CSSOM, which the CSP allows (no style attribute is parsed)
  return h('div', {
    class: 'bar', role: 'progressbar', 'aria-label': `${key} usage`, 'aria-valuemin': 0,
    'aria-valuemax': u.limit, 'aria-valuenow': u.used, 'aria-valuetext': `${num(u.used)} of ${num(u.limit)} (${state})`,
    'data-used': u.used, 'data-limit': u.limit,
  }, fill);
}

async function customerPage(main, id) {
  const head = h('div');
  const limitsBox = h('div', { id: 'limits' });
  const limitsMsg = h('div');
  const chartBox = h('div', { id: 'chart' });
  const overridesBox = h('div', { id: 'overrides' });
  const overrideForm = h('div', { id: 'override-form' });
  const planBox = h('div', { id: 'plan-change' });
  const statusBox = h('div', { id: 'status-section' });
  const trialBox = h('div', { id: 'trial-section' });
  const resetBox = h('div', { id: 'reset' });
  const statementBox = h('div', { id: 'statement' });
  const auditBox = h('div', { id: 'customer-audit' });
  const keysBox = h('div', { id: 'api-keys' });
  const featuresBox = h('div', { id: 'features-section' });
  const grantsBox = h('div', { id: 'grants-section' });
  const subjectBox = h('div', { id: 'subject-lookup' });
  const upgradeBox = h('div', { id: 'upgrade', 'aria-live': 'polite' });
  main.append(head,
    section('Limits and usage', h('p', { class: 'muted' }, `Refreshed every ${count(REFRESH_MS / 1000, 'second')}. `
      + 'A window with nothing left offers "Upgrade?": quotad answers which public plan would admit the next request.'),
    subjectBox, limitsMsg, limitsBox, upgradeBox),
    section('Daily usage', chartBox),
    section('Overrides', overridesBox, overrideForm),
    section('Features', featuresBox),
    section('Grants (top-ups)', grantsBox),
    h('div', { class: 'grid2' }, section('Status', statusBox), section('Trial', trialBox)),
    h('div', { class: 'grid2' }, section('Plan', planBox), section('Reset usage', resetBox)),
    section('API keys', keysBox),
    section('Statement', statementBox),
    section('Audit trail', auditBox));

  const [customer, metrics, plans] = await Promise.all([
    api('GET', `/v1/customers/${enc(id)}`),
    api('GET', '/v1/metrics?limit=1000').then((r) => r.metrics),
    api('GET', '/v1/plans?limit=1000').then((r) => r.plans),
  ]);
  let cust = customer;
  const renderHead = () => {
    clear(head).append(h('h1', { id: 'customer-name' }, cust.name || cust.id),
      h('p', { class: 'sub' }, 'Id ', h('code', { id: 'customer-id' }, cust.id), ' · plan ', h('strong', { id: 'customer-plan' }, cust.plan),
        cust.trial ? [' · trial of ', h('strong', {}, cust.trial.plan), ' until ', time(cust.trial.ends_at)] : '',
        ' · ', h('span', { id: 'customer-status' }, statusBadge(cust)), ' · updated ', time(cust.updated_at)));
  };
  renderHead();

  let lastLimits = [];
  // subject is the subject whose windows show beside the customer's ('' for
  // none): usage?subject= lists them after the customer's.
  let subject = '';
  const limitCells = (l) => [
    h('td', { 'data-label': 'Mode' }, l ? l.mode : ''),
    h('td', { 'data-label': 'Source' }, l ? l.source : '', l?.expires_at ? [' until ', time(l.expires_at)] : '')];
  const usageRow = (u, l) => {
    const key = limitKey({ ...u, per: u.subject !== undefined ? PER_SUBJECT : undefined });
    const name = u.subject !== undefined ? `${u.metric}/${u.window}/${u.subject}` : key;
    const state = windowState(u, l);
    return h('tr', { class: `state-${state}`, 'data-key': key, 'data-subject': u.subject },
      h('td', { 'data-label': 'Metric' }, u.metric),
      h('td', { 'data-label': 'Window' }, windowLabel(u.window, u.subject !== undefined ? PER_SUBJECT : '', u.subject)),
      h('td', { 'data-label': 'Limit', class: 'num' }, num(u.limit)),
      limitCells(l),
      h('td', { 'data-label': 'Usage' }, usageBar(u, state, name)),
      h('td', { 'data-label': 'Used', class: 'num' }, `${num(u.used)} / ${num(u.limit)}`),
      h('td', { 'data-label': 'Overage', class: 'num' }, num(u.overage)),
      h('td', { 'data-label': 'State' }, h('span', { class: `badge ${state}` }, state),
        // A window with nothing left: what would the server sell to admit the next request?
        state === 'exceeded' ? [' ', h('button', {
          type: 'button', class: 'link', 'data-action': 'upgrade', 'data-for': name, 'data-metric': u.metric, 'data-subject': u.subject,
          'aria-label': `Which plan would admit the next request of ${name}?`,
        }, 'Upgrade?')] : ''),
      // A total never resets: its reset_at is null.
      h('td', { 'data-label': 'Resets' }, u.reset_at === null ? 'never' : time(u.reset_at)));
  };
  // A limit per subject without a subject looked up has no usage of its
  // own: each subject counts apart.
  const perSubjectRow = (l) => h('tr', { class: 'per-subject', 'data-key': limitKey(l) },
    h('td', { 'data-label': 'Metric' }, l.metric),
    h('td', { 'data-label': 'Window' }, windowLabel(l.window, l.per)),
    h('td', { 'data-label': 'Limit', class: 'num' }, num(l.limit)),
    limitCells(l),
    h('td', { 'data-label': 'Usage', colspan: 5, class: 'muted' }, 'Each subject counts apart: look one up above.'));
  const loadLimits = async () => {
    const asked = subject;
    const [lim, usage] = await Promise.all([
      api('GET', `/v1/customers/${enc(id)}/limits`),
      api('GET', `/v1/customers/${enc(id)}/usage${qs({ subject: asked })}`),
    ]);
    if (!page.alive || asked !== subject) return;
    lastLimits = lim.limits;
    // In the order of the limits (the customer's before the one per
    // subject); a window whose limit changed between the two reads shows
    // at the end, and is gone at the next refresh.
    const usageOf = new Map(usage.usage.map((u) => [limitKey({ ...u, per: u.subject !== undefined ? PER_SUBJECT : undefined }), u]));
    const rows = [];
    for (const l of lim.limits) {
      const key = limitKey(l);
      const u = usageOf.get(key);
      usageOf.delete(key);
      if (u) rows.push(usageRow(u, l));
      else if (l.per === PER_SUBJECT) rows.push(perSubjectRow(l));
    }
    for (const u of usageOf.values()) rows.push(usageRow(u, undefined));
    const cols = ['Metric', 'Window', { label: 'Limit', num: true }, 'Mode', 'Source', 'Usage', { label: 'Used', num: true }, { label: 'Overage', num: true }, 'State', 'Resets'];
    // The table is drawn anew at every refresh: a focused Upgrade? button
    // is focused again in the new table, so that the keyboard stays there.
    const focused = limitsBox.contains(document.activeElement) ? document.activeElement.dataset.for : undefined;
    clear(limitsBox).append(rows.length ? table(cols, rows) : h('p', { class: 'muted' }, 'No limit applies to this customer.'));
    if (focused !== undefined) limitsBox.querySelector(`[data-action=upgrade][data-for="${CSS.escape(focused)}"]`)?.focus();
    clear(limitsMsg);
    showSubject(lim.limits.some((l) => l.per === PER_SUBJECT));
  };
  const refresh = () => loadLimits().catch((err) => { if (page.alive) clear(limitsMsg).append(errorBox(err)); });

  // Upgrade?: the server is asked, with a dry run of one unit of the
  // window's metric (nothing is counted), and its answer's upgrade is
  // shown: which plan to offer is the server's rule alone. One listener
  // for the table, which is drawn anew at every refresh.
  let asked = 0;
  const askUpgrade = async (metric, subj) => {
    const mine = ++asked;
    const body = { customer: id, metric, cost: 1, dry_run: true };
    // A subject's window is checked for the subject; a customer-wide one
    // for the subject looked up, if any (a metric limited per subject
    // needs one).
    if (subj ?? subject) body.subject = subj ?? subject;
    clear(upgradeBox).append(h('p', { class: 'muted' }, `Asking quotad about 1 unit of ${metric} (a dry run: nothing is counted)…`));
    let r;
    try {
      r = await api('POST', '/v1/check', { body });
    } catch (err) {
      // A denial is a 429 whose body is the check's answer.
      if (!(err instanceof ApiError && err.status === 429 && err.problem.allowed === false)) {
        if (mine === asked) { clear(upgradeBox); showError(upgradeBox)(err); }
        return;
      }
      r = err.problem;
    }
    if (page.alive && mine === asked) clear(upgradeBox).append(upgradeAnswer(r, body.subject));
  };
  on(limitsBox, 'click', (e) => {
    const b = e.target.closest('[data-action=upgrade]');
    if (b) askUpgrade(b.dataset.metric, b.dataset.subject);
  });

  // A subject's usage: its windows of the limits per subject, in the
  // table beside the customer's, refreshed with them.
  const subjectIn = h('input', {
    id: 'subject', type: 'text', maxlength: 128, pattern: SUBJECT_PATTERN, required: true, autocomplete: 'off', spellcheck: 'false',
    placeholder: 'user-42', title: 'Letters, digits and . _ : @ / - (at most 128)',
  });
  const subjectClear = h('button', { type: 'button', class: 'secondary', id: 'subject-clear', hidden: true }, 'Customer only');
  const subjectMsg = h('div', { id: 'subject-msg' });
  const subjectForm = h('form', { class: 'inline', role: 'search', id: 'subject-form' },
    field('A subject\'s usage (end user, IP, API key id)', subjectIn), h('button', { type: 'submit' }, 'Show its windows'), subjectClear);
  subjectBox.append(subjectForm, subjectMsg);
  // showSubject says whose windows the table shows, given whether any
  // limit of the customer counts per subject.
  const showSubject = (perSubject) => {
    subjectClear.hidden = !subject;
    const text = !perSubject
      ? 'No limit of this customer counts per subject: a subject\'s units count in the customer\'s windows only.'
      : subject ? ['Showing the windows of subject ', h('code', {}, subject), ' beside the customer\'s.'] : '';
    const key = JSON.stringify([perSubject, subject]);
    if (subjectMsg.dataset.shown !== key) {
      subjectMsg.dataset.shown = key;
      clear(subjectMsg).append(h('p', { class: 'muted' }, text));
    }
  };
  on(subjectForm, 'submit', async (e) => {
    e.preventDefault();
    subject = subjectIn.value.trim();
    await refresh();
  });
  on(subjectClear, 'click', async () => {
    subject = '';
    subjectIn.value = '';
    await refresh();
  });
  await refresh();
  every(REFRESH_MS, refresh);

  // Chart: the days since the customer was created, at least
  // CHART_MIN_DAYS (a young customer's few days would be a bar or two
  // across the page) and at most HISTORY_DAYS.
  const renderChart = async () => {
    const now = new Date();
    const created = new Date(cust.created_at);
    const age = daysBetween(created, now);
    const days = dayList(now, Math.min(HISTORY_DAYS, Math.max(CHART_MIN_DAYS, age)));
    const since = age < HISTORY_DAYS ? created.toISOString().slice(0, 10) : '';
    chartBox.append(h('p', { class: 'muted', id: 'chart-span' }, since
      ? `Since the customer was created on ${shortDate(since)}: ${count(age, 'day')}, today included (UTC days).`
      : `The last ${count(days.length, 'day')} (UTC days).`));
    const r = await api('GET', `/v1/customers/${enc(id)}/usage/history${qs({ from: days[0], to: days[days.length - 1] })}`);
    const names = [...new Set([...r.days.map((d) => d.metric), ...lastLimits.map((l) => l.metric)])].sort();
    if (names.length === 0) { chartBox.append(h('p', { class: 'muted' }, 'No usage recorded.')); return; }
    const sel = h('select', { id: 'chart-metric' }, names.map((m) => h('option', { value: m }, m)));
    const holder = h('div');
    const draw = () => {
      const by = new Map(r.days.filter((d) => d.metric === sel.value).map((d) => [d.date, d]));
      clear(holder).append(usageChart(sel.value, days.map((date) => by.get(date) || { date, used: 0, overage: 0, denied: 0 }), chartBox.clientWidth, since));
    };
    on(sel, 'change', draw);
    chartBox.append(h('div', { class: 'toolbar' }, field('Metric', sel)), holder);
    draw();
  };
  renderChart().catch(showError(chartBox));

  // Overrides.
  const metricKeys = metrics.map((m) => m.key);
  let shownOverrides = new Set();
  const loadOverrides = async () => {
    const r = await api('GET', `/v1/customers/${enc(id)}/overrides?limit=1000`);
    shownOverrides = new Set(r.overrides.map(limitKey));
    const cols = ['Metric', 'Window', { label: 'Limit', num: true }, 'Mode', 'Expires', 'Reason', 'Version', 'Actions'];
    const rows = r.overrides.map((o) => {
      const name = overrideName(o);
      const edit = h('button', { type: 'button', class: 'secondary', 'data-action': 'edit', 'aria-label': `Edit override ${name}` }, 'Edit');
      const del = h('button', { type: 'button', class: 'danger', 'data-action': 'delete', 'aria-label': `Delete override ${name}` }, 'Delete');
      on(edit, 'click', () => showOverrideForm(o));
      on(del, 'click', async () => {
        const what = o.per === PER_SUBJECT ? 'plan\'s limit per subject' : 'plan\'s limit';
        if (!await confirm('Delete override', `Delete the override of ${name} for ${cust.id}? The ${what} applies again.`, 'Delete')) return;
        try {
          await api('DELETE', overridePath(o.metric, o.window, o.per), { ifMatch: etag(o.version) });
          await afterWrite(`Override ${name} deleted.`);
        } catch (err) { overrideMsg(err); }
      });
      return h('tr', { 'data-key': limitKey(o) },
        h('td', { 'data-label': 'Metric' }, o.metric), h('td', { 'data-label': 'Window' }, windowLabel(o.window, o.per)),
        h('td', { 'data-label': 'Limit', class: 'num' }, num(o.limit)),
        h('td', { 'data-label': 'Mode' }, o.mode, o.mode === 'soft' ? ` +${o.overage_percent}%` : '', o.ceiling != null ? ` ceiling ${num(o.ceiling)}` : ''),
        h('td', { 'data-label': 'Expires' }, o.expires_at ? time(o.expires_at) : 'never', o.expired ? ' (expired)' : ''),
        h('td', { 'data-label': 'Reason' }, o.reason), h('td', { 'data-label': 'Version', class: 'num' }, num(o.version)),
        h('td', { 'data-label': 'Actions' }, edit, ' ', del));
    });
    clear(overridesBox).append(rows.length ? table(cols, rows) : h('p', { class: 'muted' }, 'No overrides: the plan\'s limits apply.'));
    const add = h('button', { type: 'button', id: 'add-override' }, 'Add override');
    on(add, 'click', () => showOverrideForm(null));
    overridesBox.append(h('div', { class: 'actions' }, add));
  };
  const msgBox = h('div', { id: 'override-msg' });
  overridesBox.after(msgBox);
  const overrideMsg = (err) => {
    clear(msgBox);
    if (isStale(err)) {
      clear(overrideForm);
      msgBox.append(staleBox('this override', err));
      loadOverrides().catch(showError(overridesBox));
    } else msgBox.append(errorBox(err));
  };
  // An override's address: metric and window, and ?per=subject for one
  // per subject.
  const overridePath = (m, w, per) => `/v1/customers/${enc(id)}/overrides/${enc(m)}/${enc(w)}${per === PER_SUBJECT ? qs({ per }) : ''}`;
  const overrideName = (o) => `${o.metric}/${o.window}${o.per === PER_SUBJECT ? ' per subject' : ''}`;
  const afterWrite = async (text) => {
    clear(overrideForm);
    await Promise.all([loadOverrides(), refresh(), loadAudit(true)]);
    clear(msgBox).append(notice(text));
  };
  const showOverrideForm = (o) => {
    clear(msgBox);
    const metricSel = h('select', { id: 'ov-metric', disabled: !!o }, metricKeys.map((m) => h('option', { value: m, selected: o?.metric === m }, m)));
    const windowSel = h('select', { id: 'ov-window', disabled: !!o }, WINDOWS.map((w) => h('option', { value: w, selected: (o?.window || 'day') === w }, w)));
    const perSel = h('select', { id: 'ov-per', disabled: !!o },
      h('option', { value: 'customer', selected: o?.per !== PER_SUBJECT }, 'customer-wide'),
      h('option', { value: PER_SUBJECT, selected: o?.per === PER_SUBJECT }, 'per subject'));
    const limit = h('input', { id: 'ov-limit', type: 'number', min: 0, step: 1, required: true, value: o ? o.limit : '' });
    const mode = h('select', { id: 'ov-mode' }, MODES.map((m) => h('option', { value: m, selected: (o?.mode || 'hard') === m }, m)));
    const pct = h('input', { id: 'ov-overage', type: 'number', min: 0, max: 1000, step: 1, value: o?.mode === 'soft' ? o.overage_percent : '' });
    const ceiling = h('input', { id: 'ov-ceiling', type: 'number', min: 0, step: 1, value: o?.ceiling ?? '' });
    const expires = h('input', { id: 'ov-expires', type: 'datetime-local', value: o?.expires_at ? localInput(o.expires_at) : '' });
    const reason = h('input', { id: 'ov-reason', type: 'text', maxlength: 500, value: o?.reason || '' });
    const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
    on(cancel, 'click', () => clear(overrideForm));
    const form = h('form', { id: 'override-editor' },
      h('h3', {}, o ? `Edit override ${overrideName(o)} (version ${o.version})` : 'Add an override'),
      h('div', { class: 'form-grid' },
        field('Metric', metricSel), field('Window', windowSel), field('Counts', perSel), field('Limit', limit), field('Mode', mode),
        field('Overage % (soft)', pct), field('Ceiling (elastic)', ceiling),
        field('Expires (your time zone; empty: never)', expires, { class: 'wide' }), field('Reason', reason, { class: 'wide' })),
      h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'ov-save' }, 'Save override'), cancel));
    on(form, 'submit', async (e) => {
      e.preventDefault();
      const body = { limit: Number(limit.value), mode: mode.value };
      if (mode.value === 'soft' && pct.value !== '') body.overage_percent = Number(pct.value);
      if (mode.value === 'elastic' && ceiling.value !== '') body.ceiling = Number(ceiling.value);
      if (expires.value) body.expires_at = new Date(expires.value).toISOString();
      if (reason.value) body.reason = reason.value;
      const m = o ? o.metric : metricSel.value, w = o ? o.window : windowSel.value;
      const per = o ? o.per : perSel.value;
      const name = overrideName({ metric: m, window: w, per });
      if (!o && shownOverrides.has(limitKey({ metric: m, window: w, per }))) {
        // PUT would replace it: the API has no "create only".
        overrideMsg(new Error(`${cust.id} has an override of ${name} already: edit it instead.`));
        return;
      }
      try {
        await api('PUT', overridePath(m, w, per), { body, ifMatch: o ? etag(o.version) : undefined });
        await afterWrite(`Override ${name} saved.`);
      } catch (err) { overrideMsg(err); }
    });
    clear(overrideForm).append(form);
    (o ? limit : metricSel).focus();
  };
  loadOverrides().catch(showError(overridesBox));

  // Status, trial, plan and scheduled change: fields of the customer,
  // written with PUT /v1/customers/{id} and If-Match. writeCustomer sends
  // the customer as the page shows it with changes made, into msg; a
  // change made meanwhile is a 412, shown, and the customer reloaded (its
  // sections drawn again as it is now). It resolves to whether it saved.
  const writeCustomer = async (changes, msg, saved) => {
    clear(msg);
    try {
      cust = await api('PUT', `/v1/customers/${enc(id)}`, { ifMatch: etag(cust.version), body: { ...customerSpec(cust), ...changes } });
    } catch (err) {
      if (!isStale(err)) { msg.append(errorBox(err)); return false; }
      try {
        cust = await api('GET', `/v1/customers/${enc(id)}`);
        renderCustomer();
      } catch (e) { showError(msg)(e); }
      msg.append(staleBox('this customer', err, 'customer above'));
      return false;
    }
    renderCustomer();
    msg.append(notice(saved(cust)));
    await Promise.all([refresh(), loadAudit(true)]);
    return true;
  };
  // A confirmation, then the write: for the changes that apply to the
  // next check (a scheduled change waits for its instant, and asks nothing).
  const confirmWrite = async (title, text, ok, changes, msg, saved) => {
    clear(msg);
    if (!await confirm(title, text, ok)) return false;
    return writeCustomer(changes, msg, saved);
  };

  // Status: suspend (with a reason, which refusals give) and resume.
  const statusBody = h('div');
  const statusMsg = h('div', { id: 'status-msg' });
  statusBox.append(statusBody, statusMsg);
  const renderStatus = () => {
    if (cust.status === SUSPENDED) {
      const resume = h('button', { type: 'button', id: 'resume' }, 'Resume');
      on(resume, 'click', () => confirmWrite('Resume customer', `Resume ${cust.id}? Its checks are allowed again from the next one.`, 'Resume',
        { status: ACTIVE, status_reason: null }, statusMsg, (c) => `${c.id} is active again.`));
      clear(statusBody).append(
        h('p', {}, statusBadge(cust), ' Checks, reservations and feature checks are refused (403 customer_suspended); nothing is counted. '
          + 'Reads, usage and statements still answer.'),
        h('p', {}, 'Reason: ', cust.status_reason ? h('strong', { id: 'status-reason' }, cust.status_reason) : h('span', { class: 'muted', id: 'status-reason' }, 'none given')),
        h('div', { class: 'actions' }, resume));
      return;
    }
    const reason = h('input', { id: 'suspend-reason', type: 'text', maxlength: 500, placeholder: 'card declined' });
    const form = h('form', { id: 'suspend-form' },
      h('p', {}, statusBadge(cust), ' Checks are allowed.'),
      field('Reason (the refusals give it)', reason),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'danger', id: 'suspend' }, 'Suspend…')));
    on(form, 'submit', (e) => {
      e.preventDefault();
      const why = reason.value.trim();
      confirmWrite('Suspend customer', `Suspend ${cust.id}? From its next check, its checks, reservations and feature checks are refused (403) `
        + 'until it is resumed; nothing is counted meanwhile.', 'Suspend',
      { status: SUSPENDED, status_reason: why || null }, statusMsg, (c) => `${c.id} is suspended.`);
    });
    clear(statusBody).append(form);
  };

  // Trial: a plan until an instant, billed nothing, then back on its own.
  const trialBody = h('div');
  const trialMsg = h('div', { id: 'trial-msg' });
  trialBox.append(trialBody, trialMsg);
  const renderTrial = () => {
    const t = cust.trial;
    if (t) {
      const cancel = h('button', { type: 'button', class: 'danger', id: 'trial-cancel' }, 'Cancel trial…');
      on(cancel, 'click', () => confirmWrite('Cancel trial', `End ${cust.id}'s trial of ${t.plan} now? It is back on ${cust.plan} from its next check.`, 'Cancel trial',
        { trial: null }, trialMsg, (c) => `Trial cancelled: ${c.id} is on ${c.plan}.`));
      clear(trialBody).append(
        h('p', { id: 'trial-now' }, 'On a trial of ', h('strong', { 'data-plan': t.plan }, t.plan), ' until ', time(t.ends_at),
          `, billed nothing for it; then back on ${cust.plan}.`),
        h('div', { class: 'actions' }, cancel));
      return;
    }
    const others = planOptions(plans, cust.plan);
    const planIn = h('select', { id: 'trial-plan', required: true }, others);
    const ends = h('input', { id: 'trial-ends', type: 'datetime-local', required: true });
    const form = h('form', { id: 'trial-form' },
      h('p', { class: 'muted' }, 'No trial. A trial puts the customer on another plan until it ends, billed nothing for it.'),
      h('div', { class: 'form-grid' }, field('Plan', planIn), field('Ends (your time zone)', ends, { class: 'wide' })),
      h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'trial-start', disabled: others.length === 0 }, 'Start trial…')));
    on(form, 'submit', (e) => {
      e.preventDefault();
      const at = new Date(ends.value);
      confirmWrite('Start trial', `Put ${cust.id} on ${planIn.value} until ${at.toLocaleString()}? It applies from its next check.`, 'Start trial',
        { trial: { plan: planIn.value, ends_at: at.toISOString() } }, trialMsg, (c) => `${c.id} is on a trial of ${c.trial.plan}.`);
    });
    clear(trialBody).append(form);
  };

  // Plan: a change now, or one scheduled at an instant or at the end of
  // the billing period.
  const planSel = h('select', { id: 'plan-select' });
  const planMsg = h('div', { id: 'plan-msg' });
  const planForm = h('form', { class: 'inline', id: 'plan-form' }, field('Plan', planSel), h('button', { type: 'submit' }, 'Change plan'));
  on(planForm, 'submit', (e) => {
    e.preventDefault();
    clear(planMsg);
    if (planSel.value === cust.plan) return;
    confirmWrite('Change plan', `Move ${cust.id} from ${cust.plan} to ${planSel.value}? It applies from the next check; counters are kept.`, 'Change plan',
      { plan: planSel.value }, planMsg, (c) => `Now on ${c.plan}.`);
  });
  const scheduleBody = h('div', { id: 'schedule' });
  const scheduleMsg = h('div', { id: 'schedule-msg' });
  planBox.append(planForm, planMsg, h('h3', {}, 'Scheduled change'), scheduleBody, scheduleMsg);
  const renderSchedule = () => {
    const sc = cust.scheduled_change;
    if (sc) {
      const cancel = h('button', { type: 'button', class: 'secondary', id: 'sc-cancel' }, 'Cancel scheduled change');
      on(cancel, 'click', () => writeCustomer({ scheduled_change: null }, scheduleMsg, (c) => `The change of ${c.id} to ${sc.plan} is cancelled.`));
      clear(scheduleBody).append(
        h('p', { id: 'schedule-now' }, 'Moves to ', h('strong', { 'data-plan': sc.plan }, sc.plan), ' on ', time(sc.at),
          cust.trial ? ' (or when the trial ends, if later).' : '.'),
        h('div', { class: 'actions' }, cancel));
      return;
    }
    const others = planOptions(plans, cust.plan);
    const planIn = h('select', { id: 'sc-plan', required: true }, others);
    const when = h('select', { id: 'sc-when' },
      h('option', { value: 'period_end' }, 'At the end of the billing period'), h('option', { value: 'at' }, 'At an instant'));
    const at = h('input', { id: 'sc-at', type: 'datetime-local', disabled: true });
    const atField = field('At (your time zone)', at, { hidden: true });
    on(when, 'change', () => {
      const instant = when.value === 'at';
      atField.hidden = !instant;
      at.disabled = !instant;
      at.required = instant;
    });
    const form = h('form', { id: 'schedule-form' },
      h('p', { class: 'muted' }, 'None. A scheduled change moves the customer to another plan at an instant; checks meet it from then on.'),
      h('div', { class: 'form-grid' }, field('Plan', planIn), field('When', when), atField),
      h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'sc-save', disabled: others.length === 0 }, 'Schedule change')));
    on(form, 'submit', (e) => {
      e.preventDefault();
      const instant = when.value === 'at' ? new Date(at.value).toISOString() : 'period_end';
      writeCustomer({ scheduled_change: { plan: planIn.value, at: instant } }, scheduleMsg, (c) => `${c.id} moves to ${c.scheduled_change.plan} on ${new Date(c.scheduled_change.at).toLocaleString()}.`);
    });
    clear(scheduleBody).append(form);
  };

  // renderCustomer draws what the page shows of the customer itself.
  const renderCustomer = () => {
    renderHead();
    renderStatus();
    renderTrial();
    clear(planSel).append(...planOptions(plans, undefined, cust.plan));
    renderSchedule();
  };
  renderCustomer();

  // Usage reset.
  const resetSel = h('select', { id: 'reset-metric' }, metricKeys.map((m) => h('option', { value: m }, m)));
  const resetMsg = h('div');
  const resetForm = h('form', { class: 'inline', id: 'reset-form' }, field('Metric', resetSel), h('button', { type: 'submit', class: 'danger' }, 'Reset usage…'));
  on(resetForm, 'submit', async (e) => {
    e.preventDefault();
    clear(resetMsg);
    const m = resetSel.value;
    if (!await confirm('Reset usage', `Zero the current windows of ${m} for ${cust.id}? Every window of the metric, short and long, its subjects' included, starts again from 0. This cannot be undone.`, 'Reset usage')) return;
    try {
      await api('DELETE', `/v1/customers/${enc(id)}/usage/${enc(m)}`);
      resetMsg.append(notice(`Usage of ${m} reset.`));
      await Promise.all([refresh(), loadAudit(true)]);
    } catch (err) { resetMsg.append(errorBox(err)); }
  });
  resetBox.append(resetForm, resetMsg);

  // Features and grants.
  featuresSection(featuresBox, id, () => cust, () => loadAudit(true));
  grantsSection(grantsBox, id, () => cust, metricKeys, () => loadAudit(true));

  // API keys.
  keysSection(keysBox, id, () => cust, () => loadAudit(true));

  // Statement.
  const now = new Date();
  const period = h('input', { id: 'period', type: 'month', value: `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}`, required: true });
  const stOut = h('div');
  const stForm = h('form', { class: 'inline', id: 'statement-form' }, field('Period (month)', period), h('button', { type: 'submit' }, 'Show statement'));
  const loadStatement = async () => {
    clear(stOut);
    try {
      const st = await api('GET', `/v1/customers/${enc(id)}/statement${qs({ period: period.value })}`);
      stOut.append(h('p', { class: 'muted' }, 'From ', time(st.period.start), ' to ', time(st.period.end)),
        table(['Kind', 'Plan', 'Metric', { label: 'Quantity', num: true }, { label: 'Unit price', num: true }, { label: 'Amount', num: true }, 'Description'],
          st.lines.map((l) => [l.kind, l.plan, l.metric || '', num(l.quantity), l.unit_price_micros == null ? '' : unitPrice(l.unit_price_micros, st.currency),
            money(l.amount_cents, st.currency), l.description])),
        h('p', {}, h('strong', {}, 'Total '), h('span', { id: 'statement-total' }, money(st.total_cents, st.currency))));
    } catch (err) { showError(stOut)(err); }
  };
  on(stForm, 'submit', (e) => { e.preventDefault(); loadStatement(); });
  statementBox.append(stForm, stOut);
  loadStatement();

  // Audit trail.
  let auditCursor = '';
  const auditList = h('div');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Older events');
  async function loadAudit(reset) {
    if (reset) { auditCursor = ''; clear(auditList); }
    const r = await api('GET', `/v1/audit${qs({ customer: id, limit: 20, cursor: auditCursor })}`);
    auditList.append(auditTable(r.events));
    auditCursor = r.next_cursor || '';
    more.hidden = !auditCursor;
  }
  on(more, 'click', () => loadAudit(false).catch(showError(auditBox)));
  auditBox.append(auditList, more);
  loadAudit(true).catch(showError(auditBox));
}

// keysSection draws a customer's live API keys into box: issue one (its
// key shown this once, in the page only: never stored, never in the URL)
// and revoke one after the page's own confirmation. customer returns the
// customer as the page shows it; written reloads the audit trail.
function keysSection(box, id, customer, written) {
  const p = page;
  const list = h('div', { id: 'keys' });
  const msg = h('div', { id: 'key-msg' });
  const issued = h('div', { id: 'key-issued' });
  const name = h('input', { id: 'key-name', type: 'text', maxlength: 100, autocomplete: 'off', spellcheck: 'false' });
  const expires = h('input', { id: 'key-expires', type: 'datetime-local' });
  const form = h('form', { class: 'inline', id: 'key-form' },
    field('Name', name), field('Expires (your time zone; empty: never)', expires),
    h('button', { type: 'submit', id: 'key-issue' }, 'Issue key'));
  box.append(h('p', { class: 'muted' }, 'Keys a backend or gateway sends as ', h('code', {}, 'api_key'), ' in place of the customer. quotad keeps a hash: a key is shown once, when it is issued.'),
    list, msg, issued, h('h3', {}, 'Issue a key'), form);

  const showMsg = (err) => clear(msg).append(errorBox(err));

  const load = async () => {
    const r = await api('GET', `/v1/customers/${enc(id)}/keys?limit=1000`);
    if (!p.alive) return;
    const now = Date.now();
    const cols = ['Name', 'Prefix', 'Created', 'Expires', 'Last used', 'Actions'];
    const rows = r.keys.map((k) => {
      const label = k.name ? `${k.name} (${k.prefix}…)` : `${k.prefix}…`;
      const revoke = h('button', { type: 'button', class: 'danger', 'data-action': 'revoke', 'aria-label': `Revoke key ${label}` }, 'Revoke');
      on(revoke, 'click', async () => {
        clear(msg);
        if (!await confirm('Revoke API key', `Revoke the key ${label} of ${customer().id}? Checks with it are refused (403 invalid_api_key) from now on. This cannot be undone.`, 'Revoke key')) return;
        try {
          await api('DELETE', `/v1/keys/${enc(k.id)}`);
          if (issued.dataset.keyId === k.id) { clear(issued); delete issued.dataset.keyId; }
          await Promise.all([load(), written()]);
          clear(msg).append(notice(`Key ${label} revoked.`));
        } catch (err) { showMsg(err); }
      });
      const expired = k.expires_at && new Date(k.expires_at).getTime() <= now;
      return h('tr', { 'data-key-id': k.id },
        h('td', { 'data-label': 'Name', class: 'key-name' }, k.name || h('span', { class: 'muted' }, '—')),
        h('td', { 'data-label': 'Prefix' }, h('code', {}, `${k.prefix}…`)),
        h('td', { 'data-label': 'Created' }, time(k.created_at)),
        h('td', { 'data-label': 'Expires' }, k.expires_at ? time(k.expires_at) : 'never', expired ? ' (expired)' : ''),
        h('td', { 'data-label': 'Last used' }, k.last_used_at ? time(k.last_used_at) : 'never'),
        h('td', { 'data-label': 'Actions' }, revoke));
    });
    clear(list).append(...(rows.length
      ? [table(cols, rows), h('p', { class: 'muted' }, 'Last used is recorded to the minute, in the background: it may lag by a minute or so.')]
      : [h('p', { class: 'muted' }, 'No live API keys.')]));
    if (r.next_cursor) list.append(h('p', { class: 'muted' }, 'Only the first 1,000 keys are shown.'));
  };

  // showIssued shows the new key, this once: in a read-only field, never
  // in storage or the URL; leaving or reloading the page forgets it.
  const showIssued = (k) => {
    const label = k.name ? `${k.name} (${k.prefix}…)` : `${k.prefix}…`;
    const value = h('input', { id: 'new-key', type: 'text', readonly: true, autocomplete: 'off', spellcheck: 'false', class: 'secret' });
    value.value = k.key;
    on(value, 'focus', () => value.select());
    const copy = h('button', { type: 'button', class: 'secondary', id: 'new-key-copy' }, 'Copy');
    const copied = h('span', { class: 'muted', role: 'status' });
    on(copy, 'click', async () => {
      value.focus();
      value.select();
      try {
        await navigator.clipboard.writeText(value.value);
        copied.textContent = 'Copied.';
      } catch {
        copied.textContent = 'Selected: copy it with Ctrl+C (⌘C).';
      }
    });
    const done = h('button', { type: 'button', id: 'new-key-done' }, 'I have copied it');
    on(done, 'click', () => { clear(issued); delete issued.dataset.keyId; name.focus(); });
    issued.dataset.keyId = k.id;
    clear(issued).append(h('div', { class: 'issued', role: 'region', 'aria-label': 'New API key' },
      h('p', {}, h('strong', {}, `Key ${label} issued to ${customer().id}. `),
        'It is shown this once: copy it now. quotad keeps only its hash, and the key is gone from this page when you leave or reload it.'),
      h('div', { class: 'toolbar' }, field('New key (shown once)', value, { class: 'wide-field' }), copy, done, copied)));
    value.focus();
  };

  on(form, 'submit', async (e) => {
    e.preventDefault();
    clear(msg);
    const body = {};
    if (name.value) body.name = name.value;
    if (expires.value) body.expires_at = new Date(expires.value).toISOString();
    try {
      const k = await api('POST', `/v1/customers/${enc(id)}/keys`, { body });
      name.value = '';
      expires.value = '';
      showIssued(k);
      await Promise.all([load(), written()]);
    } catch (err) { showMsg(err); }
  });

  load().catch(showError(list));
}

// FEATURE_KEY is what a feature's key must match (a metric's key: the
// API's rule, as an input's pattern).
const FEATURE_KEY = '[a-z0-9][a-z0-9_.\\-]{0,62}';
// FEATURE_TYPES are the kinds of value a feature takes.
const FEATURE_TYPES = ['boolean', 'integer', 'text'];
const featureType = (v) => (typeof v === 'boolean' ? 'boolean' : typeof v === 'number' ? 'integer' : 'text');

// featureValue shows a feature's value: true or false, a number, or a
// text in quotes (so that "10" and 10 do not read alike).
function featureValue(v) {
  if (v === undefined) return h('span', { class: 'muted' }, '—');
  return h('code', { class: 'feature-value' }, typeof v === 'number' ? num(v) : typeof v === 'string' ? JSON.stringify(v) : String(v));
}

// featuresSection draws a customer's features into box: what it has now
// (GET …/features: its plan's and its live overrides'), and its overrides,
// expired ones marked, to set (PUT …/features/{key}, with If-Match when it
// edits one) and remove (DELETE, after the page's own confirmation).
// customer returns the customer as the page shows it; written reloads the
// audit trail.
function featuresSection(box, id, customer, written) {
  const p = page;
  const list = h('div', { id: 'features' });
  const msg = h('div', { id: 'feature-msg' });
  const editor = h('div', { id: 'feature-form' });
  box.append(h('p', { class: 'muted' }, 'What the customer\'s plan grants, and its overrides: an override replaces the plan\'s value '
    + '(or grants a feature the plan does not name) until it expires. A feature nothing grants is false.'), list, msg, editor);
  let overrides = new Map();

  const featurePath = (key) => `/v1/customers/${enc(id)}/features/${enc(key)}`;
  const showMsg = (err) => {
    clear(msg);
    if (isStale(err)) {
      clear(editor);
      msg.append(staleBox('this feature\'s override', err));
      load().catch(showError(list));
    } else msg.append(errorBox(err));
  };
  const afterWrite = async (text) => {
    clear(editor);
    await Promise.all([load(), written()]);
    clear(msg).append(notice(text));
  };

  const load = async () => {
    const r = await api('GET', `/v1/customers/${enc(id)}/features`);
    if (!p.alive) return;
    overrides = new Map(r.overrides.map((o) => [o.feature, o]));
    const keys = [...new Set([...Object.keys(r.features), ...overrides.keys()])].sort();
    const cols = ['Feature', 'Value now', 'From', 'Override', 'Expires', 'Reason', 'Actions'];
    const rows = keys.map((key) => {
      const o = overrides.get(key);
      const has = Object.hasOwn(r.features, key);
      const from = o && !o.expired ? 'override' : has ? 'plan' : 'nothing grants it';
      const actions = [];
      if (o) {
        const edit = h('button', { type: 'button', class: 'secondary', 'data-action': 'edit', 'aria-label': `Edit the override of ${key}` }, 'Edit');
        const del = h('button', { type: 'button', class: 'danger', 'data-action': 'delete', 'aria-label': `Remove the override of ${key}` }, 'Remove');
        on(edit, 'click', () => showForm(key, o, r.features[key]));
        on(del, 'click', async () => {
          clear(msg);
          if (!await confirm('Remove feature override', `Remove the override of ${key} for ${customer().id}? The plan's value applies again (false if the plan does not name it).`, 'Remove')) return;
          try {
            await api('DELETE', featurePath(key), { ifMatch: etag(o.version) });
            await afterWrite(`Override of ${key} removed.`);
          } catch (err) { showMsg(err); }
        });
        actions.push(edit, ' ', del);
      } else {
        const add = h('button', { type: 'button', class: 'secondary', 'data-action': 'override', 'aria-label': `Override ${key}` }, 'Override');
        on(add, 'click', () => showForm(key, null, r.features[key]));
        actions.push(add);
      }
      return h('tr', { 'data-feature': key },
        h('td', { 'data-label': 'Feature' }, key),
        h('td', { 'data-label': 'Value now' }, has ? featureValue(r.features[key]) : h('code', { class: 'feature-value muted' }, 'false')),
        h('td', { 'data-label': 'From' }, from),
        h('td', { 'data-label': 'Override' }, o ? featureValue(o.value) : h('span', { class: 'muted' }, '—')),
        h('td', { 'data-label': 'Expires' }, o ? [o.expires_at ? time(o.expires_at) : 'never', o.expired ? ' (expired)' : ''] : ''),
        h('td', { 'data-label': 'Reason' }, o ? o.reason : ''),
        h('td', { 'data-label': 'Actions' }, actions));
    });
    const add = h('button', { type: 'button', id: 'add-feature' }, 'Override a feature');
    on(add, 'click', () => showForm('', null, undefined));
    clear(list).append(rows.length ? table(cols, rows) : h('p', { class: 'muted' }, 'Neither the plan nor an override grants a feature.'),
      h('div', { class: 'actions' }, add));
  };

  // showForm sets key's override: o, the override to edit (null for a new
  // one); now, the value the customer has now (to start from).
  const showForm = (key, o, now) => {
    clear(msg);
    const start = o ? o.value : now;
    const keyIn = h('input', { id: 'ft-key', type: 'text', required: true, pattern: FEATURE_KEY, maxlength: 63, value: key,
      disabled: !!key, autocomplete: 'off', spellcheck: 'false', placeholder: 'sso', title: 'Lowercase letters, digits and _ . - (at most 63)' });
    const typeSel = h('select', { id: 'ft-type' }, FEATURE_TYPES.map((t) => h('option', { value: t, selected: featureType(start ?? true) === t }, t)));
    const valueBox = h('div', { class: 'value-field' });
    let valueIn;
    // The value's control follows its type: true/false, a whole number, a text.
    const drawValue = () => {
      const t = typeSel.value, same = featureType(start ?? true) === t && start !== undefined;
      if (t === 'boolean') {
        valueIn = h('select', { id: 'ft-value' }, ['true', 'false'].map((v) => h('option', { value: v, selected: same ? String(start) === v : v === 'true' }, v)));
      } else if (t === 'integer') {
        valueIn = h('input', { id: 'ft-value', type: 'number', step: 1, min: -9007199254740991, max: 9007199254740991, required: true, value: same ? start : '' });
      } else {
        valueIn = h('input', { id: 'ft-value', type: 'text', minlength: 1, maxlength: 256, required: true, value: same ? start : '' });
      }
      clear(valueBox).append(field('Value', valueIn));
    };
    on(typeSel, 'change', drawValue);
    drawValue();
    const expires = h('input', { id: 'ft-expires', type: 'datetime-local', value: o?.expires_at && !o.expired ? localInput(o.expires_at) : '' });
    const reason = h('input', { id: 'ft-reason', type: 'text', maxlength: 500, value: o?.reason || '' });
    const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
    on(cancel, 'click', () => clear(editor));
    const form = h('form', { id: 'feature-editor' },
      h('h3', {}, o ? `Edit the override of ${key} (version ${o.version})` : key ? `Override ${key}` : 'Override a feature'),
      h('div', { class: 'form-grid' }, field('Feature', keyIn), field('Type', typeSel), valueBox,
        field('Expires (your time zone; empty: never)', expires, { class: 'wide' }), field('Reason', reason, { class: 'wide' })),
      h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'ft-save' }, 'Save override'), cancel));
    on(form, 'submit', async (e) => {
      e.preventDefault();
      const k = key || keyIn.value.trim();
      const t = typeSel.value;
      const body = { value: t === 'boolean' ? valueIn.value === 'true' : t === 'integer' ? Number(valueIn.value) : valueIn.value };
      if (expires.value) body.expires_at = new Date(expires.value).toISOString();
      if (reason.value) body.reason = reason.value;
      if (!o && overrides.has(k)) {
        // PUT would replace it: the API has no "create only".
        showMsg(new Error(`${customer().id} has an override of ${k} already: edit it instead.`));
        return;
      }
      try {
        await api('PUT', featurePath(k), { body, ifMatch: o ? etag(o.version) : undefined });
        await afterWrite(`Override of ${k} saved.`);
      } catch (err) { showMsg(err); }
    });
    clear(editor).append(form);
    (key ? valueIn : keyIn).focus();
  };

  load().catch(showError(list));
}

// requestID is a fresh request id: a creation sent twice under one (a
// double click, a retry) makes one thing.
function requestID() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return `console-${[...b].map((x) => x.toString(16).padStart(2, '0')).join('')}`;
}

// grantState is where a grant stands at now: voided, used up, expired or
// live (checks may draw on it).
function grantState(g, now) {
  if (g.voided_at) return 'voided';
  if (g.remaining === 0) return 'used up';
  if (g.expires_at && new Date(g.expires_at).getTime() <= now) return 'expired';
  return 'live';
}

// grantsSection draws a customer's grants into box, every one (GET
// …/grants?all=true), in drawing order, reloaded with the usage; issues one
// (POST …/grants, under a request id kept until it is issued, so that a
// double click or a retry grants once) and voids one (DELETE
// /v1/grants/{id}, after the page's own confirmation). customer returns
// the customer as the page shows it; metrics are the metrics' keys;
// written reloads the audit trail.
function grantsSection(box, id, customer, metrics, written) {
  const p = page;
  const list = h('div', { id: 'grants' });
  const msg = h('div', { id: 'grant-msg' });
  const metricSel = h('select', { id: 'grant-metric' }, metrics.map((m) => h('option', { value: m }, m)));
  const amount = h('input', { id: 'grant-amount', type: 'number', min: 1, max: 9007199254740991, step: 1, required: true });
  const expires = h('input', { id: 'grant-expires', type: 'datetime-local' });
  const priority = h('input', { id: 'grant-priority', type: 'number', min: 0, max: 1000, step: 1, placeholder: '0' });
  const reason = h('input', { id: 'grant-reason', type: 'text', maxlength: 500 });
  const issue = h('button', { type: 'submit', id: 'grant-issue' }, 'Issue grant');
  const form = h('form', { id: 'grant-form' },
    h('div', { class: 'form-grid' }, field('Metric', metricSel), field('Amount (units)', amount),
      field('Priority (0 is drawn first)', priority), field('Expires (your time zone; empty: never)', expires, { class: 'wide' }),
      field('Reason', reason, { class: 'wide' })),
    h('div', { class: 'actions' }, issue));
  box.append(h('p', { class: 'muted' }, 'Units beyond the plan: checks that a hard limit of a day or longer denies draw on the live grants '
    + 'of their metric, lowest priority first, then the soonest to expire.'), list, msg, h('h3', {}, 'Issue a grant'), form);
  let rid = requestID();
  let shown = '';

  const load = async () => {
    const r = await api('GET', `/v1/customers/${enc(id)}/grants?all=true`);
    if (!p.alive) return;
    const now = Date.now();
    const states = r.grants.map((g) => grantState(g, now));
    // Redrawn only when something changed: a focused Void button stays.
    const key = JSON.stringify([r.grants, states]);
    if (key === shown) return;
    shown = key;
    const cols = ['Id', 'Metric', { label: 'Amount', num: true }, { label: 'Remaining', num: true }, { label: 'Priority', num: true },
      'Expires', 'Reason', 'State', 'Actions'];
    const rows = r.grants.map((g, i) => {
      const state = states[i];
      let action = '';
      if (state === 'live') {
        action = h('button', { type: 'button', class: 'danger', 'data-action': 'void', 'aria-label': `Void grant ${g.id}` }, 'Void');
        on(action, 'click', async () => {
          clear(msg);
          if (!await confirm('Void grant', `Void what remains of grant ${g.id} of ${customer().id}: ${count(g.remaining, 'unit')} of ${g.metric}? `
            + 'Checks no longer draw on it; what was drawn stays drawn. This cannot be undone.', 'Void grant')) return;
          try {
            await api('DELETE', `/v1/grants/${enc(g.id)}`);
            await Promise.all([load(), written()]);
            clear(msg).append(notice(`Grant ${g.id} voided.`));
          } catch (err) { clear(msg).append(errorBox(err)); }
        });
      }
      return h('tr', { 'data-grant-id': g.id, class: state === 'live' ? null : 'muted' },
        h('td', { 'data-label': 'Id' }, h('code', {}, g.id)),
        h('td', { 'data-label': 'Metric' }, g.metric),
        h('td', { 'data-label': 'Amount', class: 'num' }, num(g.amount)),
        h('td', { 'data-label': 'Remaining', class: 'num' }, num(g.remaining)),
        h('td', { 'data-label': 'Priority', class: 'num' }, num(g.priority)),
        h('td', { 'data-label': 'Expires' }, g.expires_at ? time(g.expires_at) : 'never'),
        h('td', { 'data-label': 'Reason' }, g.reason),
        h('td', { 'data-label': 'State' }, h('span', { class: `badge${state === 'live' ? ' ok' : ''}` }, state),
          g.voided_at ? [' ', time(g.voided_at)] : ''),
        h('td', { 'data-label': 'Actions' }, action));
    });
    clear(list).append(rows.length ? table(cols, rows) : h('p', { class: 'muted' }, 'No grants.'));
  };

  on(form, 'submit', async (e) => {
    e.preventDefault();
    clear(msg);
    const body = { metric: metricSel.value, amount: Number(amount.value), request_id: rid };
    if (expires.value) body.expires_at = new Date(expires.value).toISOString();
    if (priority.value !== '') body.priority = Number(priority.value);
    if (reason.value) body.reason = reason.value;
    issue.disabled = true;
    try {
      const g = await api('POST', `/v1/customers/${enc(id)}/grants`, { body });
      // Issued: the next grant is another request.
      if (body.request_id === rid) {
        rid = requestID();
        amount.value = '';
        expires.value = '';
        priority.value = '';
        reason.value = '';
      }
      await Promise.all([load(), written()]);
      clear(msg).append(notice(`Granted ${count(g.amount, 'unit')} of ${g.metric} to ${customer().id} (${g.id}).`));
    } catch (err) {
      // A 409: the request id made another grant (sent before, its answer
      // lost, then changed): the list shows it; a new one is another request.
      if (err instanceof ApiError && err.status === 409) {
        rid = requestID();
        load().catch(showError(list));
      }
      clear(msg).append(errorBox(err));
    } finally {
      issue.disabled = false;
    }
  });

  const refresh = () => load().catch((err) => { if (p.alive) clear(msg).append(errorBox(err)); });
  refresh();
  every(REFRESH_MS, refresh);
}

// localInput turns an RFC 3339 time into a datetime-local value in the
// browser's zone.
function localInput(iso) {
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

const json = (v) => (v === null || v === undefined ? h('span', { class: 'muted' }, '—') : h('pre', { class: 'json' }, JSON.stringify(v, null, 1)));

// IGNORED are the fields every write changes: not worth a line in a change.
const IGNORED = new Set(['version', 'updated_at', 'created_at']);

// changes lists what an audit event changed, field by field, with both
// documents in full behind a disclosure.
function changes(e) {
  const before = e.before && typeof e.before === 'object' ? e.before : {};
  const after = e.after && typeof e.after === 'object' ? e.after : {};
  // A creation lists the fields it set; an update or deletion, what changed.
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((k) => !IGNORED.has(k) && (e.before || after[k] !== null)).sort();
  const short = (v) => (v === undefined ? '—' : JSON.stringify(v));
  const items = keys.filter((k) => short(before[k]) !== short(after[k])).map((k) => h('li', {},
    h('code', {}, k), ': ', e.before ? [h('code', {}, short(before[k])), ' → '] : '', h('code', {}, e.after ? short(after[k]) : 'deleted')));
  return [items.length ? h('ul', { class: 'changes' }, items) : h('span', { class: 'muted' }, e.after ? 'no field changed' : 'deleted'),
    h('details', {}, h('summary', {}, 'Before and after'), h('div', { class: 'muted' }, 'Before'), json(e.before), h('div', { class: 'muted' }, 'After'), json(e.after))];
}

function auditTable(events) {
  if (!events.length) return h('p', { class: 'muted' }, 'No events.');
  return table(['When', 'Actor', 'Action', 'Resource', { label: 'Changes', block: true }],
    events.map((e) => [time(e.at), e.actor, e.action, e.resource, changes(e)]));
}

// Plans.

async function plansPage(main) {
  main.append(h('h1', {}, 'Plans'));
  const r = await api('GET', '/v1/plans?limit=1000');
  if (!r.plans.length) main.append(h('p', { class: 'muted' }, 'No plans.'));
  for (const p of r.plans) main.append(planCard(p));
}

// planSpec is the body of PUT /v1/plans/{key} that keeps p as it is: the
// PUT replaces the whole plan, so a write of one field sends all the
// others back as GET gave them (its limits included, which the API takes
// back unchanged).
const planSpec = (p) => ({ name: p.name, description: p.description, public: p.public, price: p.price, limits: p.limits, features: p.features });

// publicBadge says whether a plan is offered as the upgrade of a check a
// hard limit denies.
const publicBadge = (p) => h('span', { class: `badge${p.public ? ' public' : ''}`, 'data-public': String(p.public) }, p.public ? 'public' : 'not public');

// planCard draws a plan: its price, whether it is public, its limits, the
// form that makes it public or not, and its versions; message, if any, is
// shown under the form. A save draws the card again in place, from the
// plan the API answers.
function planCard(p, message) {
  const label = `${p.name || p.key} (${p.key})`;
  const price = p.price ? `${money(p.price.amount_cents, p.price.currency)} per ${p.price.interval}` : 'no price';
  const pub = h('input', { id: `pl-public-${p.key}`, type: 'checkbox', checked: p.public });
  const save = h('button', { type: 'submit', class: 'secondary', 'data-action': 'save-public', disabled: true }, 'Save');
  const msg = h('div', { class: 'plan-msg' }, message);
  // Save is offered once the box says something the plan does not.
  on(pub, 'change', () => { save.disabled = pub.checked === p.public; });
  const form = h('form', { class: 'inline plan-public' },
    h('label', { class: 'check' }, pub, 'Public: offered as an upgrade in denials'), save);
  const card = section(label,
    h('p', { class: 'sub' }, price, ' · ', publicBadge(p), p.description ? ` · ${p.description}` : '', ' · latest version ', num(p.latest_version)),
    p.limits.length ? table(['Metric', 'Window', { label: 'Limit', num: true }, 'Mode', 'Overage', 'Ceiling', 'Algorithm'],
      p.limits.map((l) => ({
        attrs: { 'data-key': limitKey(l) },
        cells: [l.metric, windowLabel(l.window, l.per), num(l.limit), l.mode,
          l.mode === 'soft' ? `${l.overage_percent}%${l.overage_price_micros != null ? ` at ${unitPrice(l.overage_price_micros, p.price?.currency || 'USD')} / unit` : ''}` : '',
          l.ceiling != null ? num(l.ceiling) : '', l.algorithm || ''],
      }))) : h('p', { class: 'muted' }, 'No limits.'),
    form, msg);
  card.dataset.plan = p.key;
  // The whole plan goes back with the box's value, under If-Match: a
  // change made meanwhile is a 412, and the card is drawn again as the
  // plan is now. A change of public alone makes no new version.
  on(form, 'submit', async (e) => {
    e.preventDefault();
    clear(msg);
    save.disabled = true;
    let saved;
    try {
      saved = await api('PUT', `/v1/plans/${enc(p.key)}`, { body: { ...planSpec(p), public: pub.checked }, ifMatch: etag(p.version) });
    } catch (err) {
      if (!isStale(err)) {
        save.disabled = false;
        showError(msg)(err);
        return;
      }
      try {
        card.replaceWith(planCard(await api('GET', `/v1/plans/${enc(p.key)}`), staleBox('this plan', err, 'plan above')));
      } catch (e2) {
        showError(msg)(e2);
        msg.append(staleBox('this plan', err, 'plan above'));
      }
      return;
    }
    card.replaceWith(planCard(saved, notice(`${label} ${saved.public ? 'is public: offered as an upgrade in denials' : 'is no longer public: offered in no denial'}`
      + ` (still version ${num(saved.latest_version)}: a change of public alone makes no new version).`)));
  });
  const versions = h('div', { class: 'versions' });
  card.append(versions);
  planVersions(p.key).then((list) => versions.append(h('h3', {}, 'Versions'),
    table([{ label: 'Version', num: true }, 'Price', { label: 'Limits', num: true }, { label: 'Customers', num: true }, 'Since'],
      list.map((v) => [num(v.version), `${money(v.price.amount_cents, v.price.currency)} per ${v.price.interval}`,
        num(v.limits.length), num(v.customers), time(v.created_at)]))))
    .catch(showError(versions));
  return card;
}

// planVersions lists every version of a plan, oldest first: each change of
// its price, limits or features made one, and customers may be kept on
// older ones (grandfathered) until a migration moves them.
async function planVersions(key) {
  const out = [];
  let cursor = '';
  do {
    const r = await api('GET', `/v1/plans/${encodeURIComponent(key)}/versions?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    out.push(...r.versions);
    cursor = r.next_cursor || '';
  } while (cursor);
  return out;
}

// Metrics.

async function metricsPage(main) {
  main.append(h('h1', {}, 'Metrics'));
  const declared = h('div', { id: 'metrics' });
  const msg = h('div', { id: 'metric-msg' });
  const editor = h('div', { id: 'metric-form' });
  main.append(section('Declared metrics',
    h('p', { class: 'muted' }, 'Capacity is the whole system\'s budget per window, which elastic limits borrow from. '
      + 'A credit pool is a metric that other metrics draw on: a check of one of them also charges the pool.'),
    declared, msg, editor));
  let metrics = [];

  const showMsg = (err) => {
    clear(msg);
    if (isStale(err)) {
      clear(editor);
      msg.append(staleBox('this metric', err));
      loadDeclared().catch(showError(declared));
    } else msg.append(errorBox(err));
  };

  const loadDeclared = async () => {
    const r = await api('GET', '/v1/metrics?limit=1000');
    if (!page.alive) return;
    metrics = r.metrics;
    const pools = drawsOn(metrics);
    const cols = ['Metric', 'Description', 'Capacity', { label: 'Credits', block: true }, 'Version', 'Actions'];
    clear(declared).append(metrics.length ? table(cols, metrics.map((m) => {
      const edit = h('button', { type: 'button', class: 'secondary', 'data-action': 'edit', 'aria-label': `Edit metric ${m.key}` }, 'Edit');
      on(edit, 'click', () => showMetricForm(m));
      return {
        attrs: { 'data-key': m.key },
        cells: [m.key, m.description || '',
          Object.keys(m.capacity || {}).length ? CAPACITY_WINDOWS.filter((w) => m.capacity[w] != null).map((w) => `${w}: ${num(m.capacity[w])}`).join(', ') : 'none',
          creditsCell(m, pools.get(m.key)), num(m.version), edit],
      };
    })) : h('p', { class: 'muted' }, 'No metrics.'));
    if (r.next_cursor) declared.append(h('p', { class: 'muted' }, 'Only the first 1,000 metrics are shown.'));
  };

  // showMetricForm edits a metric: its description, capacity and credit
  // schema. A PUT replaces the whole metric, so the form starts from all
  // of it, the schema included, and sends all of it back.
  const showMetricForm = (m) => {
    clear(msg);
    const desc = h('input', { id: 'mt-description', type: 'text', maxlength: 2000, value: m.description || '' });
    const caps = CAPACITY_WINDOWS.map((w) => [w, h('input', { id: `mt-capacity-${w}`, type: 'number', min: 0, step: 1, value: m.capacity?.[w] ?? '', placeholder: 'none' })]);
    const others = metrics.map((x) => x.key).filter((k) => k !== m.key);
    const rates = h('div', { id: 'mt-rates' });
    let n = 0;
    const addRate = (r) => {
      const i = n++;
      const metric = h('select', { id: `mt-rate-metric-${i}`, 'data-field': 'metric' }, others.map((k) => h('option', { value: k, selected: r?.metric === k }, k)));
      const credits = h('input', { id: `mt-rate-credits-${i}`, 'data-field': 'credits', type: 'number', min: 1, step: 1, required: true, value: r?.credits ?? '' });
      const per = h('input', { id: `mt-rate-per-${i}`, 'data-field': 'per', type: 'number', min: 1, step: 1, required: true, value: r?.per ?? 1 });
      const remove = h('button', { type: 'button', class: 'secondary', 'data-action': 'remove-rate' }, 'Remove');
      const line = h('div', { class: 'form-grid rate', 'data-rate': i },
        field('Metric drawing on it', metric), field('Credits', credits), field('Per units of that metric', per), h('div', {}, remove));
      on(remove, 'click', () => line.remove());
      rates.append(line);
    };
    (m.credit_schema || []).forEach(addRate);
    const add = h('button', { type: 'button', class: 'secondary', id: 'mt-add-rate', disabled: others.length === 0 }, 'Add a metric to the pool');
    on(add, 'click', () => addRate(null));
    const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
    on(cancel, 'click', () => clear(editor));
    const form = h('form', { id: 'metric-editor' },
      h('h3', {}, `Edit metric ${m.key} (version ${m.version})`),
      h('div', { class: 'form-grid' }, field('Description', desc, { class: 'wide' }),
        caps.map(([w, input]) => field(`Capacity per ${w}`, input))),
      h('h4', {}, 'Credit schema'),
      h('p', { class: 'muted' }, 'The metrics that draw on this one as a credit pool: a check of one of them also charges this metric its credits per so many units, rounded up. Empty: no pool.'),
      rates, h('div', { class: 'actions' }, add),
      h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'mt-save' }, 'Save metric'), cancel));
    on(form, 'submit', async (e) => {
      e.preventDefault();
      const capacity = {};
      for (const [w, input] of caps) if (input.value !== '') capacity[w] = Number(input.value);
      const value = (line, f) => line.querySelector(`[data-field=${f}]`).value;
      const body = {
        description: desc.value, capacity,
        credit_schema: [...rates.children].map((line) => ({ metric: value(line, 'metric'), credits: Number(value(line, 'credits')), per: Number(value(line, 'per')) })),
      };
      try {
        await api('PUT', `/v1/metrics/${enc(m.key)}`, { body, ifMatch: etag(m.version) });
        clear(editor);
        await loadDeclared();
        clear(msg).append(notice(`Metric ${m.key} saved.`));
      } catch (err) { showMsg(err); }
    });
    clear(editor).append(form);
    desc.focus();
  };

  await loadDeclared();

  // Global usage: every customer's admitted units, per window with a
  // capacity, reloaded as the customer page reloads usage.
  const usageBox = h('div', { id: 'global-usage' });
  const usageMsg = h('div');
  main.append(section('Global usage per window',
    h('p', { class: 'muted' }, 'Every customer\'s admitted units against the capacity. Long windows count every quotad process; '
      + 'short windows count the process that answered ("process"), or every process when they share Redis ("shared").'),
    usageBox, usageMsg));
  const load = async () => {
    const withCapacity = metrics.filter((m) => Object.keys(m.capacity || {}).length);
    const all = await Promise.all(withCapacity.map((m) => api('GET', `/v1/metrics/${enc(m.key)}/usage`)));
    if (!page.alive) return;
    const rows = all.flatMap((mu) => mu.usage.map((u) => {
      const key = `${mu.metric}/${u.window}`;
      const full = u.capacity != null && u.remaining === 0;
      return h('tr', { class: full ? 'state-exceeded' : 'state-ok', 'data-key': key },
        h('td', { 'data-label': 'Metric' }, mu.metric), h('td', { 'data-label': 'Window' }, u.window),
        h('td', { 'data-label': 'Usage' }, capacityBar(u, key)),
        h('td', { 'data-label': 'Used', class: 'num' }, u.capacity != null ? `${num(u.used)} / ${num(u.capacity)}` : num(u.used)),
        h('td', { 'data-label': 'Remaining', class: 'num' }, num(u.remaining)),
        h('td', { 'data-label': 'Counted' }, u.scope),
        h('td', { 'data-label': 'Resets' }, time(u.reset_at)));
    }));
    const cols = ['Metric', 'Window', 'Usage', { label: 'Used', num: true }, { label: 'Remaining', num: true }, 'Counted', 'Resets'];
    clear(usageBox).append(rows.length ? table(cols, rows)
      : h('p', { class: 'muted' }, withCapacity.length ? 'No global usage is counted.' : 'No metric declares a capacity.'));
    clear(usageMsg);
  };
  const refresh = () => load().catch((err) => { if (page.alive) clear(usageMsg).append(errorBox(err)); });
  await refresh();
  every(REFRESH_MS, refresh);
}

// drawsOn maps each metric that draws on a credit pool to the pool and its
// rate, from the pools' schemas (a metric draws on at most one pool).
function drawsOn(metrics) {
  const out = new Map();
  for (const pool of metrics) {
    for (const r of pool.credit_schema || []) out.set(r.metric, { pool: pool.key, rate: r });
  }
  return out;
}

// rateText says how a metric draws on a pool: "3 credits per 100 gpt4_tokens".
function rateText(r) {
  const credits = count(r.credits, 'credit');
  return r.per === 1 ? `${credits} per unit of ${r.metric}` : `${credits} per ${num(r.per)} ${r.metric}`;
}

// creditsCell is a metric's part in credit pools: the metrics that draw on
// it (a pool), or the pool it draws on, or none.
function creditsCell(m, draws) {
  if (m.credit_schema?.length) {
    return h('div', { class: 'credits' }, 'Credit pool, charged by:',
      h('ul', { class: 'rates' }, m.credit_schema.map((r) => h('li', { 'data-metric': r.metric }, rateText(r)))));
  }
  if (draws) return h('div', { class: 'credits', 'data-pool': draws.pool }, 'Draws on pool ', h('strong', {}, draws.pool), ': ', rateText(draws.rate));
  return h('span', { class: 'muted' }, '—');
}

// capacityBar is a window's global usage against the metric's capacity
// (a window without capacity has no bar).
function capacityBar(u, key) {
  if (u.capacity == null) return h('span', { class: 'muted' }, 'no capacity');
  const pct = u.capacity > 0 ? Math.min(100, (u.used / u.capacity) * 100) : 100;
  const fill = h('span');
  fill.style.width = `${pct}%`; // CSSOM, which the CSP allows (no style attribute is parsed)
  return h('div', {
    class: 'bar', role: 'progressbar', 'aria-label': `${key} global usage`, 'aria-valuemin': 0,
    'aria-valuemax': u.capacity, 'aria-valuenow': u.used, 'aria-valuetext': `${num(u.used)} of ${num(u.capacity)}`,
    'data-used': u.used, 'data-capacity': u.capacity,
  }, fill);
}

// Webhooks.

async function webhooksPage(main) {
  main.append(h('h1', {}, 'Webhooks'));
  const r = await api('GET', '/v1/webhooks?limit=1000');
  main.append(section('Endpoints', r.webhooks.length ? table(['Id', 'URL', 'Events', 'Thresholds', 'Updated'],
    r.webhooks.map((w) => [h('a', { href: `#/webhooks/${enc(w.id)}` }, w.id), w.url, (w.events || []).join(', ') || 'all',
      (w.thresholds || []).map((t) => `${t}%`).join(', '), time(w.updated_at)])) : h('p', { class: 'muted' }, 'No webhooks.')));
}

async function webhookPage(main, id) {
  const w = await api('GET', `/v1/webhooks/${enc(id)}`);
  main.append(h('h1', {}, `Webhook ${w.id}`), h('p', { class: 'sub' }, w.url));
  const box = h('div');
  main.append(section('Recent deliveries', box));
  const r = await api('GET', `/v1/webhooks/${enc(id)}/deliveries?limit=100`);
  box.append(r.deliveries.length ? table(['Created', 'Event', 'Customer', 'Status', { label: 'Attempts', num: true }, 'Last answer', 'Delivered'],
    r.deliveries.map((d) => [time(d.created_at), `${d.event?.type || ''} ${d.event?.metric || ''}/${d.event?.window || ''}${d.event?.threshold != null ? ` ${d.event.threshold}%` : ''}`,
      d.event?.customer || '', d.status, num(d.attempts),
      d.last_status ? `HTTP ${d.last_status}` : (d.last_error || ''), time(d.delivered_at)])) : h('p', { class: 'muted' }, 'No deliveries yet.'));
}

// Audit log.

async function auditPage(main, params) {
  const customer = params.get('customer') || '';
  const cIn = h('input', { id: 'audit-customer', type: 'search', value: customer });
  const form = h('form', { class: 'inline', role: 'search' }, field('Customer id', cIn), h('button', { type: 'submit' }, 'Filter'));
  on(form, 'submit', (e) => { e.preventDefault(); go(`#/audit${qs({ customer: cIn.value.trim() })}`); });
  const list = h('div');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Older events');
  main.append(h('h1', {}, 'Audit log'), section('Every admin change, newest first', form, list, more));
  let cursor = '';
  const load = async () => {
    const r = await api('GET', `/v1/audit${qs({ customer, limit: 50, cursor })}`);
    list.append(auditTable(r.events));
    cursor = r.next_cursor || '';
    more.hidden = !cursor;
  };
  on(more, 'click', () => load().catch(showError(list)));
  await load();
}

window.addEventListener('hashchange', route);
route();
