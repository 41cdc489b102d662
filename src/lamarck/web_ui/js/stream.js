// A run's events over server-sent events. EventSource resends Last-Event-ID itself while it retries; when it gives
// up (the server answered with an error, or went away), this opens a new stream after the last id it saw, waiting
// longer each time (connection.js's Backoff: 1 s doubling to 30 s) or until the page's connection sees the API
// back, whichever is first, and says so through onState, so no event is lost or shown twice.
import { ApiFailure, getJson, leaving, query } from './api.js';
import { Backoff, connection } from './connection.js';

export class RunStream {
  constructor({ runId, types, onEvent, onState, after = 0 }) {
    this.runId = runId;
    this.types = types;
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastId = after;
    this.backoff = new Backoff();
    this.source = null;
    this.timer = null;
    leaving.signal.addEventListener('abort', () => this.close());
  }

  open() {
    if (leaving.signal.aborted) {
      return;
    }
    this.onState('connecting');
    const url = `/v1/events/stream${query({ run_id: this.runId, after: this.lastId })}`;
    const source = new EventSource(url);
    this.source = source;
    source.addEventListener('open', () => {
      this.backoff.reset();
      this.onState('live');
    });
    for (const type of this.types) {
      source.addEventListener(type, (message) => this.deliver(message));
    }
    source.addEventListener('error', () => this.lost(source));
  }

  deliver(message) {
    const id = Number(message.lastEventId);
    if (Number.isFinite(id) && id <= this.lastId) {
      return;
    }
    this.lastId = id;
    this.onEvent(JSON.parse(message.data));
  }

  async lost(source) {
    if (source !== this.source) {
      return;
    }
    source.close();
    this.source = null;
    const session = await getJson('/ui/session').catch((error) => error);
    if (session && session.signed_in === false) {
      this.onState('signed-out');
      return;
    }
    const wait = this.backoff.next();
    this.onState('reconnecting', wait);
    this.timer = window.setTimeout(() => this.reopen(), wait);
    if (session instanceof ApiFailure && session.unreachable) {
      connection.whenBack().then(() => this.reopen()); // the banner is up: reopen as soon as the API answers
    }
  }

  reopen() {
    if (this.source !== null || leaving.signal.aborted) {
      return;
    }
    window.clearTimeout(this.timer);
    this.timer = null;
    this.open();
  }

  close() {
    window.clearTimeout(this.timer);
    this.source?.close();
    this.source = null;
  }
}
