// One line of text per event, for the ticker and the run's "current step".
import { clock, h, percent } from './dom.js';

const KEEP = 200;

function describe(event) {
  const p = event.payload ?? {};
  const at = p.generation !== undefined ? `generation ${p.generation}: ` : '';
  switch (event.type) {
    case 'run_started':
    case 'run_resumed':
      return `${event.type === 'run_started' ? 'started' : 'resumed'} at generation ${p.generation}`;
    case 'tasks_proposed':
      return `${at}${p.count} tasks proposed`;
    case 'episode_finished':
      return `${at}episode ${p.episode_id} (${p.environment} d${p.difficulty}) ${p.outcome}, ${p.steps} steps`;
    case 'verdict':
      return `${at}episode ${p.episode_id} ${p.passed ? 'passed' : 'failed'} (reward ${p.reward})`;
    case 'lesson':
      return `${at}lesson: ${p.text}`;
    case 'skill_added':
      return `${at}skill ${p.name} v${p.version} added`;
    case 'generation_summary':
      return `${at}${p.successes ?? '?'} of ${p.attempts ?? '?'} solved (${percent(p.attempts ? p.successes / p.attempts : null)})`;
    case 'harness_round':
      return `${at}harness round in ${p.environment}: ${p.promoted ? `promoted ${p.promoted}` : 'champion kept'}`;
    case 'model.gate':
      return `gate: ${p.candidate} ${p.promote ? 'promoted' : 'refused'}${p.reason ? ` (${p.reason})` : ''}`;
    case 'run_finished':
    case 'run_stopped':
    case 'run_failed':
    case 'budget_exhausted':
      return `${event.type.replace('run_', 'run ').replace('_', ' ')} after ${p.generations_done} generations${p.reason ? `: ${p.reason}` : ''}`;
    default:
      return `${at}${event.type}`;
  }
}

export function line(event) {
  return describe(event);
}

export function addToTicker(list, event) {
  const item = h('li', { dataset: { id: String(event.id), type: event.type } },
    h('time', { datetime: event.created_at }, clock(event.created_at)), describe(event));
  list.prepend(item);
  while (list.children.length > KEEP) {
    list.lastElementChild.remove();
  }
}
