"""A run's whole episode list, virtualized, in a real browser: 5,000 episodes load a page at a time as the list is
scrolled, only the rows in view are in the document, each redraw is quick, and what is ticked survives scrolling."""

from __future__ import annotations

import time
from typing import Any

from playwright.sync_api import expect
from sqlalchemy import insert

from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Episode

from .conftest import Browse

EPISODES = 5000
MAX_ROWS = 60  # in the document at once: a screen's worth and the overscan either side
MEDIAN_RENDER_MS = 50  # a redraw, the median over a scroll through the list


def _key(keys: dict[str, dict[str, str]], name: str) -> str:
    return keys[name]["Authorization"].removeprefix("Bearer ")


def _many_episodes(container: Container, count: int) -> str:
    """A run with ``count`` episodes over generations of 100, alternately passed and failed (inserted in one
    statement: the list reads summaries, not steps)."""
    with container.db.session() as session:
        run = repo.create_run(session, config={"environments": ["arithmetic", "string_ops"]}, name="long")
        tasks = [
            repo.add_task(session, environment=env, difficulty=d, prompt=f"task {d}", run_id=run.id).id
            for env in ("arithmetic", "string_ops")
            for d in (1, 2)
        ]
        rows = [
            {
                "task_id": tasks[i % len(tasks)],
                "run_id": run.id,
                "model_version": "smollm2-135m",
                "answer": "42",
                "outcome": "passed" if i % 2 == 0 else "failed",
                "reward": 1.0 if i % 2 == 0 else 0.0,
                "generation": i // 100,
            }
            for i in range(count)
        ]
        session.execute(insert(Episode), rows)
        return run.id


SCROLL_THROUGH = """async (scroller) => {
  const frame = () => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  let rows = 0;
  const times = [], ids = new Set(), indices = new Set();
  const end = scroller.scrollHeight - scroller.clientHeight;
  for (let top = 0; ; top = Math.min(top + scroller.clientHeight * 2, end)) {
    scroller.scrollTop = top;
    await frame();
    const drawn = scroller.querySelectorAll('tbody tr');
    rows = Math.max(rows, drawn.length);
    times.push(Number(scroller.dataset.renderMs));
    drawn.forEach((row) => { ids.add(row.querySelector('a').textContent); indices.add(row.dataset.index); });
    if (top >= end) {
      break;
    }
  }
  times.sort((a, b) => a - b);
  return { rows, median: times[times.length >> 1], max: times.at(-1), steps: times.length, ids: ids.size,
    indices: indices.size };
}"""


def _loaded(scroller: Any) -> int:
    return int(scroller.get_attribute("data-loaded") or 0)


def test_five_thousand_episodes_render_fast_and_scroll(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    run_id = _many_episodes(container, EPISODES)
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    scroller = page.locator("#episode-list")
    rows = page.locator("#episodes tbody tr")

    started = time.monotonic()
    browse.goto(f"/ui/episodes.html?run={run_id}")
    expect(rows.first).to_be_visible()
    assert time.monotonic() - started < 10, "the first rows took too long"
    expect(page.locator("#title")).to_contain_text("Episodes of run long")
    expect(scroller).to_have_attribute("data-loaded", "200")  # one page; the next when scrolled near
    assert rows.count() <= MAX_ROWS
    expect(page.locator("#episode-count")).to_have_text("200 loaded; more arrive as you scroll")

    rows.nth(1).locator("input[type=checkbox]").check()  # ticked, scrolled away and back: still ticked
    ticked = rows.nth(1).get_attribute("data-index")

    started = time.monotonic()
    while _loaded(scroller) < EPISODES:  # to the end, again and again: a page arrives each time
        before = _loaded(scroller)
        scroller.evaluate("s => { s.scrollTop = s.scrollHeight; }")
        page.wait_for_function(
            "n => Number(document.querySelector('#episode-list').dataset.loaded) > n", arg=before, timeout=20_000
        )
        assert rows.count() <= MAX_ROWS
    assert time.monotonic() - started < 60, "25 pages took too long"
    expect(scroller).to_have_attribute("data-complete", "true")
    expect(page.locator("#episode-count")).to_have_text("5,000 episodes")
    scroller.evaluate("s => { s.scrollTop = s.scrollHeight; }")
    expect(page.locator(f'#episodes tbody tr[data-index="{EPISODES - 1}"]')).to_be_in_viewport()
    row_height = rows.first.evaluate("r => r.getBoundingClientRect().height")
    height = scroller.evaluate("s => s.scrollHeight")
    assert abs(height - EPISODES * row_height) < 100, (height, row_height)  # the scrollbar is true to the list

    scrolled = scroller.evaluate(SCROLL_THROUGH)  # every screen of the 5,000, top to bottom
    assert scrolled["rows"] <= MAX_ROWS, scrolled
    assert scrolled["median"] < MEDIAN_RENDER_MS, scrolled
    assert scrolled["ids"] == scrolled["indices"] == EPISODES, scrolled  # each episode drawn, once in the list

    scroller.evaluate(f"s => {{ s.scrollTop = {2500 * row_height}; }}")
    middle = page.locator('#episodes tbody tr[data-index="2500"]')
    expect(middle).to_be_in_viewport()
    assert 2500 - MAX_ROWS < int(scroller.get_attribute("data-first") or 0) <= 2500
    scroller.evaluate("s => { s.scrollTop = 0; }")
    expect(page.locator(f'#episodes tbody tr[data-index="{ticked}"] input')).to_be_checked()

    rows.nth(3).locator("input[type=checkbox]").check()
    compare = page.locator("#compare")
    expect(compare).to_be_visible()
    assert (compare.get_attribute("href") or "").startswith("episode.html?id=")

    page.select_option("#filter-outcome", "failed")  # filtering starts the list again, with the filter in the address
    expect(scroller).to_have_attribute("data-loaded", "200")
    expect(rows.first).to_contain_text("failed")
    expect(page.locator("#episodes tbody tr", has_text="passed")).to_have_count(0)
    assert "outcome=failed" in page.url


def test_the_run_view_links_to_the_whole_list_with_its_filters(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    run_id = _many_episodes(container, 32)  # 16 in string_ops: the run view shows 15 of them, the whole list all
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto(f"/ui/run.html?id={run_id}")
    page.select_option("#filter-environment", "string_ops")
    expect(page.locator("#episodes tbody tr", has_text="arithmetic")).to_have_count(0)
    expect(page.locator("#episodes tbody tr")).to_have_count(15)
    page.click("#all-episodes")
    expect(page.locator("#episode-list")).to_have_attribute("data-complete", "true")
    expect(page.locator("#episode-count")).to_have_text("16 episodes")
    expect(page.locator("#filter-environment")).to_have_value("string_ops")
    expect(page.locator("#episodes tbody tr", has_text="arithmetic")).to_have_count(0)
