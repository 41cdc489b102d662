// One attempt step by step (the task, each model output, tool call and observation, the verdict with the critic's
// first wrong step and lesson, the release), or two attempts side by side, aligned step by step.
import { getJson, query } from './api.js';
import { byId, h, replace } from './dom.js';
import { param, reportFailure, showMessage, startPage } from './page.js';

const KIND_LABEL = { prompt: 'prompt', model_output: 'model output', tool_call: 'tool call', observation: 'observation' };

function stepBody(step) {
  const parts = [];
  if (step.content) {
    parts.push(h('pre', {}, step.content));
  }
  for (const call of step.tool_calls ?? []) {
    const fn = call.function ?? call;
    parts.push(h('pre', {}, `${fn.name ?? call.name ?? 'tool'}(${fn.arguments ?? call.arguments ?? ''})`));
  }
  if (!parts.length) {
    parts.push(h('pre', { class: 'muted' }, '(empty)'));
  }
  return parts;
}

function stepLabel(step) {
  const label = KIND_LABEL[step.kind] ?? step.kind;
  return h('span', { class: 'step-kind' }, step.kind === 'observation' && step.name ? `${label} from ${step.name}` : label);
}

/** The step the critic named: it numbers the model's own (assistant) steps from 1. */
function wrongStepIndex(steps, verdict) {
  if (!verdict || verdict.first_wrong_step === null) {
    return null;
  }
  const assistant = steps.filter((s) => s.role === 'assistant');
  return assistant[verdict.first_wrong_step - 1]?.index ?? null;
}

function facts(episode) {
  const rows = [
    ['outcome', h('span', { class: `status ${episode.outcome}` }, episode.outcome)],
    ['reward', episode.reward ?? '–'],
    ['answer', episode.answer ?? '–'],
    ['environment', `${episode.environment}, difficulty ${episode.difficulty}`],
    ['generation', episode.generation ?? '–'],
    ['release', `model ${episode.model_version} · harness ${episode.harness_version ?? 'default'}`],
    ['run', episode.run_id ? h('a', { href: `run.html${query({ id: episode.run_id })}` }, episode.run_id) : '–'],
  ];
  return h('dl', {}, rows.flatMap(([name, value]) => [h('dt', {}, name), h('dd', {}, value)]));
}

function verdictView(verdict) {
  if (!verdict) {
    return h('section', { id: 'verdict' }, h('h2', {}, 'Verdict'), h('p', { class: 'muted' }, 'Not judged by the critic yet.'));
  }
  const rows = [
    ['verdict', h('span', { class: `verdict ${verdict.passed ? 'passed' : 'failed'}` }, verdict.passed ? 'passed' : 'failed'),
      ` (reward ${verdict.reward}, by ${verdict.source})`],
    ['first wrong step', verdict.first_wrong_step ?? '–',
      verdict.first_error && verdict.first_error !== String(verdict.first_wrong_step) ? ` — ${verdict.first_error}` : ''],
    ['critique', verdict.critique ?? '–'],
    ['lesson', verdict.lesson ?? '–'],
  ];
  if (verdict.repaired_episode_id) {
    rows.push(['repaired by', h('a', { href: `episode.html${query({ id: verdict.repaired_episode_id })}` }, verdict.repaired_episode_id)]);
  }
  return h('section', { id: 'verdict' }, h('h2', {}, 'Verdict'),
    h('dl', {}, rows.flatMap(([name, ...value]) => [h('dt', {}, name), h('dd', {}, value)])));
}

function single(episode) {
  const wrong = wrongStepIndex(episode.steps, episode.verdict);
  const steps = episode.steps.map((step) =>
    h('li', { class: `step${step.index === wrong ? ' wrong' : ''}`, dataset: { kind: step.kind } },
      stepLabel(step), step.index === wrong ? h('span', { class: 'status failed' }, ' ← the critic\'s first wrong step') : '',
      stepBody(step)));
  replace(byId('title'), `Episode `, h('code', {}, episode.id));
  replace(byId('episode'),
    h('section', {}, h('h2', {}, 'Task'), h('pre', { id: 'task' }, episode.prompt), facts(episode),
      episode.failure_reason ? h('p', { class: 'status failed' }, `ended without an answer: ${episode.failure_reason}`) : ''),
    verdictView(episode.verdict),
    h('section', {}, h('h2', {}, `Steps (${episode.steps.length})`), h('ol', { id: 'steps', class: 'steps', start: '0' }, steps)));
  byId('this').value = episode.id;
  byId('compare-form').hidden = false;
}

function side(step) {
  return step ? h('td', {}, stepLabel(step), stepBody(step)) : h('td', { class: 'muted' }, '—');
}

function compared(comparison) {
  const { a, b } = comparison;
  replace(byId('title'), 'Episodes ', h('code', {}, a.id), ' and ', h('code', {}, b.id), ' side by side');
  const rows = comparison.steps.map((step) =>
    h('tr', { class: step.same ? 'step' : 'step differs', dataset: { same: String(step.same) } },
      h('th', {}, step.index), side(step.a), side(step.b)));
  const link = (episode) => h('a', { href: `episode.html${query({ id: episode.id })}` }, episode.id);
  replace(byId('episode'),
    h('section', {}, h('p', {}, comparison.same_task ? 'The same task.' : 'Different tasks.', ' ',
      comparison.first_difference === null ? 'The attempts do not differ.' : `They first differ at step ${comparison.first_difference}.`),
    h('table', { id: 'comparison' },
      h('thead', {}, h('tr', {}, h('th', {}, 'step'), h('th', {}, link(a)), h('th', {}, link(b)))),
      h('tbody', {},
        h('tr', {}, h('th', {}, ''), h('td', {}, facts(a)), h('td', {}, facts(b))),
        rows))));
}

const id = param('id');
const other = param('compare');

async function show() {
  try {
    if (other) {
      compared(await getJson(`/v1/episodes/compare${query({ a: id, b: other })}`));
    } else {
      single(await getJson(`/v1/episodes/${encodeURIComponent(id)}`));
    }
    byId('episode').hidden = false;
  } catch (error) {
    if (error.status === 404 || error.status === 422) {
      showMessage(`There is no episode ${other ? `"${id}" or "${other}"` : `"${id}"`}: check the address. ${error.message}`);
    } else {
      reportFailure(error, 'loading the episode', show);
    }
  }
}

async function main() {
  if (!(await startPage())) {
    return;
  }
  if (!id) {
    showMessage('No episode was given in the address: open one from a run’s page.');
    return;
  }
  await show();
}

await main();
