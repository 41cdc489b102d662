// All of a run's episodes, newest first, filtered by outcome, environment and generation: pages of 200 arrive as
// the list is scrolled towards its end, and only the rows in view are drawn (virtual.js), so thousands scroll
// smoothly. Tick two to compare them side by side. The filters live in the address, so a view can be linked.
import { getJson, query } from './api.js';
import { byId, h, replace } from './dom.js';
import { COLUMNS, EpisodeSelection } from './episode_rows.js';
import { param, reportFailure, showMessage, startPage } from './page.js';
import { VirtualRows } from './virtual.js';

const PAGE = 200;
const FILTERS = { outcome: 'filter-outcome', environment: 'filter-environment', generation: 'filter-generation' };

const runId = param('run');
const path = `/v1/runs/${encodeURIComponent(runId ?? '')}`;
const selection = new EpisodeSelection(byId('compare'));
let items = [];
let cursor = null;
let done = false;
let loading = false;
let asked = 0; // which filtering a page belongs to: a page for an earlier one is dropped

const list = new VirtualRows({
  scroller: byId('episode-list'),
  body: byId('episodes').tBodies[0],
  before: byId('episodes-before'),
  after: byId('episodes-after'),
  row: (episode) => selection.row(episode),
  empty: () => h('tr', {}, h('td', { colspan: COLUMNS, class: 'muted' }, done ? 'No episodes match.' : 'Loading…')),
  onNearEnd: () => loadMore(),
});

function filters() {
  return Object.fromEntries(Object.entries(FILTERS).map(([name, id]) => [name, byId(id).value]));
}

function showCount() {
  replace(byId('episode-count'), done
    ? `${items.length.toLocaleString()} episode${items.length === 1 ? '' : 's'}`
    : `${items.length.toLocaleString()} loaded; more arrive as you scroll`);
  byId('episode-list').dataset.complete = String(done);
}

async function loadMore() {
  if (loading || done) {
    return;
  }
  loading = true;
  const mine = asked;
  try {
    const page = await getJson(`${path}/episodes${query({ ...filters(), limit: PAGE, cursor })}`);
    if (mine !== asked) {
      return;
    }
    items = items.concat(page.episodes);
    cursor = page.next_cursor;
    done = !cursor;
    loading = false;
    showCount();
    list.setItems(items); // asks for the next page itself while the view is still near the end
  } catch (error) {
    if (mine === asked) {
      loading = false;
      reportFailure(error, 'loading the episodes', () => mine === asked && loadMore());
    }
  }
}

function restart() {
  asked += 1;
  items = [];
  cursor = null;
  done = false;
  loading = false;
  byId('episode-list').scrollTop = 0;
  window.history.replaceState(null, '', `episodes.html${query({ run: runId, ...filters() })}`);
  showCount();
  list.setItems(items);
}

async function main() {
  if (!(await startPage())) {
    return;
  }
  if (!runId) {
    showMessage('No run was given in the address: open one from the runs list.');
    return;
  }
  await open();
}

async function open() {
  let run;
  try {
    run = await getJson(path);
  } catch (error) {
    if (error.status === 404 || error.status === 422) {
      showMessage(`There is no run "${runId}": check the address, or pick a run from the runs list.`);
    } else {
      reportFailure(error, 'loading the run', open);
    }
    return;
  }
  replace(byId('title'), 'Episodes of run ', h('a', { href: `run.html${query({ id: run.id })}` }, run.name || run.id));
  const environments = Array.isArray(run.config?.environments) ? run.config.environments : [];
  byId('filter-environment').append(...environments.map((name) => h('option', { value: name }, name)));
  for (const [name, id] of Object.entries(FILTERS)) {
    const given = param(name);
    if (given) {
      byId(id).value = given;
    }
    byId(id).addEventListener('change', restart);
  }
  byId('episodes-view').hidden = false;
  restart();
}

await main();
