// A long list drawn a window at a time: only the rows in view, and a few either side, are in the document; a spacer
// above and one below keep the scrollbar true to the whole list. Every row has one height (the stylesheet fixes it;
// it is measured on the first row drawn). ``onNearEnd`` asks for more when the view comes within a screen of the end.
// Spacer heights are set through the CSSOM, which the Content-Security-Policy allows (style attributes it would not).

export class VirtualRows {
  constructor({ scroller, body, before, after, row, empty, overscan = 10, onNearEnd = null }) {
    Object.assign(this, { scroller, body, before, after, row, empty, overscan, onNearEnd });
    this.items = [];
    this.rowHeight = 0;
    this.frame = 0;
    this.first = -1;
    this.last = -1;
    scroller.addEventListener('scroll', () => this.schedule(), { passive: true });
    window.addEventListener('resize', () => this.schedule());
  }

  /** The list changed: draw again (rows already drawn for the same window are redrawn too, for their state). */
  setItems(items) {
    this.items = items;
    this.first = -1;
    this.render();
  }

  /** Items added at the top: keeps what is in view where it is. */
  prepend(items) {
    if (!items.length) {
      return;
    }
    this.items = items.concat(this.items);
    if (this.scroller.scrollTop > 0 && this.rowHeight) {
      this.scroller.scrollTop += items.length * this.rowHeight;
    }
    this.first = -1;
    this.render();
  }

  schedule() {
    if (!this.frame) {
      this.frame = window.requestAnimationFrame(() => {
        this.frame = 0;
        this.render();
      });
    }
  }

  measure() {
    if (!this.rowHeight && this.body.rows.length && this.items.length) {
      this.rowHeight = this.body.rows[0].getBoundingClientRect().height || 0;
    }
    return this.rowHeight || 32;
  }

  render() {
    const started = performance.now();
    const count = this.items.length;
    const height = this.measure();
    const header = this.body.parentElement?.tHead?.offsetHeight ?? 0;
    const top = Math.max(0, this.scroller.scrollTop - header);
    const inView = Math.ceil(this.scroller.clientHeight / height) + 1;
    const first = Math.max(0, Math.min(count - 1, Math.floor(top / height) - this.overscan));
    const last = Math.min(count, Math.floor(top / height) + inView + this.overscan);
    if (count === 0) {
      this.body.replaceChildren(this.empty());
    } else if (first !== this.first || last !== this.last) {
      const rows = [];
      for (let index = first; index < last; index += 1) {
        const row = this.row(this.items[index], index);
        row.dataset.index = String(index);
        rows.push(row);
      }
      this.body.replaceChildren(...rows);
    }
    this.first = count ? first : -1;
    this.last = count ? last : -1;
    this.before.style.height = `${count ? first * height : 0}px`;
    this.after.style.height = `${count ? (count - last) * height : 0}px`;
    if (!this.rowHeight && count) {
      this.measure();
      this.first = -1;
      this.schedule(); // drawn with a guessed height: again with the real one
    }
    const box = this.scroller.dataset;
    box.loaded = String(count);
    box.first = String(Math.max(first, 0));
    box.rendered = String(this.body.rows.length);
    box.renderMs = (performance.now() - started).toFixed(2);
    if (this.onNearEnd && count - last < inView) {
      this.onNearEnd();
    }
  }
}
