"""The playground in a real browser: a task submitted with the session cookie (and the page's own Origin) is solved
by the executor on the API tests' scripted model, verified, and its attempt opens in the episode viewer."""

from __future__ import annotations

from playwright.sync_api import expect

from .conftest import Browse


def _key(keys: dict[str, dict[str, str]], name: str) -> str:
    return keys[name]["Authorization"].removeprefix("Bearer ")


def test_a_task_submitted_in_the_playground_is_answered(browse: Browse, keys: dict[str, dict[str, str]]) -> None:
    browse.sign_in(_key(keys, "all"))
    page = browse.page
    browse.goto("/ui/playground.html")
    page.fill("#prompt", "What is 6 * 7?")
    page.select_option("#environment", "arithmetic")
    page.fill("#expected", "42")
    page.select_option("#model", "smollm2-135m")
    page.click("#solve")
    expect(page.locator("#task-status")).to_have_text("succeeded", timeout=30_000)
    expect(page.locator("#task-answer")).to_have_text("42")
    expect(page.locator("#result")).to_contain_text("passed (reward 1)")
    expect(page.locator("#attempts li")).to_have_count(1)
    page.locator("#attempts a").click()
    expect(page.locator("#task")).to_have_text("What is 6 * 7?")
    expect(page.locator("#steps > li").last).to_contain_text("ANSWER: 42")


def test_a_key_without_the_tasks_scope_cannot_submit(browse: Browse, keys: dict[str, dict[str, str]]) -> None:
    browse.sign_in(_key(keys, "read"))
    browse.goto("/ui/playground.html")
    expect(browse.page.locator("#task-note")).to_contain_text("tasks scope")
    expect(browse.page.locator("#solve")).to_be_disabled()
