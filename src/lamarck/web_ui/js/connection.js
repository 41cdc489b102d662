// Whether the API answers, for every page. A call that gets no answer or a 5xx shows a banner saying the API is
// unreachable; the calls that failed are tried again after a wait that doubles from 1 s to 30 s (the run view's
// event stream waits the same way, with the same Backoff), and once a round of them succeeds the banner goes and the
// page shows what they fetched. Nothing on the page is cleared while the API is away.
import { getJson, leaving, reachability } from './api.js';
import { h, replace } from './dom.js';

export const FIRST_WAIT_MS = 1000;
export const MAX_WAIT_MS = 30000;

/** 1 s, 2 s, 4 s, … up to 30 s; reset once something gets through. */
export class Backoff {
  constructor(first = FIRST_WAIT_MS, max = MAX_WAIT_MS) {
    this.first = first;
    this.max = max;
    this.wait = first;
  }

  next() {
    const wait = this.wait;
    this.wait = Math.min(this.wait * 2, this.max);
    return wait;
  }

  reset() {
    this.wait = this.first;
  }
}

function reason(error) {
  if (!error || error.status === 0) {
    return 'the server does not answer (is `lamarck serve` running?)';
  }
  return `it answered HTTP ${error.status}${error.message && error.message !== `HTTP ${error.status}` ? ` (${error.message})` : ''}`;
}

class Connection {
  constructor() {
    this.backoff = new Backoff();
    this.waiting = []; // {op, resolve}: an op to run again when the API is back, or a caller waiting for that
    this.failures = 0; // unreachable answers since the current round began
    this.lastError = null;
    this.timer = null;
    this.ticker = null;
    this.deadline = 0;
    this.cycling = false;
    this.banner = null;
    reachability.addEventListener('down', (event) => this.noteDown(event.detail));
    leaving.signal.addEventListener('abort', () => this.stop());
  }

  get down() {
    return this.banner !== null && !this.banner.hidden;
  }

  /** A call got no answer or a 5xx: say so, and start trying again unless a try is already planned. */
  noteDown(error) {
    if (leaving.signal.aborted) {
      return;
    }
    this.failures += 1;
    this.lastError = error;
    if (!this.cycling && this.timer === null) {
      this.schedule();
    }
  }

  /** Resolves once the API answers again; ``op`` (the call that failed, with its rendering) is run first, and is
   * what tells: when it fails again it registers itself again and the next try waits longer. */
  whenBack(op = null) {
    return new Promise((resolve) => {
      if (op !== null && this.waiting.some((w) => w.op === op)) {
        resolve(); // already waiting: run once
        return;
      }
      this.waiting.push({ op, resolve });
      if (!this.cycling && this.timer === null && !leaving.signal.aborted) {
        this.schedule();
      }
    });
  }

  schedule() {
    const wait = this.backoff.next();
    this.deadline = Date.now() + wait;
    this.timer = window.setTimeout(() => this.round(), wait);
    this.show();
  }

  /** Try again now (the banner's button): the planned wait is skipped, the backoff goes on growing. */
  retryNow() {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
      this.round();
    }
  }

  async round() {
    this.timer = null;
    this.cycling = true;
    this.failures = 0;
    const batch = this.waiting;
    this.waiting = [];
    const ops = batch.filter((w) => w.op !== null);
    this.showTrying();
    if (ops.length) {
      await Promise.allSettled(ops.map((w) => Promise.resolve().then(w.op)));
      ops.forEach((w) => w.resolve());
    } else {
      await getJson('/v1/health').catch(() => null);
    }
    this.cycling = false;
    const callers = batch.filter((w) => w.op === null);
    if (leaving.signal.aborted) {
      return;
    }
    if (this.failures) {
      this.waiting.push(...callers);
      this.schedule();
      return;
    }
    this.backoff.reset();
    this.hide();
    callers.forEach((w) => w.resolve());
    if (this.waiting.length) {
      this.schedule(); // registered by an op that failed for a reason other than reachability: try once more
    }
  }

  element() {
    if (this.banner === null) {
      const retry = h('button', { type: 'button', id: 'api-down-retry' }, 'Retry now');
      retry.addEventListener('click', () => this.retryNow());
      this.banner = h('div', { id: 'api-down', class: 'banner', role: 'alert', hidden: true },
        h('span', { id: 'api-down-text' }), ' ', retry);
      const header = document.querySelector('header');
      if (header) {
        header.after(this.banner);
      } else {
        document.body.prepend(this.banner);
      }
    }
    return this.banner;
  }

  text(tail) {
    const banner = this.element();
    replace(banner.querySelector('#api-down-text'), `The Lamarck API is unreachable: ${reason(this.lastError)}. ${tail}`);
    banner.hidden = false;
  }

  show() {
    const tick = () => {
      const seconds = Math.max(0, Math.ceil((this.deadline - Date.now()) / 1000));
      this.text(`Retrying in ${seconds} s; what is on the page stays as it was.`);
    };
    tick();
    window.clearInterval(this.ticker);
    this.ticker = window.setInterval(tick, 1000);
  }

  showTrying() {
    window.clearInterval(this.ticker);
    this.ticker = null;
    if (this.banner !== null && !this.banner.hidden) {
      this.text('Retrying now…');
    }
  }

  hide() {
    window.clearInterval(this.ticker);
    this.ticker = null;
    if (this.banner !== null) {
      this.banner.hidden = true;
    }
  }

  stop() {
    window.clearTimeout(this.timer);
    this.timer = null;
    this.hide();
  }
}

export const connection = new Connection();
