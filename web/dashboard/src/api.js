// Talks to the REST API (Flink's paths and JSON shapes) of the server that
// served this page. GETs are plain; mutating calls (PATCH, POST) carry the
// stored REST token (rest.authentication.token) as a bearer token, and a 401
// asks the user for the token and resends.

const TOKEN_KEY = 'sluice.rest.token';

// The directory the page was served from, so the dashboard also works behind
// a proxy that mounts it under a prefix ("" when served at "/").
const BASE = location.pathname.replace(/\/[^/]*$/, '');

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status; // HTTP status, 0 when the server could not be reached
  }
}

// --- connection status, shown in the header --------------------------------

const statusListeners = new Set();
export const connection = { lastOk: null, error: null };

function setConnection(ok, error) {
  if (ok) connection.lastOk = new Date();
  connection.error = error;
  statusListeners.forEach((f) => f());
}

export function onConnectionChange(f) {
  statusListeners.add(f);
  return () => statusListeners.delete(f);
}

// --- refresh interval from GET /config --------------------------------------

let refreshMs = 3000;
export const refreshInterval = () => refreshMs;
// web.cancel.enable: whether the UI offers to cancel jobs.
let cancelEnabled = true;
export const webCancelEnabled = () => cancelEnabled;

export async function loadConfig() {
  try {
    const cfg = await get('/config');
    const r = Number(cfg['refresh-interval']);
    if (r >= 200) refreshMs = r;
    if (cfg.features && cfg.features['web-cancel'] === false) cancelEnabled = false;
    return cfg;
  } catch (e) {
    return {};
  }
}

// --- requests ----------------------------------------------------------------

async function errorOf(res) {
  let message = `${res.status} ${res.statusText}`;
  try {
    const body = await res.json();
    if (Array.isArray(body.errors) && body.errors.length) message = body.errors.join('; ');
  } catch (e) {
    // not JSON: keep the status line
  }
  return new ApiError(res.status, message);
}

async function send(method, path, body, headers) {
  let res;
  try {
    res = await fetch(BASE + path, {
      method,
      headers: { Accept: 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch (e) {
    setConnection(false, 'Server unreachable');
    throw new ApiError(0, 'Server unreachable');
  }
  if (res.status >= 500) setConnection(false, `Server error ${res.status}`);
  else setConnection(true, null);
  if (!res.ok) throw await errorOf(res);
  const text = await res.text();
  return text ? JSON.parse(text) : {};
}

export const get = (path) => send('GET', path);

export const getToken = () => localStorage.getItem(TOKEN_KEY) || '';
export function setToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

// The token dialog (components.jsx) registers itself here; askToken resolves
// with the entered token, or null when the user cancels.
let tokenPrompt = null;
export function registerTokenPrompt(f) {
  tokenPrompt = f;
}

export async function mutate(method, path, body) {
  let retry = false;
  for (;;) {
    const token = getToken();
    const headers = { 'Content-Type': 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    try {
      return await send(method, path, body ?? {}, headers);
    } catch (e) {
      if (e.status !== 401 || !tokenPrompt) throw e;
      const entered = await tokenPrompt(
        retry ? 'The token was not accepted. Try again.' : 'This action needs the REST token.'
      );
      if (entered === null) throw new ApiError(401, 'Not authorized: no REST token given');
      setToken(entered);
      retry = true;
    }
  }
}
