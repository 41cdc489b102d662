// Hand the executor a task under a chosen release (POST /v1/tasks) and follow it until it is answered: the answer,
// each attempt's answer with its episode, the outcome and reward when verified, the tokens spent.
import { getJson, postJson, query } from './api.js';
import { byId, h, replace } from './dom.js';
import { can, reportFailure, startPage } from './page.js';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

async function fillChoices() {
  try {
    const [catalog, models] = await Promise.all([getJson('/v1/environments'), getJson(`/v1/models${query({ limit: 200 })}`)]);
    byId('environment').append(...catalog.environments.map((e) => h('option', { value: e.name }, e.name)));
    byId('model').append(...models.models.map((m) => h('option', { value: m.id }, `${m.id} (${m.status})`)));
  } catch (error) {
    reportFailure(error, 'loading the environments and models', fillChoices);
  }
}

function showTask(task) {
  const result = task.result;
  const facts = [['status', h('span', { class: `status ${task.status}`, id: 'task-status' }, task.status)]];
  if (task.error) {
    facts.push(['error', task.error]);
  }
  if (result) {
    facts.push(
      ['answer', h('strong', { id: 'task-answer' }, result.answer ?? '(none)')],
      ['outcome', h('span', { class: `status ${result.outcome}` }, result.outcome), result.reward !== null ? ` (reward ${result.reward})` : ''],
      ['release', `model ${result.model_version} · harness ${result.harness_version}`],
      ['spent', `${result.usage?.total_tokens ?? (result.usage?.prompt_tokens ?? 0) + (result.usage?.completion_tokens ?? 0)} tokens, ${result.seconds.toFixed(1)} s`],
    );
  }
  const attempts = (result?.episode_ids ?? []).map((id, index) =>
    h('li', {}, h('a', { href: `episode.html${query({ id })}` }, `attempt ${index + 1}`), `: ${result.answers[index] ?? '(no answer)'}`));
  replace(byId('result'),
    h('h2', {}, 'Task ', h('code', {}, task.id)),
    h('dl', {}, facts.flatMap(([name, ...value]) => [h('dt', {}, name), h('dd', {}, value)])),
    attempts.length ? [h('h2', {}, 'Attempts'), h('ol', { id: 'attempts' }, attempts)] : '');
  byId('result').hidden = false;
}

/** Polls the task until it ends; when the API goes away meanwhile, following resumes once it is back. */
async function follow(id) {
  let wait = 300;
  try {
    for (;;) {
      const task = await getJson(`/v1/tasks/${encodeURIComponent(id)}`);
      showTask(task);
      if (TERMINAL.has(task.status)) {
        return;
      }
      await new Promise((resolve) => window.setTimeout(resolve, wait));
      wait = Math.min(wait * 1.5, 3000);
    }
  } catch (error) {
    reportFailure(error, `following task ${id}`, () => follow(id));
  }
}

async function submit(event) {
  event.preventDefault();
  const body = { prompt: byId('prompt').value, samples: Number(byId('samples').value) || 1 };
  for (const [field, id] of [['environment', 'environment'], ['expected', 'expected'], ['model_version', 'model']]) {
    if (byId(id).value) {
      body[field] = byId(id).value;
    }
  }
  const solve = byId('solve');
  solve.disabled = true;
  replace(byId('task-note'), 'submitted…');
  try {
    const task = await postJson('/v1/tasks', body);
    showTask(task);
    await follow(task.id);
    replace(byId('task-note'), '');
  } catch (error) {
    replace(byId('task-note'), '');
    reportFailure(error, 'solving the task');
  } finally {
    solve.disabled = false;
  }
}

const session = await startPage();
if (session) {
  await fillChoices();
  byId('task-form').hidden = false;
  byId('task-form').addEventListener('submit', submit);
  if (!can(session, 'tasks')) {
    byId('solve').disabled = true;
    replace(byId('task-note'), 'solving tasks needs a key with the tasks scope');
  }
}
