"""The episode viewer, two episodes side by side, and Swagger UI at /docs, in a real browser: everything from this
origin, nothing in the console."""

from __future__ import annotations

from playwright.sync_api import expect

from lamarck.platform.container import Container

from .conftest import Browse, screenshot
from .loop_data import running_loop


def _sign_in(browse: Browse, keys: dict[str, dict[str, str]]) -> None:
    browse.sign_in(keys["read"]["Authorization"].removeprefix("Bearer "))


def test_an_episode_step_by_step_with_the_verdict_and_lesson(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    loop = running_loop(container)
    _sign_in(browse, keys)
    page = browse.page
    browse.goto(f"/ui/run.html?id={loop.run_id}")
    page.get_by_role("link", name=loop.episodes["s2"]).click()

    expect(page.locator("#task")).to_have_text("reverse ab")
    steps = page.locator("#steps > li")
    expect(steps).to_have_count(4)
    assert [steps.nth(i).get_attribute("data-kind") for i in range(4)] == [
        "prompt",
        "tool_call",
        "observation",
        "model_output",
    ]
    expect(steps.nth(1)).to_contain_text('calculator({"expr": "6*7"})')
    expect(steps.nth(2)).to_contain_text("observation from calculator")
    verdict = page.locator("#verdict")
    expect(verdict).to_contain_text("failed")
    expect(verdict).to_contain_text("3 — step 3, the reversal")
    expect(verdict).to_contain_text("reverse the string before answering")
    expect(page.locator("#episode")).to_contain_text("harness string_ops-h1")

    page.fill("#other", loop.episodes["a21"])
    page.click("#compare-form input[type=submit]")
    rows = page.locator("#comparison tbody tr.step")
    expect(rows).to_have_count(4)
    assert [rows.nth(i).get_attribute("data-same") for i in range(4)] == ["true", "true", "true", "false"]
    expect(page.locator("#episode")).to_contain_text("Different tasks. They first differ at step 3.")
    screenshot(page, "ui-compare")


def test_an_unknown_episode_is_explained_on_the_page(browse: Browse, keys: dict[str, dict[str, str]]) -> None:
    _sign_in(browse, keys)
    browse.expect_console("status of 404")
    browse.goto("/ui/episode.html?id=nope")
    expect(browse.page.locator("#message")).to_contain_text('There is no episode "nope"')
    expect(browse.page.locator("#episode")).to_be_hidden()


def test_swagger_ui_from_local_files(browse: Browse) -> None:
    loaded: list[str] = []
    browse.page.on("request", lambda request: loaded.append(request.url))
    browse.goto("/docs")
    expect(browse.page.locator(".swagger-ui .info .title")).to_contain_text("Lamarck")
    expect(browse.page.locator(".opblock-tag-section").first).to_be_visible()
    assert any(url.endswith("/ui/vendor/swagger-ui/swagger-ui-bundle.js") for url in loaded)
