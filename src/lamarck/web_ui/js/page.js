// What every page shares: the signed-in state in the header, sign-out, one place for messages, and the banner with
// retries while the API is unreachable (connection.js).
import { ApiFailure, deleteJson, getJson, leaving } from './api.js';
import { connection } from './connection.js';
import { byId, h, replace } from './dom.js';

export function showMessage(text, kind = 'error') {
  const message = byId('message');
  message.className = `message ${kind}`;
  replace(message, text);
  message.hidden = false;
}

export function clearMessage() {
  byId('message').hidden = true;
}

function signInLink(expired) {
  const next = window.location.pathname + window.location.search;
  const params = new URLSearchParams({ next });
  if (expired) {
    params.set('error', 'expired');
  }
  return h('a', { href: `/ui/signin.html?${params}` }, 'Sign in');
}

export function showSignedOut(expired) {
  const text = expired ? 'Your sign-in has expired or was signed out. ' : 'Sign in with an API key to see runs. ';
  const message = byId('message');
  message.className = `message ${expired ? 'error' : 'info'}`;
  replace(message, text, signInLink(expired), '.');
  message.hidden = false;
  replace(byId('session'), signInLink(expired));
}

/** Explains a failed call on the page; true when the server is unreachable (no answer, or a 5xx). Then the banner
 * says so, and ``retry`` (the call with its rendering), when given, runs again once the API is back, after a backoff,
 * leaving the page as it is meanwhile; without ``retry`` (an action, not to be repeated unasked) the message says
 * what was not done. */
export function reportFailure(error, what, retry = null) {
  if (leaving.signal.aborted) {
    return false;
  }
  if (!(error instanceof ApiFailure)) {
    showMessage(`Something went wrong ${what}: ${error.message}`);
    return false;
  }
  if (error.code === 'session_expired' || error.status === 401) {
    showSignedOut(true);
    return false;
  }
  if (error.unreachable && retry !== null) {
    connection.whenBack(retry);
    return true;
  }
  showMessage(`${what[0].toUpperCase()}${what.slice(1)}: ${error.message}`);
  return error.unreachable;
}

/** The session, shown in the header; null (with a sign-in message) when the visitor is not signed in. */
export async function startPage() {
  let state;
  for (;;) {
    try {
      state = await getJson('/ui/session');
      break;
    } catch (error) {
      if (!(error instanceof ApiFailure) || !error.unreachable) {
        reportFailure(error, 'reaching the server');
        return null;
      }
      await connection.whenBack(); // the banner says why the page waits
    }
  }
  if (!state.signed_in) {
    showSignedOut(state.expired);
    return null;
  }
  const signOut = h('button', { type: 'button', id: 'sign-out' }, 'Sign out');
  signOut.addEventListener('click', async () => {
    const done = deleteJson('/ui/session').catch(() => null);
    leaving.abort();
    await done;
    window.location.assign('/ui/signin.html');
  });
  replace(byId('session'), h('span', { class: 'muted' }, `key ${state.key_id} (${state.scopes.join(', ')}) `), signOut);
  return state;
}

export function can(state, scope) {
  return state.scopes.includes(scope) || state.scopes.includes('admin');
}

export function param(name) {
  return new URLSearchParams(window.location.search).get(name);
}
