// The capability heatmap: success per environment x difficulty as of a chosen generation. A cell shows the rate of
// the latest generation up to the chosen one that attempted it (faded when that is an earlier generation); the cells
// attempted in the chosen generation are where the curriculum put its tasks, the frontier, and are outlined.
import { byId, h, percent, replace } from './dom.js';

function colour(rate) {
  const hue = Math.round(rate * 120);
  return `hsl(${hue} 65% ${88 - rate * 28}%)`;
}

/** environment -> difficulty -> {cell, generation} as of ``upTo`` */
function asOf(capability, upTo) {
  const known = new Map();
  for (const generation of capability.generations) {
    if (generation.generation > upTo) {
      break;
    }
    for (const cell of generation.cells) {
      if (!known.has(cell.environment)) {
        known.set(cell.environment, new Map());
      }
      known.get(cell.environment).set(cell.difficulty, { cell, generation: generation.generation });
    }
  }
  return known;
}

export class Heatmap {
  constructor({ table, slider, label }) {
    this.table = byId(table);
    this.slider = byId(slider);
    this.label = byId(label);
    this.capability = { generations: [] };
    this.ladders = new Map();
    this.followLatest = true;
    this.slider.addEventListener('input', () => {
      const generations = this.capability.generations;
      this.followLatest = Number(this.slider.value) === generations.length - 1;
      this.render();
    });
  }

  /** Each environment's difficulty ladder (GET /v1/environments) and the run's own environments, so the map shows
   * the levels not reached yet too. */
  setLadders(environments, runEnvironments) {
    const wanted = new Set(runEnvironments);
    this.ladders = new Map(environments.filter((e) => wanted.has(e.name)).map((e) => [e.name, e.difficulties]));
  }

  update(capability) {
    this.capability = capability;
    const count = capability.generations.length;
    this.slider.max = String(Math.max(count - 1, 0));
    this.slider.disabled = count < 2;
    if (this.followLatest || Number(this.slider.value) > count - 1) {
      this.slider.value = String(Math.max(count - 1, 0));
    }
    this.render();
  }

  render() {
    const generations = this.capability.generations;
    if (!generations.length) {
      replace(this.table, h('tbody', {}, h('tr', {}, h('td', { class: 'muted' }, 'No attempts yet.'))));
      replace(this.label, '');
      return;
    }
    const chosen = generations[Number(this.slider.value)] ?? generations[generations.length - 1];
    const known = asOf(this.capability, chosen.generation);
    const attempted = generations.flatMap((g) => g.cells);
    const ladders = [...this.ladders.values()].flat();
    const difficulties = [...new Set([...ladders, ...attempted.map((c) => c.difficulty)])].sort((a, b) => a - b);
    const environments = [...new Set([...this.ladders.keys(), ...attempted.map((c) => c.environment)])].sort();
    const frontier = new Set(chosen.cells.map((c) => `${c.environment}|${c.difficulty}`));
    const head = h('thead', {}, h('tr', {}, h('th', {}, 'environment'), difficulties.map((d) => h('th', {}, `d${d}`))));
    const rows = environments.map((environment) =>
      h('tr', {}, h('th', {}, environment), difficulties.map((difficulty) => {
        const entry = known.get(environment)?.get(difficulty);
        const dataset = { environment, difficulty: String(difficulty) };
        if (!entry && this.ladders.has(environment) && !this.ladders.get(environment).includes(difficulty)) {
          return h('td', { class: 'none', dataset }, '');
        }
        if (!entry) {
          return h('td', { class: 'empty', title: 'not attempted yet', dataset }, '·');
        }
        const { cell, generation } = entry;
        const classes = [frontier.has(`${environment}|${difficulty}`) ? 'frontier' : '', generation < chosen.generation ? 'stale' : ''];
        const td = h(
          'td',
          {
            class: classes.join(' ').trim(),
            title: `${environment} difficulty ${difficulty}: ${cell.successes} of ${cell.attempts} in generation ${generation}`,
            dataset,
          },
          percent(cell.success_rate),
        );
        td.style.backgroundColor = colour(cell.success_rate);
        return td;
      })),
    );
    replace(this.table, head, h('tbody', {}, rows));
    this.table.dataset.generation = String(chosen.generation);
    replace(this.label, `generation ${chosen.generation} of ${generations[generations.length - 1].generation}`);
  }
}
