// Promote and rollback, for model versions and harnesses alike: a confirmation dialog that states what will change
// and its scope, then the call (authenticated by the session cookie), then the page reloaded to show the result.
// An error from the API is shown as its one-line message and the page is left as it was; cancelling sends nothing.
import { postJson } from './api.js';
import { h } from './dom.js';
import { reportFailure, showMessage } from './page.js';

/** A modal dialog: the change's title, what changes, where (its scope); resolves true only for the confirm button
 * (Cancel, Escape and closing it otherwise are a no). */
export function confirmChange({ title, changes, scope, confirm = 'Confirm' }) {
  return new Promise((resolve) => {
    const cancel = h('button', { type: 'button', id: 'confirm-cancel', autofocus: true }, 'Cancel');
    const ok = h('button', { type: 'button', id: 'confirm-ok', class: 'primary' }, confirm);
    const dialog = h('dialog', { id: 'confirm', class: 'confirm', 'aria-labelledby': 'confirm-title' },
      h('h2', { id: 'confirm-title' }, `${title}?`),
      h('p', {}, 'What changes:'),
      h('ul', { id: 'confirm-changes' }, changes.map((change) => h('li', {}, change))),
      h('p', { id: 'confirm-scope' }, h('strong', {}, 'Scope: '), scope),
      h('p', { class: 'toolbar' }, cancel, ok));
    cancel.addEventListener('click', () => dialog.close('cancel'));
    ok.addEventListener('click', () => dialog.close('confirm'));
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'confirm');
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/** Asks, posts ``body`` to ``path``, then ``await reload(result)`` and shows ``done(result)``. True when it changed. */
export async function applyChange({ title, changes, scope, confirm, path, body, reload, done }) {
  if (!(await confirmChange({ title, changes, scope, confirm }))) {
    return false;
  }
  let result;
  try {
    result = await postJson(path, body);
  } catch (error) {
    reportFailure(error, title); // an action: never repeated unasked, even when the API was away
    return false;
  }
  await reload(result);
  showMessage(done(result), 'info');
  return true;
}
