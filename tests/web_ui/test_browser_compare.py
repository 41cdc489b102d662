"""Two runs overlaid on one chart, chosen on the runs list, in a real browser."""

from __future__ import annotations

from playwright.sync_api import expect

from api.test_loop_reads import _loop
from lamarck.platform.container import Container

from .conftest import Browse


def test_two_runs_overlaid_from_the_runs_list(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    longer, shorter = _loop(container, generations=3), _loop(container, generations=2)
    browse.sign_in(keys["read"]["Authorization"].removeprefix("Bearer "))
    page = browse.page
    browse.goto("/ui/")
    expect(page.locator("#runs tbody tr")).to_have_count(2)
    page.locator(f'#runs tr[data-id="{longer.run_id}"] input').check()
    expect(page.locator("#compare")).to_be_hidden()
    page.locator(f'#runs tr[data-id="{shorter.run_id}"] input').check()
    page.click("#compare")

    chart = page.locator("#success-overlay")
    expect(chart).to_have_attribute("data-points", "3")
    expect(chart).to_contain_text(f"loop {longer.run_id[:6]}")
    expect(chart).to_contain_text(f"loop {shorter.run_id[:6]}")
    expect(chart).not_to_contain_text("overall")
    expect(page.locator("#title")).to_contain_text("Runs compared")


def test_a_comparison_needs_two_runs_that_exist(browse: Browse, keys: dict[str, dict[str, str]]) -> None:
    browse.sign_in(keys["read"]["Authorization"].removeprefix("Bearer "))
    browse.goto("/ui/compare.html?run=abc")
    expect(browse.page.locator("#message")).to_contain_text("Choose two runs")
    browse.expect_console("status of 404")
    browse.goto("/ui/compare.html?run=abc&run=def")
    expect(browse.page.locator("#message")).to_contain_text("does not exist")
