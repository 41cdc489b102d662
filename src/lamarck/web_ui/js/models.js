// Model versions as a lineage tree; a version's gate result (wins, losses, p-value, per environment) beside it, with
// promote and rollback for a key with the models scope, each after a confirmation of what changes (changes.js).
import { getJson, query } from './api.js';
import { applyChange } from './changes.js';
import { byId, h, replace } from './dom.js';
import { lineageTree } from './lineage.js';
import { can, clearMessage, param, reportFailure, showMessage, startPage } from './page.js';

// One champion answers every environment's tasks; each environment's harness is its own (see the harness page).
const SCOPE = 'every environment: one champion model serves them all. Each environment keeps its harness.';

let session = null;
let champion = null;

async function allVersions() {
  let versions = [];
  let cursor = null;
  do {
    const page = await getJson(`/v1/models${query({ limit: 200, cursor })}`);
    versions = versions.concat(page.models);
    cursor = page.next_cursor;
  } while (cursor && versions.length < 2000);
  return versions;
}

function number(value, digits = 3) {
  return value === null || value === undefined ? '–' : Number(value).toFixed(digits);
}

function gateView(gate) {
  if (!gate) {
    return h('p', { class: 'muted' }, 'Not gated.');
  }
  const decision = gate.promote === null ? 'undecided' : gate.promote ? 'promote' : 'refuse';
  const facts = [
    ['decision', h('span', { class: `status ${gate.promote ? 'passed' : 'failed'}` }, decision), gate.reason ? ` — ${gate.reason}` : ''],
    ['against', gate.champion ?? '–'],
    ['wins / losses', `${gate.wins} / ${gate.losses}`],
    ['p-value', `${number(gate.p_value)} (alpha ${number(gate.alpha)}${gate.look ? `, look ${gate.look}` : ''})`],
  ];
  const rows = gate.environments.map((e) => h('tr', {},
    h('td', {}, e.environment), h('td', {}, e.n), h('td', {}, `${e.candidate_passes} vs ${e.champion_passes}`),
    h('td', {}, `${e.wins} / ${e.losses}`), h('td', {}, `${e.delta >= 0 ? '+' : ''}${number(e.delta)}`),
    h('td', {}, h('span', { class: `status ${e.ok ? 'passed' : 'failed'}` }, e.ok ? 'ok' : 'worse'))));
  return [
    h('dl', {}, facts.flatMap(([name, ...value]) => [h('dt', {}, name), h('dd', {}, value)])),
    rows.length
      ? h('table', { id: 'gate-environments' },
        h('thead', {}, h('tr', {}, ['environment', 'tasks', 'passes (candidate vs champion)', 'wins / losses', 'change', ''].map((t) => h('th', {}, t)))),
        h('tbody', {}, rows))
      : '',
  ];
}

function change(title, confirm, changes, path, body) {
  return applyChange({
    title, confirm, changes, scope: SCOPE, path, body,
    reload: (result) => load(result.champion),
    done: (result) => `${title}: the champion is now ${result.champion}.`,
  });
}

function controls(model) {
  if (!can(session, 'models')) {
    return h('p', { class: 'muted' }, 'Promoting and rolling back need a key with the models scope.');
  }
  const promote = h('button', { type: 'button', id: 'promote', disabled: model.status === 'promoted' }, `Promote ${model.id}`);
  promote.addEventListener('click', () => change(`Promote ${model.id}`, 'Promote', [
    `${model.id} becomes the champion${champion ? ` in place of ${champion}` : ''}.`,
    champion ? `${champion} is retired and kept: rolling back the champion restores it.` : 'There is no champion now.',
  ], `/v1/models/${encodeURIComponent(model.id)}/promote`, { reason: 'promoted from the web UI' }));
  const rollback = h('button', { type: 'button', id: 'rollback', disabled: model.status !== 'promoted' || !model.previous }, 'Roll back the champion');
  rollback.addEventListener('click', () => change('Roll back the champion', 'Roll back', [
    `${model.previous} becomes the champion again: ${model.id} replaced it.`,
    `${model.id} goes back to being a candidate.`,
  ], '/v1/models/rollback'));
  return h('p', { class: 'toolbar' }, promote, rollback);
}

async function select(id) {
  const detail = byId('detail');
  try {
    const model = await getJson(`/v1/models/${encodeURIComponent(id)}`);
    for (const node of document.querySelectorAll('#tree g.node')) {
      node.classList.toggle('selected', node.dataset.id === id);
    }
    const facts = [
      ['status', model.status], ['base', model.base], ['parent', model.parent_id ?? '–'], ['reason', model.reason ?? '–'],
      ['dataset', model.dataset_digest ?? '–'], ['replaced', model.previous ?? '–'],
      ['created', new Date(model.created_at).toLocaleString()],
    ];
    replace(detail,
      h('h2', {}, 'Version ', h('code', {}, model.id)),
      h('dl', {}, facts.flatMap(([name, value]) => [h('dt', {}, name), h('dd', {}, value)])),
      h('h2', {}, 'Gate'), gateView(model.gate), controls(model));
    detail.hidden = false;
  } catch (error) {
    reportFailure(error, `loading version ${id}`, () => select(id));
  }
}

async function load(selectedId) {
  try {
    const versions = await allVersions();
    clearMessage();
    if (!versions.length) {
      showMessage('No model versions yet: run `lamarck models import-default`.', 'info');
      return;
    }
    replace(byId('tree'), lineageTree(versions, select));
    byId('models').hidden = false;
    champion = versions.find((v) => v.status === 'promoted')?.id ?? null;
    await select(selectedId ?? champion ?? versions[0].id);
  } catch (error) {
    reportFailure(error, 'loading the models', () => load(selectedId));
  }
}

session = await startPage();
if (session) {
  await load(param('id'));
}
