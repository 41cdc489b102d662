// A run's episodes as table rows (the run view's latest ones and the whole list's page alike): a tick box to choose
// two to compare side by side, the episode's link, generation, task and outcome. The choice outlives the rows, so a
// list that redraws (a refresh, or a virtual list scrolling) keeps it.
import { query } from './api.js';
import { h } from './dom.js';

export const COLUMNS = 5;

export class EpisodeSelection {
  /** ``link``: the "compare the two selected" anchor, shown when exactly two are ticked. */
  constructor(link) {
    this.link = link;
    this.chosen = new Set();
  }

  toggle(id, on) {
    if (on) {
      this.chosen.add(id);
    } else {
      this.chosen.delete(id);
    }
    const [a, b] = [...this.chosen];
    this.link.hidden = this.chosen.size !== 2;
    if (this.chosen.size === 2) {
      this.link.href = `episode.html${query({ id: a, compare: b })}`;
    }
  }

  row(episode, attributes = {}) {
    const box = h('input', { type: 'checkbox', 'aria-label': `select episode ${episode.id}` });
    box.checked = this.chosen.has(episode.id);
    box.addEventListener('change', () => this.toggle(episode.id, box.checked));
    return h('tr', attributes,
      h('td', {}, box),
      h('td', {}, h('a', { href: `episode.html${query({ id: episode.id })}` }, episode.id)),
      h('td', {}, episode.generation ?? ''),
      h('td', {}, `${episode.environment} d${episode.difficulty}`),
      h('td', {}, h('span', { class: `status ${episode.outcome}` }, episode.outcome)));
  }
}
