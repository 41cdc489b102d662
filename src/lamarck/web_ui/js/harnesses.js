// An environment's harness archive as a lineage tree; a chosen version's rating and rationale with its diff against
// its parent, and the diff between any two (the system prompt's lines, the changed knobs, the worked examples).
import { getJson, query } from './api.js';
import { byId, h, replace } from './dom.js';
import { lineageTree } from './lineage.js';
import { clearMessage, param, reportFailure, showMessage, startPage } from './page.js';

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
    reportFailure(error, 'comparing the harnesses');
  }
}

async function select(id) {
  const detail = byId('detail');
  try {
    const harness = await getJson(`/v1/harnesses/${encodeURIComponent(id)}`);
    for (const node of document.querySelectorAll('#tree g.node')) {
      node.classList.toggle('selected', node.dataset.id === id);
    }
    const against = h('div', { id: 'parent-diff' });
    replace(detail,
      h('h2', {}, 'Harness ', h('code', {}, harness.id)),
      h('dl', {}, [['status', harness.status], ['rating', Math.round(harness.rating)], ['parent', harness.parent_id ?? '–'],
        ['rationale', harness.rationale ?? '–'], ['judge', harness.flag || 'trusted']].flatMap(([n, v]) => [h('dt', {}, n), h('dd', {}, v)])),
      harness.parent_id ? [h('h2', {}, 'Against its parent'), against] : h('p', { class: 'muted' }, 'The root of this lineage.'));
    detail.hidden = false;
    byId('diff-a').value = harness.parent_id ?? harness.id;
    byId('diff-b').value = harness.id;
    if (harness.parent_id) {
      await showDiff(harness.parent_id, harness.id, against);
    }
  } catch (error) {
    reportFailure(error, `loading harness ${id}`);
  }
}

async function load(environment, chosen) {
  try {
    const found = await archive(environment);
    clearMessage();
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
    const served = found.find((harness) => harness.status === 'promoted');
    await select(chosen ?? served?.id ?? found[0].id);
  } catch (error) {
    reportFailure(error, 'loading the harnesses');
  }
}

if (await startPage()) {
  try {
    const catalog = await getJson('/v1/environments');
    const names = catalog.environments.map((e) => e.name);
    replace(byId('environment'), names.map((name) => h('option', { value: name }, name)));
    const wanted = param('environment');
    byId('environment').value = names.includes(wanted) ? wanted : names[0];
    byId('environment').addEventListener('change', () => load(byId('environment').value));
    byId('diff').addEventListener('click', () => showDiff(byId('diff-a').value, byId('diff-b').value, byId('diff-view')));
    byId('harnesses').hidden = false;
    await load(byId('environment').value, param('id'));
  } catch (error) {
    if (error.status) {
      reportFailure(error, 'loading the environments');
    } else {
      showMessage(error.message);
    }
  }
}
