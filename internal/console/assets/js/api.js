// api.js: the console's only door to quotad, the public REST API. The admin
// token lives in this tab's sessionStorage: never in a URL, a cookie or a log.

const KEY = 'quotad.adminToken';

export const token = () => sessionStorage.getItem(KEY);
export const setToken = (t) => sessionStorage.setItem(KEY, t);
export const clearToken = () => sessionStorage.removeItem(KEY);

let unauthorized = () => {};

// onUnauthorized sets what happens when the API answers 401: the token is
// forgotten first.
export function onUnauthorized(fn) { unauthorized = fn; }

// ApiError is a failed call; its message is the problem document's detail.
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

// api calls quotad. opts: body (sent as JSON), ifMatch, token (to try a
// token before keeping it). It resolves to the decoded body (null for 204).
export async function api(method, path, opts = {}) {
  const t = opts.token ?? token();
  const headers = { Accept: 'application/json' };
  if (t) headers.Authorization = `Bearer ${t}`;
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  if (opts.ifMatch) headers['If-Match'] = opts.ifMatch;
  const res = await fetch(path, {
    method, headers, credentials: 'omit', cache: 'no-store', redirect: 'error',
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  if (res.status === 401 && opts.token === undefined) {
    clearToken();
    unauthorized();
  }
  if (!res.ok) {
    let problem = {};
    try { problem = await res.json(); } catch { /* not a problem document */ }
    throw new ApiError(res.status, problem);
  }
  return res.status === 204 ? null : res.json();
}

// qs builds a query string from the set values of params.
export function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : '';
}

export const enc = encodeURIComponent;

// etag is the ETag of a resource at version v, for If-Match.
export const etag = (v) => `"${v}"`;
