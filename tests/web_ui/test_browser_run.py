"""The run live view in a real browser: curves, heatmap and ticker from the stored run; a new generation arriving
grows the curve, moves the heatmap and adds ticker lines without a reload; stop and resume; the stream survives the
server going away and coming back without losing an event; an unknown run id is explained on the page."""

from __future__ import annotations

from playwright.sync_api import expect

from lamarck.platform.container import Container

from .conftest import Browse
from .loop_data import add_generation, running_loop, summarize


def _key(keys: dict[str, dict[str, str]], name: str) -> str:
    return keys[name]["Authorization"].removeprefix("Bearer ")


def test_a_new_generation_grows_the_curve_and_moves_the_heatmap_without_a_reload(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    loop = running_loop(container)
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto(f"/ui/run.html?id={loop.run_id}")
    expect(page.locator("#stream-state")).to_have_text("live")
    expect(page.locator("#success-chart")).to_have_attribute("data-points", "3")
    expect(page.locator("#reward-chart")).to_have_attribute("data-points", "3")
    expect(page.locator("#ticker li")).to_have_count(4)
    heatmap = page.locator("#heatmap")
    expect(heatmap).to_have_attribute("data-generation", "2")
    expect(heatmap.locator("td.frontier")).to_have_count(2)  # arithmetic d1 and string_ops d2
    expect(heatmap.locator('td[data-environment="arithmetic"][data-difficulty="1"]')).to_have_text("75%")
    expect(heatmap.locator('td[data-environment="arithmetic"][data-difficulty="9"]')).to_have_text("·")  # ladder
    page.evaluate("window.notReloaded = true")

    add_generation(container, loop.run_id, 3, difficulty=2)
    expect(page.locator("#success-chart")).to_have_attribute("data-points", "4")
    expect(page.locator("#ticker li").first).to_contain_text("generation 3: 3 of 4 solved (75%)")
    expect(page.locator("#ticker li")).to_have_count(4 + 4 * 2 + 1)
    expect(page.locator("#current-step")).to_contain_text("generation 3")
    expect(heatmap).to_have_attribute("data-generation", "3")
    climbed = heatmap.locator('td[data-environment="arithmetic"][data-difficulty="2"]')
    expect(climbed).to_have_class("frontier")
    expect(climbed).to_have_text("75%")
    expect(heatmap.locator('td[data-environment="arithmetic"][data-difficulty="1"]')).to_have_class("stale")
    expect(page.locator("#episodes tbody tr")).to_have_count(15)
    assert page.evaluate("window.notReloaded") is True

    page.locator("#generation-slider").evaluate("s => { s.value = '0'; s.dispatchEvent(new Event('input')); }")
    expect(heatmap).to_have_attribute("data-generation", "0")
    expect(heatmap.locator('td[data-environment="arithmetic"][data-difficulty="2"]')).to_have_text("·")
    expect(heatmap.locator('td[data-environment="arithmetic"][data-difficulty="1"]')).to_have_text("25%")
    summarize(container, loop.run_id, 3, attempts=4, successes=3)  # a refresh keeps the chosen generation
    expect(page.locator("#ticker li")).to_have_count(4 + 4 * 2 + 2)
    expect(heatmap).to_have_attribute("data-generation", "0")


def test_stop_and_resume_from_the_page(browse: Browse, keys: dict[str, dict[str, str]], container: Container) -> None:
    loop = running_loop(container, generations=1)
    browse.sign_in(_key(keys, "all"))
    page = browse.page
    browse.goto(f"/ui/run.html?id={loop.run_id}")
    expect(page.locator("#status")).to_have_text("running")
    expect(page.locator("#resume")).to_be_disabled()
    page.click("#stop")
    expect(page.locator("#status")).to_have_text("stopped")  # no process owns it, so it stops at once
    expect(page.locator("#stop")).to_be_disabled()
    page.click("#resume")
    expect(page.locator("#control-note")).to_contain_text("resuming")
    assert browse.server.launches == [(loop.run_id, "resume")]


def test_the_stream_comes_back_after_the_server_drops_and_loses_no_event(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    loop = running_loop(container, generations=1)
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto(f"/ui/run.html?id={loop.run_id}")
    expect(page.locator("#stream-state")).to_have_text("live")
    expect(page.locator("#ticker li")).to_have_count(2)
    browse.expect_console("ERR_CONNECTION_REFUSED|ERR_INCOMPLETE_CHUNKED_ENCODING|ERR_EMPTY_RESPONSE")

    browse.server.stop()
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "reconnecting")
    expect(page.locator("#stream-state")).to_contain_text("reconnecting in")
    for generation in (1, 2):  # written while the browser cannot reach the server
        summarize(container, loop.run_id, generation, attempts=4, successes=generation)
    browse.server.start()

    expect(page.locator("#stream-state")).to_have_text("live", timeout=20_000)
    lines = page.locator("#ticker li")
    expect(lines).to_have_count(4)
    assert [lines.nth(i).get_attribute("data-type") for i in range(2)] == ["generation_summary"] * 2
    ids = [int(lines.nth(i).get_attribute("data-id") or 0) for i in range(4)]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 4


def test_an_unknown_run_is_explained_on_the_page(browse: Browse, keys: dict[str, dict[str, str]]) -> None:
    browse.sign_in(_key(keys, "read"))
    browse.expect_console("status of 404")
    browse.goto("/ui/run.html?id=nope")
    expect(browse.page.locator("#message")).to_contain_text('There is no run "nope"')
    expect(browse.page.locator("#run")).to_be_hidden()
    browse.goto("/ui/run.html")
    expect(browse.page.locator("#message")).to_contain_text("No run was given")


def test_the_run_episodes_filtered_and_paged(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    loop = running_loop(container)
    add_generation(container, loop.run_id, 3, difficulty=2)
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto(f"/ui/run.html?id={loop.run_id}")
    rows = page.locator("#episodes tbody tr")
    expect(rows).to_have_count(15)
    page.click("#more-episodes")
    expect(rows).to_have_count(19)
    expect(page.locator("#more-episodes")).to_be_hidden()
    page.select_option("#filter-environment", "string_ops")
    expect(rows).to_have_count(3)
    page.select_option("#filter-environment", "")
    page.select_option("#filter-outcome", "failed")
    page.fill("#filter-generation", "3")
    page.locator("#filter-generation").dispatch_event("change")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("arithmetic d2")
    page.fill("#filter-generation", "7")
    page.locator("#filter-generation").dispatch_event("change")
    expect(rows).to_have_text("No episodes match.")
