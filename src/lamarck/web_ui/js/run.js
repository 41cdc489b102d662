// A run, live: its status and current step, learning curves, capability heatmap, event ticker and latest episodes.
// Stored events fill the ticker first; then the event stream continues after the last of them, and every event that
// changes the numbers refetches the curves (at most every 300 ms), so they grow without a reload.
import { getJson, postJson, query } from './api.js';
import { Curve } from './curves.js';
import { byId, h, replace } from './dom.js';
import { COLUMNS, EpisodeSelection } from './episode_rows.js';
import { Heatmap } from './heatmap.js';
import { can, clearMessage, param, reportFailure, showMessage, showSignedOut, startPage } from './page.js';
import { RunStream } from './stream.js';
import { addToTicker, line } from './ticker.js';

const REFRESH_ON = new Set(['generation_summary', 'verdict', 'episode_finished', 'lesson', 'skill_added']);
const STATUS_ON = new Set(['run_started', 'run_resumed', 'run_finished', 'run_stopped', 'run_failed', 'budget_exhausted']);
const STOPPABLE = new Set(['pending', 'running']);
const UNRESUMABLE = new Set(['running', 'stopping', 'finished']);
const HISTORY_KEPT = 200;

const runId = param('id');
const path = `/v1/runs/${encodeURIComponent(runId ?? '')}`;
const successCurve = new Curve(byId('success-chart'), 'success', 'success rate');
const rewardCurve = new Curve(byId('reward-chart'), 'reward', 'mean reward');
const heatmap = new Heatmap({ table: 'heatmap', slider: 'generation-slider', label: 'generation-label' });
const selection = new EpisodeSelection(byId('compare'));
let session = null;
let refreshTimer = null;
let episodeCursor = null;

function showRun(run) {
  replace(byId('title'), `Run ${run.name || run.id} `, h('code', { class: 'muted' }, run.id));
  const status = byId('status');
  status.className = `status ${run.status}`;
  replace(status, run.status, run.error ? ` — ${run.error}` : '');
  replace(byId('generations'), `${run.generations_done} of ${run.config?.generations ?? '?'} done`);
  const mayControl = can(session, 'runs');
  byId('stop').disabled = !mayControl || !STOPPABLE.has(run.status);
  byId('resume').disabled = !mayControl || UNRESUMABLE.has(run.status);
  if (!mayControl) {
    replace(byId('control-note'), 'stopping and resuming need a key with the runs scope');
  }
}

function showBudget(run, generations) {
  const last = generations.generations.at(-1);
  const used = last?.usage_total ?? {};
  const budget = run.config?.budget ?? {};
  const parts = [];
  const tokens = (used.prompt_tokens ?? 0) + (used.completion_tokens ?? 0);
  if (tokens) {
    parts.push(`${Math.round(tokens).toLocaleString()} tokens${budget.max_tokens ? ` of ${budget.max_tokens.toLocaleString()}` : ''}`);
  }
  if (used.cost_usd !== undefined) {
    parts.push(`$${Number(used.cost_usd).toFixed(4)}${budget.max_cost_usd ? ` of $${budget.max_cost_usd}` : ''}`);
  }
  const seconds = generations.generations.reduce((sum, g) => sum + (g.wall_seconds ?? 0), 0);
  parts.push(`${Math.round(seconds)} s${budget.max_seconds ? ` of ${budget.max_seconds} s` : ''} in generations`);
  replace(byId('budget'), parts.join(' · '));
}

function episodeQuery(cursor) {
  return query({
    limit: 15,
    cursor,
    outcome: byId('filter-outcome').value,
    environment: byId('filter-environment').value,
    generation: byId('filter-generation').value,
  });
}

/** The first page replaces the list (a refresh keeps only the newest); a later page, asked for, is appended. */
function showEpisodes(page, append) {
  const body = byId('episodes').tBodies[0];
  if (append) {
    body.append(...page.episodes.map((episode) => selection.row(episode)));
  } else {
    replace(body, page.episodes.map((episode) => selection.row(episode)));
  }
  if (!body.rows.length) {
    replace(body, h('tr', {}, h('td', { colspan: COLUMNS, class: 'muted' }, 'No episodes match.')));
  }
  episodeCursor = page.next_cursor;
  byId('more-episodes').hidden = !episodeCursor;
}

async function loadEpisodes(append) {
  try {
    showEpisodes(await getJson(`${path}/episodes${episodeQuery(append ? episodeCursor : null)}`), append);
  } catch (error) {
    reportFailure(error, 'loading the episodes');
  }
}

/** The whole list (episodes.html, virtualized) with the same filters. */
function linkAllEpisodes() {
  byId('all-episodes').href = `episodes.html${query({
    run: runId,
    outcome: byId('filter-outcome').value,
    environment: byId('filter-environment').value,
    generation: byId('filter-generation').value,
  })}`;
}

