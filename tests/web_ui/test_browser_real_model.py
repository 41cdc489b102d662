"""The playground in Chromium on the real local model (the session's shared engine), not the scripted one: a task
submitted from the page is solved by SmolLM2 through the executor, verified, and its attempt opens step by step."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from lamarck.platform.container import Container
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import ApiSettings, Settings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

from .conftest import Browse

TIMEOUT_MS = 300_000  # the local model on a loaded 2-core machine; usually a few seconds


@pytest.fixture
def container(db: Database, tmp_path: Path, local_gateway: LLMGateway) -> Iterator[Container]:
    """The app over the real local model (this module's override of the API tests' scripted container)."""
    with db.session() as session:
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
    container = Container(
        Settings(data_dir=tmp_path / "data", api=ApiSettings(task_workers=1, sse_poll_seconds=0.05)),
        db=db,
        gateway=local_gateway,
    )
    yield container
    container.close()


@pytest.mark.slow
def test_the_real_model_answers_a_task_from_the_playground(browse: Browse, keys: dict[str, dict[str, str]]) -> None:
    browse.sign_in(keys["all"]["Authorization"].removeprefix("Bearer "))
    page = browse.page
    browse.goto("/ui/playground.html")
    page.fill("#prompt", "What is 2 + 3?")
    page.select_option("#environment", "arithmetic")
    page.fill("#expected", "5")
    page.select_option("#model", "smollm2-135m")
    page.click("#solve")
    expect(page.locator("#task-status")).to_have_text("succeeded", timeout=TIMEOUT_MS)
    expect(page.locator("#result")).to_contain_text(re.compile(r"(passed|failed) \(reward"))
    expect(page.locator("#attempts li")).to_have_count(1)
    page.locator("#attempts a").click()
    expect(page.locator("#task")).to_have_text("What is 2 + 3?")
    expect(page.locator("#steps > li").first).not_to_be_empty()
