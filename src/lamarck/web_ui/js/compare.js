// Runs overlaid on one chart: each run's overall success and reward per generation. Both series come from the
// server's downsampling with the same number of points, so a long run's buckets are cut the same way at each visit.
import { getJson, query } from './api.js';
import { Curve } from './curves.js';
import { byId, h, replace } from './dom.js';
import { reportFailure, showMessage, startPage } from './page.js';

const POINTS = 200;

/** The runs' overall series as one metrics-shaped object: the x axis is the union of their buckets' last
 * generations, and each run is one "environment" line. */
function overlay(runs, metrics) {
  const xs = [...new Set(metrics.flatMap((m) => m.overall.buckets.map((b) => b.last)))].sort((a, b) => a - b);
  const aligned = (buckets) => {
    const byLast = new Map(buckets.map((b) => [b.last, b]));
    return xs.map((x) => byLast.get(x) ?? { last: x, success_rate: null, reward_mean: null });
  };
  return {
    overall: { buckets: xs.map((x) => ({ last: x })) },
    environments: metrics.map((m, index) => ({ environment: `${runs[index].name || "run"} ${runs[index].id.slice(0, 6)}`, buckets: aligned(m.overall.buckets) })),
  };
}

const ids = new URLSearchParams(window.location.search).getAll('run');

async function show() {
  try {
    const runs = await Promise.all(ids.map((id) => getJson(`/v1/runs/${encodeURIComponent(id)}`)));
    const metrics = await Promise.all(ids.map((id) => getJson(`/v1/runs/${encodeURIComponent(id)}/metrics${query({ points: POINTS })}`)));
    replace(byId('title'), 'Runs compared: ', runs.flatMap((run, index) => [index ? ' and ' : '',
      h('a', { href: `run.html${query({ id: run.id })}` }, run.name || run.id)]));
    byId('overlay').hidden = false;
    const merged = overlay(runs, metrics);
    new Curve(byId('success-overlay'), 'success', 'success rate', { overall: false }).update(merged);
    new Curve(byId('reward-overlay'), 'reward', 'mean reward', { overall: false }).update(merged);
  } catch (error) {
    if (error.status === 404 || error.status === 422) {
      showMessage(`One of the runs does not exist: ${error.message}`);
    } else {
      reportFailure(error, 'loading the runs', show);
    }
  }
}

async function main() {
  if (!(await startPage())) {
    return;
  }
  if (ids.length < 2) {
    showMessage('Choose two runs to compare on the runs list.');
    return;
  }
  await show();
}

await main();
