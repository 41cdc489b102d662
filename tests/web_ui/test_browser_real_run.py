"""A short real run on the embedded model (SmolLM2-135M on the session's shared local engine: executor and judge),
watched in Chromium from its first event: the dashboard loads, each generation adds a point to the curve without a
reload, the heatmap fills and moves on to the new generation, and an episode the model played opens step by step.
The README's screenshots of the run view, the heatmap, the model lineage and the episode viewer come from here."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from api.test_loop_run_reads import _support
from lamarck.agents.orchestrator import Orchestrator
from lamarck.agents.runs import RunConfig
from lamarck.memory.chroma import ChromaMemory
from lamarck.platform.container import Container
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import DEFAULT_MODEL_VERSION, ApiSettings, Settings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

from .conftest import Browse, screenshot

TIMEOUT_MS = 600_000  # the real model on a 2-core machine shared with other work; about a minute when idle
POINTS = "n => Number(document.querySelector('#success-chart').dataset.points) >= n"
# the heatmap's cells that hold a success rate (not "not attempted yet", not outside the environment's ladder)
FILLED_CELLS = "#heatmap td[data-environment]:not(.empty):not(.none)"


@pytest.fixture
def container(db: Database, tmp_path: Path, local_gateway: LLMGateway) -> Iterator[Container]:
    """The API app's container over the real local model (this module's override of the API tests' scripted one)."""
    with db.session() as session:
        repo.register_model_version(
            session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
        )
    container = Container(
        Settings(data_dir=tmp_path / "data", api=ApiSettings(sse_poll_seconds=0.05)), db=db, gateway=local_gateway
    )
    yield container
    container.close()


def tiny_config() -> RunConfig:
    """What ``make run`` runs, smaller: three arithmetic tasks a generation, one attempt each, judged by the model;
    no hint ladder, repairs, skill induction or distillation, and Thompson sampling for the frontier (the default
    learnable-cells frontier first evaluates the model greedily on 27 development tasks, several times the run)."""
    return RunConfig(
        environments=["arithmetic"],
        generations=2,
        batch_size=3,
        samples_per_task=1,
        llm_share=0.0,
        hints=["none"],
        repair=False,
        induce_skills=False,
        frontier="thompson",
        seed=3,
    )


@pytest.mark.slow
def test_a_real_model_run_watched_live(
    browse: Browse,
    keys: dict[str, dict[str, str]],
    container: Container,
    local_gateway: LLMGateway,
    tmp_path: Path,
) -> None:
    browse.sign_in(keys["read"]["Authorization"].removeprefix("Bearer "))
    page = browse.page
    memory = ChromaMemory.embedded(tmp_path / "loop" / "chroma")
    try:
        loop = _support().make_container(container.db, tmp_path / "loop", local_gateway, memory)
        orchestrator = Orchestrator(loop, seed_builtins=False)
        run_id = orchestrator.start(tiny_config(), name="SmolLM2 live")
        browse.goto(f"/ui/run.html?id={run_id}")
        expect(page.locator("#stream-state")).to_have_text("live")
        expect(page.locator("#heatmap")).to_contain_text("No attempts yet.")
        page.evaluate("window.sameDocument = true")  # gone if anything reloads the page
        outcome: list[object] = []
        driver = threading.Thread(target=lambda: outcome.append(orchestrator.run(run_id)), daemon=True)
        driver.start()

        page.wait_for_function(POINTS, arg=1, timeout=TIMEOUT_MS)
        expect(page.locator(FILLED_CELLS).first).to_be_visible()
        first_points = page.locator("#success-chart").get_attribute("data-points")
        first_generation = page.locator("#heatmap").get_attribute("data-generation")
        page.wait_for_function(POINTS, arg=2, timeout=TIMEOUT_MS)
        driver.join(timeout=TIMEOUT_MS / 1000)
    finally:
        memory.close()
    assert outcome and getattr(outcome[0], "status", None) == "finished", outcome
    assert page.evaluate("window.sameDocument === true"), "the page reloaded"
    assert (first_points, first_generation) == ("1", "0")  # a generation takes seconds: one point, then the next
    expect(page.locator("#heatmap")).to_have_attribute("data-generation", "1")
    expect(page.locator(FILLED_CELLS).first).to_be_visible()
    expect(page.locator("#status")).to_have_text("finished")
    expect(page.locator("#ticker")).to_contain_text("run finished after 2 generations")
    expect(page.locator("#budget")).to_contain_text("tokens")
    screenshot(page, "ui-run")
    screenshot(page.locator("#capability"), "ui-heatmap")

    page.locator("#episodes tbody tr").first.get_by_role("link").click()
    expect(page.locator("#steps > li")).not_to_have_count(0)
    expect(page.locator("#verdict")).to_contain_text("reward")
    screenshot(page, "ui-episode")

    browse.goto("/ui/models.html")
    expect(page.locator(f'#tree g.node.promoted[data-id="{DEFAULT_MODEL_VERSION}"]')).to_have_count(1)
    page.locator(f'#tree g.node[data-id="{DEFAULT_MODEL_VERSION}"]').click()
    expect(page.locator("#detail")).to_contain_text(f"Version {DEFAULT_MODEL_VERSION}")
    screenshot(page, "ui-models")
