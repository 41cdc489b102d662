// Learning curves drawn with uPlot: one chart for success, one for reward, each with the run overall (its bucket's
// min-max band shaded: the server downsamples long runs and keeps the spikes) and one line per environment.
import uPlot from '../vendor/uplot/uPlot.esm.js';

const PALETTE = ['#1f6feb', '#1a7f37', '#bf3989', '#9a6700', '#8250df', '#0a7a8a', '#cf222e'];
const HEIGHT = 240;

function seriesOf(metrics, field) {
  const overall = metrics.overall.buckets;
  const x = overall.map((bucket) => bucket.last);
  const data = [x, overall.map((b) => b[`${field}_min`]), overall.map((b) => b[`${field}_max`])];
  const series = [
    { label: 'generation' },
    { label: 'min', stroke: 'rgba(31,111,235,.25)', width: 1, points: { show: false } },
    { label: 'max', stroke: 'rgba(31,111,235,.25)', width: 1, points: { show: false } },
    { label: 'overall', stroke: PALETTE[0], width: 2.5, spanGaps: true },
  ];
  data.push(overall.map((b) => (field === 'success' ? b.success_rate : b.reward_mean)));
  metrics.environments.forEach((environment, index) => {
    series.push({ label: environment.environment, stroke: PALETTE[(index + 1) % PALETTE.length], width: 1.5, spanGaps: true });
    data.push(environment.buckets.map((b) => (field === 'success' ? b.success_rate : b.reward_mean)));
  });
  return { series, data };
}

function signature(series) {
  return series.map((s) => s.label).join('|');
}

/** A chart in ``element`` that follows the run: update(metrics) redraws in place, rebuilding only when the set of
 * environments changes. ``element.dataset.points`` holds how many points it shows (the browser tests read it). */
export class Curve {
  constructor(element, field, title) {
    this.element = element;
    this.field = field;
    this.title = title;
    this.plot = null;
    this.shape = '';
    new ResizeObserver(() => this.plot?.setSize({ width: this.width(), height: HEIGHT })).observe(element);
  }

  width() {
    return Math.max(this.element.clientWidth, 320);
  }

  update(metrics) {
    const { series, data } = seriesOf(metrics, this.field);
    if (!this.plot || signature(series) !== this.shape) {
      this.plot?.destroy();
      this.plot = new uPlot(
        {
          title: this.title,
          width: this.width(),
          height: HEIGHT,
          scales: { x: { time: false }, y: { range: this.field === 'success' ? [0, 1] : undefined } },
          axes: [{ label: 'generation', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, {}],
          bands: [{ series: [2, 1], fill: 'rgba(31,111,235,.08)' }],
          series,
        },
        data,
        this.element,
      );
      this.shape = signature(series);
    } else {
      this.plot.setData(data);
    }
    this.element.dataset.points = String(data[0].length);
  }
}
