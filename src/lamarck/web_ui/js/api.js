// Calls to the REST API on this origin. The browser's session cookie authenticates them; no key is ever held here.
// Every call that gets no answer or a 5xx is announced on ``reachability`` ('down'), which connection.js turns into
// the page's "API unreachable" banner and its retries.

export class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }

  /** No answer, or a 5xx: the API is down or failing, and the same call may work later. */
  get unreachable() {
    return this.status === 0 || this.status >= 500;
  }
}

export const reachability = new EventTarget();

function failed(error) {
  if (error.unreachable) {
    reachability.dispatchEvent(new CustomEvent('down', { detail: error }));
  }
  return error;
}

/** Aborted on sign-out: every call and stream of the page stops, so none goes out without the session. */
export const leaving = new AbortController();

async function send(path, options) {
  let response;
  try {
    response = await fetch(path, { credentials: 'same-origin', signal: leaving.signal, ...options });
  } catch {
    if (leaving.signal.aborted) {
      throw new ApiFailure(-1, 'signed_out', 'signed out');
    }
    throw failed(new ApiFailure(0, 'unreachable', 'The Lamarck server does not answer (is `lamarck serve` running?).'));
  }
  if (response.status === 204) {
    return null;
  }
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body?.error ?? {};
    throw failed(new ApiFailure(response.status, error.code ?? 'error', error.message ?? `HTTP ${response.status}`));
  }
  return body;
}

export function getJson(path) {
  return send(path, { headers: { Accept: 'application/json' } });
}

export function postJson(path, body = undefined) {
  const options = { method: 'POST', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    options.headers['Content-Type'] = 'application/json';
    options.body = JSON.stringify(body);
  }
  return send(path, options);
}

export function deleteJson(path) {
  return send(path, { method: 'DELETE', signal: null });
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') {
      search.set(name, String(value));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}
