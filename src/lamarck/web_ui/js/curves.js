// Learning curves drawn with uPlot: one chart for success, one for reward, each with the run overall (its bucket's
// min-max band shaded: the server downsamples long runs and keeps the spikes) and one line per environment.
import uPlot from '../vendor/uplot/uPlot.esm.js';

const PALETTE = ['#1f6feb', '#1a7f37', '#bf3989', '#9a6700', '#8250df', '#0a7a8a', '#cf222e'];
const HEIGHT = 240;

function valueOf(bucket, field) {
  return field === 'success' ? bucket.success_rate : bucket.reward_mean;
}

function seriesOf(metrics, field, withOverall) {
  const overall = metrics.overall.buckets;
  const data = [overall.map((bucket) => bucket.last)];
  const series = [{ label: 'generation' }];
  if (withOverall) {
    series.push(
      { label: 'min', stroke: 'rgba(31,111,235,.25)', width: 1, points: { show: false } },
      { label: 'max', stroke: 'rgba(31,111,235,.25)', width: 1, points: { show: false } },
      { label: 'overall', stroke: PALETTE[0], width: 2.5, spanGaps: true },
    );
    data.push(overall.map((b) => b[`${field}_min`]), overall.map((b) => b[`${field}_max`]), overall.map((b) => valueOf(b, field)));
  }
  metrics.environments.forEach((line, index) => {
    series.push({ label: line.environment, stroke: PALETTE[(index + 1) % PALETTE.length], width: withOverall ? 1.5 : 2.5, spanGaps: true });
    data.push(line.buckets.map((b) => valueOf(b, field)));
  });
  return { series, data };
}

function signature(series) {
  return series.map((s) => s.label).join('|');
}

/** A chart in ``element`` that follows the run (or, without ``overall``, one line per entry of ``environments``): update(metrics) redraws in place, rebuilding only when the set of
 * environments changes. ``element.dataset.points`` holds how many points it shows (the browser tests read it). */
export class Curve {
  constructor(element, field, title, { overall = true } = {}) {
    this.element = element;
    this.withOverall = overall;
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
    const { series, data } = seriesOf(metrics, this.field, this.withOverall);
    if (!this.plot || signature(series) !== this.shape) {
      this.plot?.destroy();
      this.plot = new uPlot(
        {
          title: this.title,
          width: this.width(),
          height: HEIGHT,
          scales: { x: { time: false }, y: { range: this.field === 'success' ? [0, 1] : undefined } },
          axes: [{ label: 'generation', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, {}],
          bands: this.withOverall ? [{ series: [2, 1], fill: 'rgba(31,111,235,.08)' }] : [],
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
