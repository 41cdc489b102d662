// The runs list, newest first, a page at a time.
import { getJson, query } from './api.js';
import { byId, h } from './dom.js';
import { clearMessage, reportFailure, showMessage, startPage } from './page.js';

let cursor = null;
const chosen = new Set();

function choose(id, box) {
  if (box.checked) {
    chosen.add(id);
  } else {
    chosen.delete(id);
  }
  const link = byId('compare');
  link.hidden = chosen.size < 2;
  link.href = `compare.html?${[...chosen].map((run) => `run=${encodeURIComponent(run)}`).join('&')}`;
}

function row(run) {
  const environments = Array.isArray(run.config?.environments) ? run.config.environments.join(', ') : '';
  const planned = run.config?.generations ?? '?';
  const box = h('input', { type: 'checkbox', 'aria-label': `compare run ${run.id}` });
  box.addEventListener('change', () => choose(run.id, box));
  return h(
    'tr',
    { dataset: { id: run.id } },
    h('td', {}, box),
    h('td', {}, h('a', { href: `run.html?id=${encodeURIComponent(run.id)}` }, run.name || run.id), ' ',
      h('code', { class: 'muted' }, run.id)),
    h('td', {}, h('span', { class: `status ${run.status}` }, run.status)),
    h('td', {}, `${run.generations_done} of ${planned}`),
    h('td', {}, environments),
    h('td', {}, new Date(run.created_at).toLocaleString()),
  );
}

async function loadPage() {
  try {
    const page = await getJson(`/v1/runs${query({ limit: 50, cursor })}`);
    clearMessage();
    const body = byId('runs').tBodies[0];
    body.append(...page.runs.map(row));
    cursor = page.next_cursor;
    byId('more').hidden = !cursor;
    byId('runs-section').hidden = false;
    if (!body.rows.length) {
      showMessage('No runs yet: start one with `lamarck evolve` or POST /v1/runs.', 'info');
    }
  } catch (error) {
    reportFailure(error, 'loading the runs', loadPage);
  }
}

if (await startPage()) {
  byId('more').addEventListener('click', loadPage);
  await loadPage();
}
