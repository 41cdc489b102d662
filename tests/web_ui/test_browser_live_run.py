"""A real run of the loop (every agent on the orchestrator tests' scripted model) watched in Chromium from its first
event: each generation adds a point to the curves as it is recorded, the heatmap and ticker follow, and the run ends
finished on the page; an episode it judged opens with the critic's lesson. The scripted judge makes its verdicts and
lessons exact; test_browser_real_run.py watches a run on the real model (and makes the README's screenshots)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from api.test_loop_run_reads import _support
from lamarck.platform.container import Container

from .conftest import Browse

RUN_TIMEOUT_MS = 300_000  # a loaded 2-core machine takes about 100 s for the three generations


@pytest.mark.slow
def test_a_real_run_watched_live(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container, tmp_path: Path
) -> None:
    support = _support()
    browse.sign_in(keys["read"]["Authorization"].removeprefix("Bearer "))
    page = browse.page
    with support.scripted_orchestrator(container.db, tmp_path / "loop") as orchestrator:
        run_id = orchestrator.start(support.small_config(generations=3), name="watched")
        browse.goto(f"/ui/run.html?id={run_id}")
        expect(page.locator("#stream-state")).to_have_text("live")
        expect(page.locator("#heatmap")).to_contain_text("No attempts yet.")
        outcome: list[object] = []
        driver = threading.Thread(target=lambda: outcome.append(orchestrator.run(run_id)), daemon=True)
        driver.start()
        for points in (1, 2, 3):  # at least: one refresh may bring two generations when they finish close together
            page.wait_for_function(
                "n => Number(document.querySelector('#success-chart').dataset.points) >= n",
                arg=points,
                timeout=RUN_TIMEOUT_MS,
            )
        driver.join(timeout=RUN_TIMEOUT_MS / 1000)
    assert outcome and getattr(outcome[0], "status", None) == "finished"
    expect(page.locator("#status")).to_have_text("finished")
    expect(page.locator("#ticker")).to_contain_text("run finished after 3 generations")
    expect(page.locator("#heatmap")).to_have_attribute("data-generation", "2")
    expect(page.locator("#budget")).to_contain_text("tokens")

    page.locator("#episodes tbody tr", has_text="failed").first.get_by_role("link").click()
    expect(page.locator("#verdict")).to_contain_text("Stories with")
    expect(page.locator("#steps > li")).not_to_have_count(0)
