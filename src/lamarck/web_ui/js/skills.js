// The skill library: each skill's provenance, version and record of use; a chosen skill's code, tests, the episodes
// it came from and its versions; the lessons closest in meaning to a question, with how often they helped or harmed.
import { getJson, query } from './api.js';
import { byId, h, percent, replace } from './dom.js';
import { clearMessage, param, reportFailure, showMessage, startPage } from './page.js';

let cursor = null;

function row(skill) {
  const link = h('a', { href: `skills.html${query({ name: skill.name })}` }, skill.name);
  link.addEventListener('click', (event) => {
    event.preventDefault();
    window.history.replaceState(null, '', link.href);
    show(skill.name);
  });
  return h('tr', { dataset: { name: skill.name } },
    h('td', {}, link, h('br'), h('span', { class: 'muted' }, skill.description)),
    h('td', {}, skill.provenance),
    h('td', {}, `v${skill.version}${skill.status === 'deprecated' ? ' (deprecated)' : ''}`),
    h('td', {}, `${skill.times_used}×`),
    h('td', {}, percent(skill.success_rate)));
}

async function show(name) {
  const panel = byId('skill');
  try {
    const skill = await getJson(`/v1/skills/${encodeURIComponent(name)}`);
    const episodes = skill.source_episode_ids.map((id) => h('li', {}, h('a', { href: `episode.html${query({ id })}` }, id)));
    replace(panel,
      h('h2', {}, h('code', {}, skill.signature)),
      h('p', {}, skill.description),
      h('p', { class: 'muted' }, `${skill.provenance}, version ${skill.version}, used ${skill.times_used}× (${percent(skill.success_rate)} succeeded)`),
      h('h2', {}, 'Code'), h('pre', { id: 'skill-code' }, skill.code),
      h('h2', {}, 'Tests'), h('pre', { id: 'skill-tests' }, skill.tests || '(none)'),
      episodes.length ? [h('h2', {}, 'Learned from'), h('ul', {}, episodes)] : '',
      h('h2', {}, 'Versions'),
      h('ul', { id: 'skill-versions' }, skill.versions.map((v) => h('li', {}, `v${v.version} `, h('code', {}, v.signature), v.docstring ? ` — ${v.docstring}` : ''))));
    panel.hidden = false;
  } catch (error) {
    if (error.status === 404 || error.status === 422) {
      showMessage(`There is no skill "${name}": pick one from the list.`);
    } else {
      reportFailure(error, `loading skill ${name}`, () => show(name));
    }
  }
}

async function loadPage() {
  try {
    const page = await getJson(`/v1/skills${query({ limit: 100, cursor })}`);
    clearMessage();
    byId('skills').tBodies[0].append(...page.skills.map(row));
    cursor = page.next_cursor;
    byId('more').hidden = !cursor;
    byId('skills-view').hidden = false;
    if (!byId('skills').tBodies[0].rows.length) {
      showMessage('No skills yet: the loop adds verified skills as it works, or add one with `lamarck skills add`.', 'info');
    }
  } catch (error) {
    reportFailure(error, 'loading the skills', loadPage);
  }
}

async function findLessons(event) {
  event.preventDefault();
  try {
    const hits = await getJson(`/v1/lessons${query({ q: byId('lesson-query').value, k: 10 })}`);
    const rows = hits.lessons.map((lesson) => h('tr', {},
      h('td', {}, lesson.text), h('td', {}, lesson.environment ?? 'any'), h('td', {}, lesson.times_seen),
      h('td', {}, lesson.helpful), h('td', {}, lesson.harmful)));
    replace(byId('lessons').tBodies[0], rows.length ? rows : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No lessons yet.')));
    byId('lessons').hidden = false;
  } catch (error) {
    reportFailure(error, 'searching the lessons', () => findLessons(event));
  }
}

if (await startPage()) {
  byId('lesson-search').addEventListener('submit', findLessons);
  byId('more').addEventListener('click', loadPage);
  await loadPage();
  const chosen = param('name');
  if (chosen) {
    await show(chosen);
  }
}
