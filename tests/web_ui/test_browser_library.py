"""The model lineage tree with each version's gate result, promote after confirmation, the harness lineage with its
diffs, and the skill library with code, in a real browser."""

from __future__ import annotations

from playwright.sync_api import expect

from api.test_harnesses import _archive
from api.test_models import BASE, CANDIDATE, GRANDCHILD, _lineage
from api.test_skills import _skill
from lamarck.platform.container import Container

from .conftest import Browse, screenshot


def _key(keys: dict[str, dict[str, str]], name: str) -> str:
    return keys[name]["Authorization"].removeprefix("Bearer ")


def test_the_lineage_tree_with_gate_results_and_a_confirmed_promotion(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    _lineage(container)
    browse.sign_in(_key(keys, "all"))
    page = browse.page
    browse.goto("/ui/models.html")
    nodes = page.locator("#tree g.node")
    expect(nodes).to_have_count(3)
    expect(page.locator("#tree path.edge")).to_have_count(2)
    expect(page.locator(f'#tree g.node.promoted[data-id="{BASE}"]')).to_have_count(1)
    expect(page.locator("#detail")).to_contain_text("Not gated.")

    page.locator(f'#tree g.node[data-id="{CANDIDATE}"]').click()
    detail = page.locator("#detail")
    expect(detail).to_contain_text(f"Version {CANDIDATE}")
    expect(detail).to_contain_text("5 / 1")
    expect(detail).to_contain_text("0.030 (alpha 0.050, look 1)")
    expect(page.locator("#gate-environments tbody tr")).to_contain_text("+0.400")

    page.click("#promote")
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    expect(dialog.locator("h2")).to_have_text(f"Promote {CANDIDATE}?")
    expect(dialog.locator("#confirm-changes")).to_contain_text(f"{CANDIDATE} becomes the champion in place of {BASE}")
    expect(dialog.locator("#confirm-scope")).to_contain_text("every environment")
    dialog.locator("#confirm-ok").click()
    expect(dialog).to_have_count(0)
    expect(page.locator("#message")).to_be_visible()
    expect(page.locator("#message")).to_contain_text(f"the champion is now {CANDIDATE}")
    expect(page.locator(f'#tree g.node.promoted[data-id="{CANDIDATE}"]')).to_have_count(1)
    expect(page.locator(f'#tree g.node[data-id="{GRANDCHILD}"]')).to_have_count(1)

    page.click("#rollback")  # the promoted candidate is shown: rolling back restores the base
    expect(dialog.locator("#confirm-changes")).to_contain_text(f"{BASE} becomes the champion again")
    dialog.locator("#confirm-ok").click()
    expect(page.locator("#message")).to_contain_text(f"Roll back the champion: the champion is now {BASE}")
    expect(page.locator(f'#tree g.node.promoted[data-id="{BASE}"]')).to_have_count(1)


def test_a_read_key_sees_the_lineage_without_the_controls(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    _lineage(container)
    browse.sign_in(_key(keys, "read"))
    browse.goto(f"/ui/models.html?id={CANDIDATE}")
    expect(browse.page.locator("#detail")).to_contain_text("need a key with the models scope")
    expect(browse.page.locator("#promote")).to_have_count(0)


def test_the_skill_library_with_code_and_versions(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    _skill(container, "alpha", used=4, succeeded=3)
    _skill(container, "delta", versions=2)
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto("/ui/skills.html")
    expect(page.locator("#skills tbody tr")).to_have_count(2)
    expect(page.locator('#skills tr[data-name="alpha"]')).to_contain_text("75%")
    page.get_by_role("link", name="delta").click()
    expect(page.locator("#skill-code")).to_contain_text("return a + 1")
    expect(page.locator("#skill-tests")).to_have_text("assert delta(1) == 2")
    expect(page.locator("#skill-versions li")).to_have_count(2)
    assert page.url.endswith("skills.html?name=delta")


def test_the_harness_lineage_with_prompt_and_knob_diffs(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    root, cooler, prompted = _archive(container)
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto("/ui/harnesses.html?environment=arithmetic")
    expect(page.locator("#tree g.node")).to_have_count(3)
    expect(page.locator(f'#tree g.node.promoted[data-id="{root}"]')).to_have_count(1)
    expect(page.locator("#detail")).to_contain_text("The root of this lineage.")

    page.locator(f'#tree g.node[data-id="{cooler}"]').click()
    expect(page.locator("#parent-diff")).to_contain_text("sampling.temperature")
    expect(page.locator("#parent-diff")).to_contain_text("The system prompt is the same.")
    page.locator(f'#tree g.node[data-id="{prompted}"]').click()
    expect(page.locator("#parent-diff pre.diff .added").last).to_have_text("+Check the arithmetic twice.\n")
    screenshot(page, "ui-harnesses")

    page.select_option("#diff-a", root)
    page.select_option("#diff-b", prompted)
    page.click("#diff")
    expect(page.locator("#diff-view")).to_contain_text("sampling.temperature")
    expect(page.locator("#diff-view pre.diff")).to_contain_text("Check the arithmetic twice.")
    page.select_option("#environment", "string_ops")
    expect(page.locator("#tree")).to_contain_text("No harness archived for string_ops yet")


def test_lessons_found_by_meaning_with_their_counts(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    container.lessons.add(
        "Multiply before adding unless parentheses say otherwise.", environment="arithmetic", episode_id="e1"
    )
    browse.sign_in(_key(keys, "read"))
    page = browse.page
    browse.goto("/ui/skills.html")
    expect(page.locator("#message")).to_contain_text("No skills yet")
    page.fill("#lesson-query", "order of operations: 2 + 3 * 4")
    page.click("#lesson-search input[type=submit]")
    first = page.locator("#lessons tbody tr").first
    expect(first).to_contain_text("Multiply before adding")
    expect(first).to_contain_text("arithmetic")