function wireEpisodeFilters(run) {
  const environments = Array.isArray(run.config?.environments) ? run.config.environments : [];
  byId('filter-environment').append(...environments.map((name) => h('option', { value: name }, name)));
  for (const id of ['filter-outcome', 'filter-environment', 'filter-generation']) {
    byId(id).addEventListener('change', () => {
      linkAllEpisodes();
      loadEpisodes(false);
    });
  }
  byId('more-episodes').addEventListener('click', () => loadEpisodes(true));
  linkAllEpisodes();
}

async function refresh() {
  try {
    const [run, metrics, capability, generations, episodes] = await Promise.all([
      getJson(path),
      getJson(`${path}/metrics`),
      getJson(`${path}/capability`),
      getJson(`${path}/generations`),
      getJson(`${path}/episodes${episodeQuery(null)}`),
    ]);
    clearMessage();
    showRun(run);
    showBudget(run, generations);
    successCurve.update(metrics);
    rewardCurve.update(metrics);
    heatmap.update(capability);
    showEpisodes(episodes, false);
  } catch (error) {
    reportFailure(error, 'refreshing the run', refresh); // unreachable: refreshed again once the API is back
  }
}

/** At most one refresh per ``delay``: a running loop sends events faster than that, and a debounce that restarts
 * its wait at each one would never fire while the run goes on. */
function scheduleRefresh(delay = 300) {
  if (refreshTimer !== null && delay > 0) {
    return;
  }
  window.clearTimeout(refreshTimer);
  refreshTimer = window.setTimeout(() => {
    refreshTimer = null;
    refresh();
  }, delay);
}

function onEvent(event) {
  addToTicker(byId('ticker'), event);
  replace(byId('current-step'), line(event));
  if (REFRESH_ON.has(event.type) || STATUS_ON.has(event.type)) {
    scheduleRefresh();
  }
}

function onStreamState(state, wait) {
  const element = byId('stream-state');
  const text = {
    connecting: 'connecting…',
    live: 'live',
    reconnecting: `reconnecting in ${Math.round((wait ?? 0) / 1000)} s…`,
    'signed-out': 'stopped: sign in again',
  }[state];
  element.className = `state-${state === 'live' ? 'live' : state === 'signed-out' ? 'down' : 'reconnecting'}`;
  element.dataset.state = state;
  replace(element, text);
  if (state === 'signed-out') {
    showSignedOut(true);
  }
}

/** The run's stored events, oldest first: the last ones fill the ticker; the stream goes on after the last id. */
async function history() {
  let after = 0;
  let kept = [];
  for (;;) {
    const page = await getJson(`/v1/events${query({ run_id: runId, after, limit: 1000 })}`);
    kept = kept.concat(page.events).slice(-HISTORY_KEPT);
    if (page.events.length < 1000) {
      return { events: kept, after: page.next_after };
    }
    after = page.next_after;
  }
}

async function control(action) {
  const note = byId('control-note');
  replace(note, `${action}…`);
  try {
    await postJson(`${path}/${action}`);
    replace(note, action === 'stop' ? 'asked to stop at its next step' : 'resuming in a process of its own');
  } catch (error) {
    replace(note, error.message);
  }
  scheduleRefresh(0);
}

async function main() {
  session = await startPage();
  if (!session) {
    return;
  }
  if (!runId) {
    showMessage('No run was given in the address: open one from the runs list.');
    return;
  }
  await openRun();
}

/** The run, its controls and its event stream; tried again (with the banner up) while the API is unreachable. */
async function openRun() {
  let run;
  let catalog;
  let past;
  let types;
  try {
    run = await getJson(path);
    [catalog, past, types] = await Promise.all([getJson('/v1/environments'), history(), getJson('/ui/event-types')]);
  } catch (error) {
    if (error.status === 404 || error.status === 422) {
      showMessage(`There is no run "${runId}": check the address, or pick a run from the runs list.`);
    } else {
      reportFailure(error, 'loading the run', openRun);
    }
    return;
  }
  showRun(run);
  heatmap.setLadders(catalog.environments, run.config?.environments ?? []);
  byId('run').hidden = false;
  wireEpisodeFilters(run);
  byId('stop').addEventListener('click', () => control('stop'));
  byId('resume').addEventListener('click', () => control('resume'));
  past.events.forEach((event) => addToTicker(byId('ticker'), event));
  if (past.events.length) {
    replace(byId('current-step'), line(past.events.at(-1)));
  }
  new RunStream({ runId, types, onEvent, onState: onStreamState, after: past.after }).open();
  await refresh();
}

await main();
