"""The API going away under an open page, in a real browser: a call that gets no answer (the server stopped) or a 5xx
puts up a banner saying the API is unreachable and tries again with backoff; what the page showed stays; when the
API is back the banner goes and the page shows what it had asked for, by itself, on every page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from api.test_harnesses import _archive
from api.test_models import _lineage
from api.test_skills import _skill
from lamarck.platform.container import Container

from .conftest import Browse
from .loop_data import add_generation, running_loop

REFUSED = "ERR_CONNECTION_REFUSED|ERR_INCOMPLETE_CHUNKED_ENCODING|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET"
BACK_MS = 20_000  # the first retries come 1 s, 2 s and 4 s after the first failure


def _key(keys: dict[str, dict[str, str]], name: str) -> str:
    return keys[name]["Authorization"].removeprefix("Bearer ")


def test_a_click_while_the_server_is_stopped_is_answered_once_it_is_back(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    root, cooler, _ = _archive(container)
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto("/ui/harnesses.html?environment=arithmetic")
    expect(page.locator("#detail")).to_contain_text(f"Harness {root}")
    banner = page.locator("#api-down")
    expect(banner).to_have_count(0)
    browse.expect_console(REFUSED)

    browse.server.stop()
    page.locator(f'#tree g.node[data-id="{cooler}"]').click()
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("The Lamarck API is unreachable: the server does not answer")
    expect(banner).to_contain_text("Retrying in")
    expect(page.locator("#detail")).to_contain_text(f"Harness {root}")  # the page stays as it was
    expect(page.locator("#tree g.node")).to_have_count(3)
    expect(page.locator("#message")).to_be_hidden()
    page.wait_for_timeout(3500)  # a retry or two fail while it is away: the banner stays, the wait grows
    expect(banner).to_be_visible()

    browse.server.start()
    expect(banner).to_be_hidden(timeout=BACK_MS)
    expect(page.locator("#detail")).to_contain_text(f"Harness {cooler}")
    expect(page.locator("#parent-diff")).to_contain_text("sampling.temperature")


def test_the_run_view_recovers_by_itself_when_the_server_returns(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    loop = running_loop(container, generations=1)
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto(f"/ui/run.html?id={loop.run_id}")
    expect(page.locator("#stream-state")).to_have_text("live")
    expect(page.locator("#success-chart")).to_have_attribute("data-points", "1")
    browse.expect_console(REFUSED)

    browse.server.stop()
    banner = page.locator("#api-down")
    expect(banner).to_be_visible()  # the event stream dropped and the sign-in check got no answer
    expect(banner).to_contain_text("unreachable")
    expect(page.locator("#success-chart")).to_have_attribute("data-points", "1")
    add_generation(container, loop.run_id, 1, difficulty=2)  # written while the browser cannot reach the server

    browse.server.start()
    expect(banner).to_be_hidden(timeout=BACK_MS)
    expect(page.locator("#stream-state")).to_have_text("live", timeout=BACK_MS)
    expect(page.locator("#success-chart")).to_have_attribute("data-points", "2")
    expect(page.locator("#ticker li[data-type=generation_summary]")).to_have_count(2)


def _unavailable(route: Any) -> None:
    body = {"error": {"code": "unavailable", "message": "the database is restarting"}}
    route.fulfill(status=503, content_type="application/json", body=json.dumps(body))


@pytest.mark.parametrize(
    ("page_path", "shown"),
    [
        ("/ui/", "#runs tbody tr"),
        ("/ui/run.html?id={run}", "#success-chart[data-points='3']"),
        ("/ui/compare.html?run={run}&run={run}", "#overlay .uplot"),
        ("/ui/episode.html?id={episode}", "#steps > li"),
        ("/ui/episodes.html?run={run}", "#episodes tbody tr a"),
        ("/ui/models.html", "#tree g.node"),
        ("/ui/harnesses.html?environment=arithmetic", "#tree g.node"),
        ("/ui/skills.html", "#skills tbody tr"),
        ("/ui/playground.html", "#environment option[value=arithmetic]"),
    ],
)
def test_every_page_shows_the_banner_on_5xx_and_its_data_once_the_api_answers(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container, page_path: str, shown: str
) -> None:
    loop = running_loop(container)
    _lineage(container)
    _archive(container)
    _skill(container, "alpha", used=4, succeeded=3)
    browse.sign_in(_key(keys, "read"))
    browse.expect_console("status of 503")
    browse.expect_console("EventSource's response has a MIME type")
    page = browse.page
    page.route("**/v1/**", _unavailable)
    browse.goto(page_path.format(run=loop.run_id, episode=loop.episodes["s2"]))
    banner = page.locator("#api-down")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("The Lamarck API is unreachable: it answered HTTP 503 (the database is restarting)")
    expect(page.locator("h1")).to_be_visible()  # never a blank page
    expect(page.locator("#session")).to_contain_text("key ")  # signed in: /ui/session still answers
    expect(page.locator(shown).first).to_have_count(0)

    page.unroute("**/v1/**", _unavailable)
    expect(banner).to_be_hidden(timeout=BACK_MS)
    expect(page.locator(shown).first).to_be_attached()
    expect(page.locator("#message")).to_be_hidden()
