// An environment's harness archive as a lineage tree; a chosen version's rating and rationale with its diff against
// its parent, and the diff between any two (the system prompt's lines, the changed knobs, the worked examples); for a
// key with the models scope, promote a version or roll the environment's harness back, each after a confirmation of
// what changes (changes.js, as on the model page).
import { getJson, query } from './api.js';
import { applyChange } from './changes.js';
import { byId, h, replace } from './dom.js';
import { lineageTree } from './lineage.js';
import { can, clearMessage, param, reportFailure, showMessage, startPage } from './page.js';

let session = null;
let served = null; // the shown environment's served (promoted) harness
let wanted = null; // the harness last asked for: a retry of an earlier click does not replace it

async function archive(environment) {
  let found = [];
  let cursor = null;
  do {
    const page = await getJson(`/v1/harnesses${query({ environment, limit: 200, cursor })}`);
    found = found.concat(page.harnesses);
    cursor = page.next_cursor;
  } while (cursor && found.length < 2000);
  return found;
}

function lineClass(text) {
  if (/^(\+\+\+|---|@@)/.test(text)) {
    return 'header';
  }
  return text.startsWith('+') ? 'added' : text.startsWith('-') ? 'removed' : '';
}

function diffView(diff) {
  const knobs = Object.entries(diff.knobs).map(([name, change]) =>
    h('tr', {}, h('td', {}, h('code', {}, name)), h('td', {}, JSON.stringify(change.a)), h('td', {}, JSON.stringify(change.b))));
  const lines = diff.prompt.map((text) => h('span', { class: lineClass(text) }, `${text}\n`));
  return [
    h('p', {}, `${diff.a} → ${diff.b}: rating ${Math.round(diff.rating_a)} → ${Math.round(diff.rating_b)}, `,
      `the second wins ${Math.round(diff.b_wins * 100)}% of the tasks where they disagree; worked examples ${diff.examples[0]} → ${diff.examples[1]}.`),
    knobs.length
      ? h('table', { class: 'knobs' }, h('thead', {}, h('tr', {}, h('th', {}, 'knob'), h('th', {}, 'was'), h('th', {}, 'now'))), h('tbody', {}, knobs))
      : h('p', { class: 'muted' }, 'No knob changed.'),
    lines.length ? h('pre', { class: 'diff' }, lines) : h('p', { class: 'muted' }, 'The system prompt is the same.'),
  ];
}

async function showDiff(a, b, target) {
  try {
    replace(target, diffView(await getJson(`/v1/harnesses/diff${query({ a, b })}`)));
  } catch (error) {
    reportFailure(error, 'comparing the harnesses', () => showDiff(a, b, target));
  }
}

function scope(environment) {
  return `the ${environment} environment only: the other environments keep their harnesses, and the model champion does not change.`;
}

function change(title, confirm, changes, environment, path, body) {
  return applyChange({
    title, confirm, changes, scope: scope(environment), path, body,
    reload: (result) => load(result.environment, result.harness),
    done: (result) => `${title}: ${result.environment} is now served with ${result.harness}.`,
  });
}

function controls(harness) {
  const environment = harness.environment;
  if (!environment) {
    return '';
  }
  if (!can(session, 'models')) {
    return h('p', { class: 'muted' }, 'Promoting and rolling back need a key with the models scope.');
  }
  const previous = harness.scores?.previous ?? null;
  const promote = h('button', { type: 'button', id: 'promote', disabled: harness.status === 'promoted' }, `Promote ${harness.id}`);
  promote.addEventListener('click', () => change(`Promote harness ${harness.id}`, 'Promote', [
    `${environment} is served with ${harness.id}${served ? ` instead of ${served}` : ''}.`,
    served ? `${served} is retired and kept: rolling back ${environment}'s harness restores it.` : `${environment} has no served harness now.`,
  ], environment, `/v1/harnesses/${encodeURIComponent(harness.id)}/promote`, { reason: 'promoted from the web UI' }));
  const rollback = h('button', { type: 'button', id: 'rollback', disabled: harness.status !== 'promoted' || !previous },
    `Roll back ${environment}'s harness`);
  rollback.addEventListener('click', () => change(`Roll back ${environment}'s harness`, 'Roll back', [
    `${environment} is served with ${previous} again: ${harness.id} replaced it.`,
    `${harness.id} is retired and kept.`,
  ], environment, '/v1/harnesses/rollback', { environment }));
  return h('p', { class: 'toolbar' }, promote, rollback);
}

async function select(id) {
  const detail = byId('detail');
  wanted = id;
  try {
    const harness = await getJson(`/v1/harnesses/${encodeURIComponent(id)}`);
    for (const node of document.querySelectorAll('#tree g.node')) {
      node.classList.toggle('selected', node.dataset.id === id);
    }
    const against = h('div', { id: 'parent-diff' });
    replace(detail,
      h('h2', {}, 'Harness ', h('code', {}, harness.id)),
      h('dl', {}, [['status', harness.status], ['rating', Math.round(harness.rating)], ['parent', harness.parent_id ?? '–'],
        ['replaced', harness.scores?.previous ?? '–'], ['rationale', harness.rationale ?? '–'], ['judge', harness.flag || 'trusted']]
        .flatMap(([n, v]) => [h('dt', {}, n), h('dd', {}, v)])),
      controls(harness),
      harness.parent_id ? [h('h2', {}, 'Against its parent'), against] : h('p', { class: 'muted' }, 'The root of this lineage.'));
    detail.hidden = false;
    byId('diff-a').value = harness.parent_id ?? harness.id;
    byId('diff-b').value = harness.id;
    if (harness.parent_id) {
      await showDiff(harness.parent_id, harness.id, against);
    }
  } catch (error) {
    reportFailure(error, `loading harness ${id}`, () => wanted === id && select(id));
  }
}

async function load(environment, chosen) {
  try {
    const found = await archive(environment);
    clearMessage();
    byId('environment').value = environment;
    served = found.find((harness) => harness.status === 'promoted')?.id ?? null;
    if (!found.length) {
      replace(byId('tree'), h('p', { class: 'muted' }, `No harness archived for ${environment} yet: the harness critic adds them.`));
      byId('detail').hidden = true;
      return;
    }
    const tree = found.map((harness) => ({ ...harness, status: harness.status === 'rejected' ? 'retired' : harness.status }));
    replace(byId('tree'), lineageTree(tree, select));
    const options = () => found.map((harness) => h('option', { value: harness.id }, `${harness.id} (${harness.status})`));
    replace(byId('diff-a'), options());
    replace(byId('diff-b'), options());
    await select(chosen ?? served ?? found[0].id);
  } catch (error) {
    reportFailure(error, 'loading the harnesses', () => byId('environment').value === environment && load(environment, chosen));
  }
}

async function start() {
  try {
    const catalog = await getJson('/v1/environments');
    const names = catalog.environments.map((e) => e.name);
    replace(byId('environment'), names.map((name) => h('option', { value: name }, name)));
    const wanted = param('environment');
    byId('environment').value = names.includes(wanted) ? wanted : names[0];
    byId('environment').addEventListener('change', () => load(byId('environment').value));
    byId('diff').addEventListener('click', () => showDiff(byId('diff-a').value, byId('diff-b').value, byId('diff-view')));
    byId('harnesses').hidden = false;
  } catch (error) {
    if (error.status !== undefined) {
      reportFailure(error, 'loading the environments', start);
    } else {
      showMessage(error.message);
    }
    return;
  }
  await load(byId('environment').value, param('id'));
}

session = await startPage();
if (session) {
  await start();
}
